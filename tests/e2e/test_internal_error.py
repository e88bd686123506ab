"""An exception tfbench does not handle: one line that says it is an internal error and where its
traceback is, never the exception's text; the CSV row is still written, the text kept in the
JSON manifest."""

import json
import os

import pytest

from helpers import only_row, run_inprocess
from tfbench.engine import steps

pytestmark = pytest.mark.slow

# The text of the failure that once escaped here (Dropout under central storage).
TEXT = "Exception encountered when calling Dropout.call().\n\nYou must specify an aggregation"


def _failing_train_step(monkeypatch):
    def failing_step(self, from_iterator=False):
        def step(inputs):
            raise ValueError(TEXT)
        return step
    monkeypatch.setattr(steps.Steps, "train_step", failing_step)


ARGS = ["--device=cpu", "--model=trivial", "--image_size=8", "--batch_size=2", "--num_batches=2",
        "--csv_file=r.csv"]


def test_the_line_says_internal_error_and_where_the_traceback_is(tmp_path, monkeypatch, capsys):
    _failing_train_step(monkeypatch)
    code, _ = run_inprocess(ARGS + ["--json_dir=runs"], tmp_path)
    assert code == 1
    row = only_row(tmp_path / "r.csv")
    path = os.path.join(str(tmp_path), "runs", row["run_id"] + ".json")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == ("tfbench: error: internal error in tfbench (a bug, not something you did "
                    "wrong); its traceback is in %s: please report it with that file" % path)
    assert row["status"] == "error" and row["error"] == line[len("tfbench: error: "):]
    manifest = json.load(open(path))
    assert manifest["extra"]["exception"] == "ValueError: " + TEXT.splitlines()[0]
    assert "ValueError: " + TEXT in manifest["extra"]["traceback"]
    assert manifest["status"] == "error"


def test_without_a_manifest_the_line_says_how_to_keep_the_traceback(tmp_path, monkeypatch,
                                                                     capsys):
    _failing_train_step(monkeypatch)
    code, _ = run_inprocess(ARGS + ["--json_dir="], tmp_path)
    assert code == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("tfbench: error: internal error in tfbench (a bug")
    assert "run again with --json_dir=DIR to keep its traceback" in line
    assert "ValueError" not in line and "Dropout" not in line
    assert not os.path.exists(tmp_path / "runs")
    assert only_row(tmp_path / "r.csv")["status"] == "error"
