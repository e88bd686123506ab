"""The results CSV: schema, concurrent appends, older-schema migration, atomic JSON."""

import json
import multiprocessing
import os

import pytest

from helpers import csv_rows, read_rows
from tfbench.output import csv_out
from tfbench.results import RunResult


def _result(i: int) -> RunResult:
    res = RunResult(model="m%d" % i, mode="training", batch_size=i, images_per_sec=float(i))
    res.extra["latency_ms_p50"] = 1.5
    res.extra["not_a_column"] = "ignored"
    return res


def test_row_has_every_column_and_formats_values():
    row = csv_out.row_for(_result(3))
    assert list(row) == list(csv_out.COLUMN_NAMES)
    assert row["model"] == "m3" and row["batch_size"] == "3"
    assert row["images_per_sec"] == "3" and row["latency_ms_p50"] == "1.5"
    assert row["xla"] == "0" and row["final_loss"] == ""
    assert row["schema_version"] == str(csv_out.SCHEMA_VERSION)


def test_extra_never_shadows_a_result_figure():
    """One name, one definition: a RunResult field (or a figure row_for derives from one) is
    what the CSV shows, whatever `extra` holds under the same name."""
    res = RunResult(warmup_sec=1.5, images_per_sec=10.0, step_times=[0.1, 0.1],
                    params=1000)
    res.extra.update(warmup_sec=99.0, images_per_sec=1.0, steps_run=7, params=3,
                     schema_version=0, notices="x")
    row = csv_out.row_for(res)
    assert (row["warmup_sec"], row["images_per_sec"], row["steps_run"], row["params"]) == (
        "1.5", "10", "2", "1000")
    assert row["schema_version"] == str(csv_out.SCHEMA_VERSION) and row["notices"] == ""


def _append_many(args):
    path, start = args
    for i in range(start, start + 25):
        csv_out.append_row(path, _result(i))


@pytest.mark.slow
def test_concurrent_appends_never_interleave(tmp_path):
    path = str(tmp_path / "r.csv")
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_append_many, [(path, k * 100) for k in range(4)])
    with open(path) as handle:
        text = handle.read()
    rows = csv_rows(text)
    assert len(rows) == 100
    assert text.count("schema_version") == 1
    assert sorted(int(r["batch_size"]) for r in rows) == sorted(
        k * 100 + i for k in range(4) for i in range(25))
    assert all(len(r) == len(csv_out.COLUMN_NAMES) for r in rows)
    assert os.listdir(tmp_path) == ["r.csv"]   # no lock file left beside it


