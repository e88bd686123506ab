"""`tfbench` (`tfbench run`, tfbench.cli.run): what a run refuses before TensorFlow starts."""

import os
import subprocess
import sys

import pytest

from helpers import ROOT


@pytest.mark.slow
def test_an_unknown_model_is_refused_in_one_line_before_tensorflow_is_imported(tmp_path):
    code = ("import sys; from tfbench import cli; c = cli.main(['tfbench', '--model=resnet51', "
            "'--csv_file=', '--json_dir=']); print(c, 'tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert proc.stdout.split() == ["2", "False"], proc.stderr
    from tfbench.models import catalog   # the whole list, counted from the registry itself
    assert proc.stderr.splitlines() == [
        "tfbench: error: Invalid model name 'resnet51': did you mean resnet56, resnet50 or "
        "resnet152? `tfbench models` lists all %d models" % len(catalog.names())]


def _tfbench(args, cwd, capsys):
    """`tfbench ARGS` in this process, from `cwd`: (exit code, stdout, stderr)."""
    from tfbench import cli
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.main(["tfbench", "--device=cpu", "--model=trivial"] + list(args))
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
@pytest.mark.parametrize("data_name", ["", "imagenet"])
def test_a_missing_data_dir_prints_nothing_before_its_error_line(tmp_path, capsys, data_name):
    # With --data_name=imagenet the legacy header and `Generating training model` came first:
    # a parser saw a header without a footer. Now as without --data_name: one line, no more.
    missing = tmp_path / "imagenet"
    code, out, err = _tfbench(["--data_dir=%s" % missing, "--data_name=%s" % data_name,
                               "--csv_file=r.csv"], tmp_path, capsys)
    assert (code, out) == (2, "")
    hint = (" (expected ImageNet TFRecords in the legacy layout; create a small one with "
            "`tfbench make_fake_imagenet --out DIR`)") if data_name == "imagenet" else ""
    assert err.splitlines()[-1:] == [
        "tfbench: error: --data_dir=%s does not exist or is not a directory%s" % (missing, hint)]
    assert [l for l in err.splitlines() if "error" in l.lower()] == err.splitlines()[-1:]
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_folder_data_is_counted_before_the_header_and_refused_below_a_batch(tmp_path, capsys):
    import numpy as np
    import tensorflow as tf
    from helpers import only_row, run_inprocess
    plots = tmp_path / "report" / "plots"   # `tfbench report`'s PNGs: not a dataset
    plots.mkdir(parents=True)
    for i in range(9):
        (plots / ("%d.png" % i)).write_bytes(
            tf.io.encode_png(np.full((8, 8, 3), 20 * i, np.uint8)).numpy())
    found = "Found 9 images in 1 class (plots) in %s" % plots.parent
    common = ["--device=cpu", "--model=trivial", "--data_dir=%s" % plots.parent,
              "--image_size=8", "--num_batches=2", "--num_warmup_batches=1", "--json_dir="]
    code, lines = run_inprocess(common + ["--batch_size=4", "--csv_file=r.csv"], tmp_path)
    assert code == 0, lines
    # tfbench's own line, before the legacy header (whose lines are as they were) and saved
    # with the row's notices; the log still ends with the footer.
    header = lines.index(next(l for l in lines if l.startswith("TensorFlow:  ")))
    assert lines.index(found) < header
    assert lines[header + 2:header + 4] == ["Dataset:     folder", "Mode:        training"]
    assert lines[-3:] == ["-" * 64, lines[-2], "-" * 64] and \
        lines[-2].startswith("total images/sec: ")
    assert found in only_row(tmp_path / "r.csv")["notices"].split("; ")
    # One global batch more than the data holds: one error line, nothing printed or written.
    code, out, err = _tfbench(common[2:] + ["--batch_size=10", "--csv_file=refused.csv"],
                              tmp_path, capsys)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1:] == [
        "tfbench: error: --data_dir holds too few images for one global batch of 10: %s (is "
        "it the dataset you meant? a smaller --batch_size runs it)" % found.replace("Found",
                                                                                     "found")]
    assert not (tmp_path / "refused.csv").exists()
