"""A study whose points did not all finish ok ends with its own exit code (6,
errors.EXIT_INCOMPLETE) and one line counting them, after every row and table is written: the
real CLI with real children, one of which fails (inception3 needs inputs of 75 px or more)."""


import pytest

from helpers import read_rows, run_cli
from tfbench import errors

pytestmark = pytest.mark.slow   # the study and its children are processes

TOO_SMALL = "--image_size=32 is too small for model inception3: it needs at least 75"


def test_a_sweep_with_a_failed_point_exits_6_after_its_rows_and_tables(tmp_path):
    code, out, err = run_cli([
        "sweep", "--device=cpu", "--batch_size=2", "--num_batches=2", "--num_warmup_batches=1",
        "--image_size=32", "--sweep=model=trivial,inception3", "--out_dir=study",
        "--csv_file="], tmp_path, merged=False)
    assert code == errors.EXIT_INCOMPLETE == 6, err[-3000:]
    assert err.splitlines()[-1] == ("tfbench: error: 1 of 2 points did not finish ok (1 error); "
                                    "rows in study/sweep.csv, logs in study/logs")
    rows = read_rows(tmp_path / "study" / "sweep.csv")
    assert [(r["model"], r["status"]) for r in rows] == [("trivial", "ok"),
                                                         ("inception3", "error")]
    assert rows[1]["error"] == "tfbench: error: %s (exit code 2)" % TOO_SMALL
    assert "## All points" in out and (tmp_path / "study" / "summary.md").exists()


def test_an_evaluation_with_failed_runs_exits_6_after_its_report(tmp_path):
    code, out, err = run_cli([
        "evaluate", "--quick", "--device=cpu", "--models=trivial,inception3", "--modes=native",
        "--browser_check=no", "--out_dir=ev"], tmp_path, merged=False)
    assert code == errors.EXIT_INCOMPLETE, err[-3000:]
    assert err.splitlines()[-1] == ("tfbench: error: 2 of 4 runs did not finish ok (2 error); "
                                    "rows in ev/evaluation.csv, logs in ev/logs")
    assert [(r["model"], r["status"]) for r in read_rows(tmp_path / "ev" / "evaluation.csv")] == [
        ("trivial", "ok"), ("trivial", "ok"), ("inception3", "error"), ("inception3", "error")]
    assert (tmp_path / "ev" / "report" / "report.md").exists() and "report:" in out