def test_older_schema_is_migrated_with_a_notice(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("run_id,model,images_per_sec\nabc,resnet50,123.4\n")
    notice = csv_out.append_row(str(path), _result(1))
    assert "older column set" in notice and "1 rows kept" in notice
    rows = read_rows(path)
    assert [r["model"] for r in rows] == ["resnet50", "m1"]
    assert rows[0]["images_per_sec"] == "123.4" and rows[0]["status"] == ""


def test_unknown_schema_moves_the_file_aside(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("foo,bar\n1,2\n")
    notice = csv_out.append_row(str(path), _result(1))
    assert "moved to" in notice
    assert os.path.exists(str(path) + ".unknown-schema.bak")
    assert len(read_rows(path)) == 1


def test_json_written_atomically(tmp_path):
    path = tmp_path / "sub" / "x.json"
    csv_out.write_json_atomic(str(path), {"a": 1})
    assert json.load(open(path)) == {"a": 1}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]


def test_params_says_what_is_counted():
    """flops.count_params counts trainable weights (batch-norm moving statistics excluded)."""
    assert dict(csv_out.COLUMNS)["params"].startswith("trainable parameters")
    from tfbench.output import console
    (line,) = console.summary_lines(RunResult(params=1234))
    assert line == "Model stats: 1,234 trainable params"


def test_figures_are_formatted_for_parsers():
    res = RunResult(images_per_sec=1.5e-7, xla=True, step_times=[0.1] * 3,
                    notices=["one", "two"])
    res.extra.update(unstable=False, throttled=True, spread_pct=1234567.0)
    row = csv_out.row_for(res)
    assert (row["images_per_sec"], row["xla"], row["unstable"], row["throttled"]) == (
        "1.5e-07", "1", "0", "1")
    assert row["spread_pct"] == "1.23457e+06" and row["steps_run"] == "3"
    assert row["notices"] == "one; two"
    from tfbench import __version__
    assert row["tfbench_version"] == __version__


def test_a_new_file_gets_the_header_once(tmp_path):
    path = str(tmp_path / "new.csv")
    assert csv_out.append_row(path, _result(1)) is None
    assert csv_out.append_row(path, _result(2)) is None
    with open(path, newline="") as handle:
        lines = handle.read().split("\r\n")
    assert lines[0] == ",".join(csv_out.COLUMN_NAMES) and len(lines) == 4 and lines[3] == ""


def test_json_is_sorted_indented_and_keeps_what_json_cannot_hold(tmp_path):
    path = tmp_path / "x.json"
    csv_out.write_json_atomic(str(path), {"b": "s", "a": [1], "p": tmp_path})
    assert path.read_text() == '{\n "a": [\n  1\n ],\n "b": "s",\n "p": "%s"\n}\n' % tmp_path
    csv_out.write_json_atomic(str(path), {"a": 2})          # replaces, in a directory that exists
    assert json.load(open(path)) == {"a": 2}


def test_migration_notices_word_for_word(tmp_path):
    old = tmp_path / "old.csv"
    old.write_text("run_id,model\nabc,resnet50\n")
    assert csv_out.append_row(str(old), _result(1)) == (
        "%s used an older column set; migrated it to schema %d (1 rows kept)"
        % (old, csv_out.SCHEMA_VERSION))
    other = tmp_path / "other.csv"
    other.write_text("a,b,run_id,c,d\n1,2,3,4,5\n")
    assert csv_out.append_row(str(other), _result(1)) == (
        "%s had columns tfbench does not know (a, b, c); it was moved to %s.unknown-schema.bak "
        "and a new file started" % (other, other))
    assert [r["model"] for r in read_rows(other)] == ["m1"]


@pytest.fixture(params=[0o022, 0o027, 0o077])
def umask(request):
    """The process umask for one test, put back after it."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_files_written_through_a_temporary_file_respect_the_umask(tmp_path, umask):
    # A JSON manifest, the peak cache and a migrated results CSV end as open() would create
    # them, 0666 less the umask: 0644 under 022, so colleagues on a shared host read them.
    expected = 0o666 & ~umask
    manifest = tmp_path / "runs" / "run.json"
    csv_out.write_json_atomic(str(manifest), {"a": 1})
    csv_out.write_json_atomic(str(manifest), {"a": 2})      # replaced: still the umask's mode
    old = tmp_path / "old.csv"
    old.write_text("run_id,model\nabc,resnet50\n")
    os.chmod(old, expected)
    assert "older column set" in csv_out.append_row(str(old), _result(1))
    new = tmp_path / "new.csv"
    csv_out.append_row(str(new), _result(1))
    for path in (manifest, old, new):
        assert oct(os.stat(path).st_mode & 0o777) == oct(expected), path
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["new.csv", "old.csv", "run.json",
                                                          "runs"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "x.json"
    csv_out.write_json_atomic(str(path), {"a": 1})
    with pytest.raises(TypeError):
        csv_out.write_json_atomic(str(path), {1j: "a complex key json cannot write"})
    assert json.load(open(path)) == {"a": 1} and os.listdir(tmp_path) == ["x.json"]


def test_a_run_stopped_in_warm_up_has_no_throughput_figures():
    # No timed step ran: images/sec and the Step line's figures were never measured, so their
    # cells are empty (never 0) in the row and None in the manifest; its status says why.
    stopped = RunResult(status="interrupted", error="interrupted by SIGINT", batch_size=4,
                        warmup_times=[0.3, 0.2])
    row = csv_out.row_for(stopped)
    assert [row[n] for n in ("images_per_sec", "step_images_per_sec",
                             "step_images_per_sec_plusminus", "jitter")] == ["", "", "", ""]
    assert (row["status"], row["steps_run"], row["batch_size"]) == ("interrupted", "0", "4")
    data = stopped.to_dict()
    assert data["images_per_sec"] is None and data["jitter"] is None
    assert data["warmup_times"] == [0.3, 0.2]
    # One timed step measured them: a one-step run's +/- and jitter are 0 (legacy), kept.
    timed = RunResult(status="interrupted", step_times=[0.1], images_per_sec=40.0,
                      step_images_per_sec=40.0)
    row = csv_out.row_for(timed)
    assert (row["images_per_sec"], row["step_images_per_sec_plusminus"], row["jitter"]) == (
        "40", "0", "0")
    assert timed.to_dict()["jitter"] == 0.0
