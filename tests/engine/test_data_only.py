"""Real data through the runner: header, data-only log, input diagnosis, faults."""

import numpy as np
import pytest

from helpers import install_fake_horovod, only_row, run_cli, run_inprocess
from tfbench.data.fake_imagenet import write_fake_imagenet

pytestmark = pytest.mark.slow

BASE = ["--device=cpu", "--model=trivial", "--image_size=32", "--batch_size=4",
        "--num_batches=3", "--num_warmup_batches=1", "--json_dir="]


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake_imagenet")
    write_fake_imagenet(str(out), num_train=32, num_validation=16, num_shards=2, seed=1,
                        image_size=48)
    return str(out)


def test_real_data_header_and_csv(tmp_path, fake_dir):
    code, lines = run_inprocess(BASE + ["--data_dir=" + fake_dir, "--csv_file=r.csv"], tmp_path)
    assert code == 0, lines
    assert "Dataset:     imagenet" in lines
    row = only_row(tmp_path / "r.csv")
    assert row["data_source"] == "imagenet_tfrecord" and row["status"] == "ok"


def test_use_synthetic_data_overrides_data_dir(tmp_path, fake_dir):
    code, lines = run_inprocess(BASE + ["--data_dir=" + fake_dir, "--use_synthetic_data",
                                        "--csv_file="], tmp_path)
    assert code == 0
    assert "Dataset:     imagenet (synthetic)" in lines
    assert any(l.startswith("--use_synthetic_data: synthetic inputs") for l in lines)


def test_data_only_uses_the_classic_format(tmp_path, fake_dir):
    code, lines = run_inprocess(BASE + ["--data_dir=" + fake_dir, "--data_only",
                                        "--csv_file="], tmp_path)
    assert code == 0, lines
    assert "Mode:        input pipeline only" in lines
    steps = [l for l in lines if l[:1].isdigit() and "images/sec:" in l]
    assert [s.split("\t")[0] for s in steps] == ["1"]
    assert steps[0].endswith("\t0.000")
    assert lines[-2].startswith("total images/sec: ")


def test_eval_on_real_data(tmp_path, fake_dir):
    train_dir = str(tmp_path / "ckpt")
    assert run_inprocess(BASE + ["--data_dir=" + fake_dir, "--train_dir=" + train_dir,
                                 "--csv_file="], tmp_path)[0] == 0
    code, lines = run_inprocess(BASE + ["--data_dir=" + fake_dir, "--train_dir=" + train_dir,
                                        "--eval", "--csv_file="], tmp_path)
    assert code == 0, lines
    assert any(l.startswith("Accuracy @ 1 = ") and l.endswith("[12 examples]") for l in lines)


def test_data_only_step_lines_and_total_are_one_figure(fake_dir):
    """--data_only's Step lines, its total and the input diagnosis's "input pipeline alone" are
    images over the loop's wall time, on a clock that also ticks between the batches."""
    from tfbench.config.settings import make_settings
    from tfbench.engine import base, runner
    from tfbench.output.classic_log import ClassicLog
    from tfbench.results import RunResult
    ticks = iter(range(10 ** 6))
    clock = base.Clock(perf_counter=lambda: next(ticks) * 0.001)   # 1 ms per reading
    lines = []
    res = runner.run(make_settings({"device": "cpu", "model": "trivial", "image_size": 32,
                                  "batch_size": 4, "num_batches": 10, "num_warmup_batches": 1,
                                  "display_every": 5, "data_dir": fake_dir, "data_only": True,
                                  "monitor_interval_ms": 0}),
                     ClassicLog(lines.append), RunResult(), clock=clock)
    last = [line for line in lines if line.startswith("10\timages/sec: ")][0]
    step_figure = float(last.split()[2])
    assert step_figure == pytest.approx(res.images_per_sec, abs=0.05)
    assert res.wall_time == pytest.approx(sum(res.step_times))


def test_a_real_data_log_holds_no_tensorflow_warning(tmp_path, fake_dir):
    """tf.distribute's per-device buffer (MultiDeviceIterator) made tf.data warn in the middle
    of the classic log that it "will not be optimized"; tfbench keeps that line out."""
    code, out = run_cli(BASE + ["--data_dir=" + fake_dir, "--csv_file="], tmp_path,
                        env_extra={"TF_CPP_MIN_LOG_LEVEL": "1"})   # the console script's level
    assert code == 0, out
    assert "will not be optimized" not in out
    assert out.splitlines()[-2].startswith("total images/sec: ")


def test_diagnose_input_writes_three_figures(tmp_path, fake_dir):
    code, lines = run_inprocess(BASE + ["--data_dir=" + fake_dir, "--diagnose_input",
                                        "--csv_file=d.csv"], tmp_path)
    assert code == 0, lines
    verdict = [l for l in lines if l.startswith("Input diagnosis: ") and "images/sec" in l]
    assert len(verdict) == 1 and "synthetic" in verdict[0] and "real data" in verdict[0]
    row = only_row(tmp_path / "d.csv")
    for key in ("synthetic_images_per_sec", "input_only_images_per_sec", "images_per_sec"):
        assert float(row[key]) > 0
    assert row["input_bound"] in ("0", "1")
    # What the pipeline read with, after the verdict (a CPU run: TensorFlow's shared threads).
    assert lines[lines.index(verdict[0]) + 1] == (
        "Input settings: TensorFlow's shared threads for tf.data (the default on the CPU); "
        "host buffers pageable (--noforce_gpu_compatible)")


