"""`tfbench history`: its command line over a SQLite store of one series (what the views print
is tests/history/test_views.py's): `list` is the default subcommand, `changes` exits 9 only for
a regression within --since, and a bad figure or an empty --history is one error line."""

import datetime

import pytest

from tfbench import cli
from tfbench.cli import history as history_cli
from tfbench.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
from tfbench.history import location, record, store
from tfbench.output import csv_out
from tfbench.results import RunResult

START = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
# Eight daily runs at 1000 images/sec, then eight at 800 from March 9: a 20% regression.
SPEEDS = [1000.0, 1001.0, 999.0, 1000.5, 999.5, 1000.0, 1000.2, 999.8,
          800.0, 801.0, 799.0, 800.5, 799.5, 800.0, 800.2, 799.8]
DROP = "2026-03-09"


def _row(day: int, ips: float) -> dict:
    when = START + datetime.timedelta(days=day)
    result = RunResult(run_id="run%02d" % day, timestamp=when.isoformat(timespec="seconds"),
                       hostname="host1", model="resnet50", mode="training", precision="fp32",
                       batch_size=64, global_batch_size=64, num_devices=1, device_kind="gpu",
                       images_per_sec=ips, step_images_per_sec_plusminus=0.5)
    result.extra["device_name"] = "NVIDIA H100 80GB HBM3"
    return {k: "" if v is None else str(v) for k, v in csv_out.row_for(result).items()}


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> str:
    """The --history value of a SQLite store holding the series."""
    path = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    rows = [_row(day, ips) for day, ips in enumerate(SPEEDS)]
    s = store.Store(location.url_for(path))
    try:
        s.add_many(record.from_rows(rows, "import"))
    finally:
        s.close()
    return path


def _main(capsys, *argv):
    code = history_cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow   # the store is written: over half a second
def test_list_is_the_default_subcommand(history, capsys):
    code, default, err = _main(capsys, "--history=%s" % history)
    assert (code, err) == (EXIT_OK, "")
    assert default.splitlines()[0].endswith(": 1 series of images_per_sec (images/sec)")
    assert _main(capsys, "list", "--history=%s" % history) == (EXIT_OK, default, "")
    # A filter goes to the default subcommand as to `list`.
    code, out, _ = _main(capsys, "--model=vgg*", "--history=%s" % history)
    assert code == EXIT_OK and out.splitlines()[-1] == "no results match the filters"


@pytest.mark.slow
def test_changes_exit_9_only_for_a_regression_within_since(history, capsys):
    code, out, _ = _main(capsys, "changes", "--history=%s" % history)
    assert code == EXIT_OK and DROP in out and "worse" in out   # reported, no gate
    assert _main(capsys, "changes", "--history=%s" % history,
                 "--since=2026-03-05")[0] == EXIT_REGRESSION == 9
    code, out, _ = _main(capsys, "changes", "--history=%s" % history, "--since=2026-03-12")
    assert code == EXIT_OK and DROP not in out


def _one_error_line(capsys, argv, message):
    code = cli.main(["tfbench", "history"] + argv)
    out = capsys.readouterr()
    assert code == EXIT_USAGE and out.out == ""
    assert out.err.startswith("tfbench: error: ") and out.err.count("\n") == 1, out.err
    assert message in out.err


@pytest.mark.parametrize("argv, message", [
    (["--history="], "the history is off (--history or TFBENCH_HISTORY is empty): give "
                     "--history=FILE or a postgresql:// URL"),
    (["changes", "--history="], "the history is off"),
    (["import", "--history=h.sqlite"], "the following arguments are required: FILE_OR_DIR"),
    (["--format=html"], "argument --format: invalid choice: 'html'"),
])
def test_an_argument_refused_before_the_store_opens_is_one_error_line(capsys, argv, message):
    _one_error_line(capsys, argv, message)


@pytest.mark.slow   # the store is written: over half a second
@pytest.mark.parametrize("argv, message", [
    (["--figure=speed"], "--figure=speed is not a numeric figure of the history"),
    (["changes", "--since=someday"], "--since=someday is not a date"),
])
def test_a_bad_figure_or_date_is_one_error_line(history, capsys, argv, message):
    _one_error_line(capsys, argv + ["--history=%s" % history], message)
