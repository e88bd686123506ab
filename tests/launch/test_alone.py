"""What a host's validation alone came back with (tfbench.launch.alone.outcome), from tasks
built by hand: its exit code, its validate.json and its rows, as the markers delivered them.
The tasks running (timeouts, signals): cli/test_launch_validate.py."""

import csv
import io
import json

from tfbench.launch import alone
from tfbench.launch.remote import RemoteTask, parse_hosts
from tfbench.launch.tasks import LaunchConfig
from tfbench.output import csv_out

(HOST,) = parse_hosts("me@node7")
CFG = LaunchConfig(hosts=[HOST], flags=["--model=trivial"], rsh=["ssh"])


class _Proc:
    def __init__(self, returncode):
        self.returncode = returncode


def _csv_lines(*rows):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=csv_out.COLUMN_NAMES)
    writer.writeheader()
    for values in rows:
        row = {c: "" for c in csv_out.COLUMN_NAMES}
        row.update(status="ok", mode="training", num_workers="1", model="trivial")
        row.update(values)
        writer.writerow(row)
    return out.getvalue().splitlines()


def _json(*checks):
    return json.dumps({"schema": "tfbench.validate", "rows": [
        {"host": "node7.example", "subject": s, "check": c, "status": st, "reason": r,
         "figure": "f", "expectation": "e"} for s, c, st, r in checks]})


def _task(code, returned=None, rows=(), tail=(), returncode=None):
    task = RemoteTask(0, HOST, list(CFG.flags), ["true"], "/nowhere/node7.log")
    task.proc = _Proc(code if returncode is None else returncode)
    task.exit_code = code
    if returned is not None:
        task.files[alone.VALIDATE_JSON] = returned.split("\n")
    task.rows_text, task.tail = list(rows), list(tail)
    task.started, task.ended = 10.0, 12.5
    task.command = "tfbench validate --level=quick --model=trivial"
    return task


def test_a_validation_that_fails_ended_well_its_rows_and_figure_are_kept():
    task = _task(8, _json(("GPU 1", "straggler", "FAIL", "straggler")),
                 _csv_lines({"images_per_sec": "90"}, {"images_per_sec": "110"},
                            {"images_per_sec": "100"}))
    result, text = alone.outcome(CFG, task, "node7", 360.0, hung=False, interrupted=False)
    assert text == task.file_text(alone.VALIDATE_JSON)
    assert [(r.host, r.subject, r.check, r.status) for r in result.rows] == [
        ("node7", "GPU 1", "straggler", "FAIL")]
    # Exit code 8 is a verdict, not a crash: its rows stay ok, its figure counts.
    assert [r["status"] for r in result.csv_rows] == ["ok"] * 3
    assert result.images_per_sec == 100.0 and not result.passes
    assert (result.step["status"], result.step["exit_code"], result.step["seconds"]) == (
        "ok", 8, 2.5)


def test_a_crashed_validation_is_a_failed_check_and_its_rows_are_marked():
    task = _task(1, None, _csv_lines({"images_per_sec": "100"}),
                 tail=["Traceback (most recent call last):", "tfbench: error: boom"])
    result, text = alone.outcome(CFG, task, "node7", 360.0, hung=False, interrupted=False)
    assert text is None and result.images_per_sec is None
    assert [(r.check, r.status, r.reason, r.figure) for r in result.rows] == [
        ("validate", "FAIL", "check_failed", "boom")]
    assert [(r["status"], r["error"]) for r in result.csv_rows] == [
        ("error", "ended abnormally after writing its row: boom")]
    assert result.step["status"] == "failed"


def test_a_validation_whose_json_did_not_come_back_is_named_with_the_mount():
    result, _ = alone.outcome(CFG, _task(0, None, _csv_lines({"images_per_sec": "5"})),
                              "node7", 360.0, hung=False, interrupted=False)
    (row,) = result.rows
    assert row.figure.startswith("ended with exit code 0, but its validate.json did not come "
                                 "back: it writes it under ${TMPDIR:-/tmp} on its host")


def test_a_hung_validation_keeps_the_rows_it_wrote_when_stopped():
    task = _task(143, _json(("GPU 0", "pcie_width", "PASS", "ok")), tail=["stopping"])
    result, _ = alone.outcome(CFG, task, "node7", 360.0, hung=True, interrupted=False)
    assert [(r.check, r.status) for r in result.rows] == [("pcie_width", "PASS"),
                                                          ("validate", "FAIL")]
    assert result.rows[1].figure == ("hung: no end after 360 s (--host_timeout_secs); "
                                     "stopped: killed by SIGTERM")


def test_an_unreachable_host_gets_a_row_of_its_own():
    task = _task(None, returncode=255, tail=["ssh: connect to host node7 port 22: No route"])
    result, _ = alone.outcome(CFG, task, "node7", 360.0, hung=False, interrupted=False)
    assert result.rows[0].figure == ("unreachable over `ssh`: ssh: connect to host node7 port "
                                     "22: No route")
    (row,) = result.csv_rows
    assert (row["status"], row["hostname"], row["model"]) == ("error", "node7", "trivial")


def test_a_host_that_ended_well_without_a_training_row_cannot_be_compared():
    result, _ = alone.outcome(CFG, _task(0, _json(("GPU 0", "pcie_width", "PASS", "ok"))),
                              "node7", 360.0, hung=False, interrupted=False)
    assert result.rows[-1].figure == "no training row with images/sec came back"
    assert alone.file_part("127.0.0.1:2222") == "127.0.0.1-2222"