def test_data_only_needs_real_data(tmp_path):
    code, out, err = run_cli(["--device=cpu", "--data_only", "--csv_file="], tmp_path,
                             merged=False)
    assert code == 2 and "--data_only needs real data" in err and "Traceback" not in err


def test_missing_data_dir_is_a_clear_error(tmp_path):
    code, out, err = run_cli(["--device=cpu", "--data_dir=%s" % (tmp_path / "nope"),
                              "--data_name=imagenet", "--csv_file="], tmp_path, merged=False)
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("tfbench: error:") and "nope" in last and "Traceback" not in err


def test_corrupt_record_names_the_file(tmp_path, fake_dir, capsys):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(fake_dir, bad)
    victim = sorted(p for p in bad.iterdir() if p.name.startswith("train-"))[0]
    data = bytearray(victim.read_bytes())
    data[20:60] = b"\xff" * 40
    victim.write_bytes(bytes(data))
    code, lines = run_inprocess(BASE + ["--data_dir=%s" % bad, "--csv_file=r.csv"], tmp_path)
    assert code == 2
    (said,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert said.startswith("tfbench: error: ") and victim.name in said
    # The first step could not read its batch: nothing ran, so no row (docs/output.md).
    assert not (tmp_path / "r.csv").exists()


def _epoch_labels(data_dir, monkeypatch, rank, size, train):
    """Labels one horovod process's replica reads in one epoch, through the runner's input path."""
    from tfbench.engine.base import ModeRunner
    from tfbench.engine.resolved import resolve
    from tfbench.distribute import strategy as strategy_lib
    from tfbench.config.settings import make_settings
    install_fake_horovod(monkeypatch, rank=rank, size=size)
    p = make_settings({"device": "cpu", "model": "trivial", "image_size": 16, "batch_size": 2,
                     "data_dir": data_dir, "variable_update": "horovod"})
    plan = resolve(p)
    bench = ModeRunner(p=p, plan=plan,
                       strategy=strategy_lib.make_strategy(p, plan.device).strategy)
    iterator, from_iterator = bench.inputs(2, train=train)
    assert from_iterator
    labels = [next(iterator)[1].numpy() for _ in range(8 // size // 2)]
    return sorted(np.concatenate(labels).tolist())


@pytest.mark.parametrize("train", [True, False])
def test_horovod_processes_read_disjoint_shares_of_real_data(tmp_path, monkeypatch, train):
    """Each Horovod rank reads batches of its own: no two ranks read the same examples."""
    from multiworker_checks import write_labelled_split
    labels = write_labelled_split(str(tmp_path), "train" if train else "validation", 4, 2, 1)
    parts = [_epoch_labels(str(tmp_path), monkeypatch, rank, 2, train) for rank in range(2)]
    assert sorted(parts[0] + parts[1]) == labels


def test_a_gpu_run_reads_real_data_with_the_legacy_private_pool(fake_dir, monkeypatch):
    """The legacy script gave tf.data a private pool of the CPUs minus the GPU threads on GPU
    runs; tfbench read with TensorFlow's shared threads unless the flag was given."""
    import os
    from helpers import FakeGpu
    from tfbench.config.settings import make_settings
    from tfbench.distribute import devices
    from tfbench.engine.base import ModeRunner
    from tfbench.engine.resolved import resolve
    monkeypatch.setattr(devices, "visible_gpus", lambda: [FakeGpu(i) for i in range(2)])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))   # usable CPUs

    def pool(flags):
        p = make_settings(dict(flags, device="gpu", num_gpus=2, model="trivial", image_size=32,
                             data_dir=fake_dir, data_name="imagenet"))
        runner = ModeRunner.__new__(ModeRunner)
        runner.p, runner.plan = p, resolve(p)
        return runner.pipeline(4, train=True).options().threading.private_threadpool_size

    assert pool({}) == 16 - 2 * 2 - 2 * 2
    assert pool({"datasets_num_private_threads": 3}) == 3
    assert pool({"datasets_num_private_threads": 0}) in (None, 0)


@pytest.mark.parametrize("flags, message", [
    (["--validate_devices"], "--validate_devices and --diagnose_input each run their own probes "
                             "after a run: give one of them"),
    (["--validate_device_checks=kernels"],
     "--validate_device_checks chooses --validate_devices' checks: add --validate_devices"),
    (["--num_gpus=2", "--validate_allreduce_json=ar.json"],
     "--validate_allreduce_json and --diagnose_input each run their own probes after a run: "
     "give one of them")])
def test_diagnose_input_refuses_the_probe_options_as_given(tmp_path, fake_dir, flags, message,
                                                           capsys):
    """Its three runs are without --diagnose_input: the probes' options are refused on the
    flags the user gave, before any of them starts (engine.actions.checked_facts)."""
    code, lines = run_inprocess(BASE + ["--data_dir=" + fake_dir, "--diagnose_input",
                                        "--csv_file=d.csv"] + flags, tmp_path)
    assert (code, lines) == (2, [])                  # no header: nothing started
    assert capsys.readouterr().err.splitlines()[-1] == "tfbench: error: " + message
