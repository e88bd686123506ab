"""--accum_steps in whole runs: every image counted, real data's batch split into micro-batches."""

import pytest

from helpers import only_row, run_inprocess


ARGS = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=2",
        "--num_batches=2", "--num_warmup_batches=1", "--json_dir=", "--monitor_interval_ms=0"]


@pytest.mark.slow
def test_cli_counts_every_image(tmp_path):
    code, lines = run_inprocess(ARGS + ["--accum_steps=3", "--csv_file=r.csv"], tmp_path)
    assert code == 0, lines
    assert "Gradient accumulation: 3 micro-batches of 2 per device per update " \
           "(6 images per device per step)" in lines
    assert "Batch size:  6 global" in lines and "             2 per device" in lines
    row = only_row(tmp_path / "r.csv")
    assert row["accum_steps"] == "3" and row["global_batch_size"] == "6"


@pytest.mark.slow
def test_real_data_iterator_splits_the_batch(tmp_path):
    from tfbench.data.fake_imagenet import write_fake_imagenet
    data_dir = tmp_path / "data"
    write_fake_imagenet(str(data_dir), num_train=16, num_validation=0, num_shards=1, seed=1,
                        image_size=24)
    code, lines = run_inprocess(ARGS + ["--accum_steps=2", "--data_dir=%s" % data_dir,
                                        "--csv_file="], tmp_path)
    assert code == 0, lines
    assert "Batch size:  4 global" in lines
    assert lines[-2].startswith("total images/sec: ")
