"""tfbench.launch.tasks, from tasks built by hand as the markers leave them: which failed task a
launch names, the exit code it ends with, every task's rows (its own, or one written for it)
and what carried the all-reduce. The tasks running over a remote shell:
e2e/test_launch_localhost.py."""

import csv
import io
import signal

import pytest

from tfbench import errors
from tfbench.children import rows as rows_lib
from tfbench.launch import tasks
from tfbench.launch.remote import RemoteTask, parse_hosts

HOSTS = parse_hosts("me@node1,me@node2,me@node3")
CFG = tasks.LaunchConfig(hosts=HOSTS, flags=["--model=trivial", "--device=cpu"], rsh=["ssh"])


class _Proc:
    def __init__(self, returncode):
        self.returncode = returncode


def _task(index, code, ended, *, stopped=False, rows=(), tail=(), returncode=None):
    """Task `index` whose remote tfbench exited `code` (None: no exit marker came back)."""
    task = RemoteTask(index, HOSTS[index], list(CFG.flags), ["true"], "/nowhere/t.log")
    task.proc = _Proc(code if returncode is None else returncode)
    task.exit_code = code
    task.started, task.ended = 10.0, ended
    task.stopped, task.stopped_at = stopped, (ended - 1.0 if stopped else 0.0)
    task.rows_text, task.tail = list(rows), list(tail)
    return task


def _rows_text(**values):
    """A task's rows block: its row as CSV lines, header first."""
    row = rows_lib.failure_row(CFG.flags, "ok", "", "tfbench", hostname="node1")
    row.update(values)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(row))
    writer.writeheader()
    writer.writerow(row)
    return out.getvalue().splitlines()


def test_the_task_named_is_the_first_to_fail_by_itself():
    lost = _task(0, errors.EXIT_DISTRIBUTED, 11.0, tail=["tfbench: error: a peer left"])
    oom = _task(1, errors.EXIT_OOM, 12.0, tail=["tfbench: error: out of memory"])
    hung = _task(2, 143, 30.0, stopped=True)
    # The crash, though the lost peer ended first; the hung task only when none crashed.
    assert tasks._root_cause([lost, oom, hung]) is oom
    assert tasks._root_cause([lost, hung]) is hung
    later_lost = _task(2, errors.EXIT_DISTRIBUTED, 13.0)
    assert tasks._root_cause([later_lost, lost]) is lost
    assert tasks._root_cause([_task(0, 0, 11.0), _task(1, 0, 12.0)]) is None


@pytest.mark.parametrize("code, returncode, expected", [
    (errors.EXIT_OOM, None, errors.EXIT_OOM),
    (4, None, 4),
    (128 + signal.SIGKILL, None, errors.EXIT_DISTRIBUTED),   # killed by a signal
    (None, 255, errors.EXIT_DISTRIBUTED),                    # the host was not reached
])
def test_a_launch_ends_with_tfbench_s_own_exit_code_else_lost_peer(code, returncode, expected):
    assert tasks._exit_code(_task(0, code, 11.0, returncode=returncode)) == expected


def test_a_task_s_own_rows_are_kept_and_marked_when_it_then_failed():
    ok = _task(0, 0, 11.0, rows=_rows_text(images_per_sec="100"))
    (row,) = tasks.task_rows(CFG, ok, 3)
    assert (row["status"], row["images_per_sec"]) == ("ok", "100")
    crashed = _task(0, 1, 11.0, rows=_rows_text(images_per_sec="100"),
                    tail=["tfbench: error: boom"])
    (row,) = tasks.task_rows(CFG, crashed, 3)
    assert (row["status"], row["error"]) == ("error", "ended abnormally after writing its row: "
                                                      "boom")


def test_a_task_without_rows_gets_one_on_its_host():
    # Ended well, but its row stayed on the host (a container without /tmp mounted).
    (row,) = tasks.task_rows(CFG, _task(1, 0, 11.0), 3)
    assert (row["status"], row["error"], row["hostname"]) == ("error", tasks.NO_ROW, "node2")
    assert (row["model"], row["num_workers"]) == ("trivial", "3")
    assert row["command"] == " ".join([CFG.remote_cmd] + CFG.flags)
    # Out of memory, from its exit code.
    (row,) = tasks.task_rows(CFG, _task(2, errors.EXIT_OOM, 11.0,
                                        tail=["tfbench: error: out of memory"]), 3)
    assert (row["status"], row["error"], row["hostname"]) == ("oom", "out of memory", "node3")
    # Stopped because another task failed, or because the launch was interrupted.
    stopped = _task(0, 128 + signal.SIGTERM, 11.0, stopped=True)
    (row,) = tasks.task_rows(CFG, stopped, 3)
    assert (row["status"], row["error"]) == ("interrupted", "stopped by tfbench launch (another "
                                                            "task failed)")
    (row,) = tasks.task_rows(CFG, _task(0, None, 11.0, returncode=255, tail=["no route"]), 3,
                             interrupted=errors.Interrupted(signal.SIGINT))
    assert row["status"] == "interrupted" and row["error"].startswith("stopped by tfbench "
                                                                      "launch (")


def test_what_carried_the_all_reduce():
    cpu = [{"device_kind": "cpu"}]
    one, two = [_task(0, 0, 11.0)], [_task(0, 0, 11.0), _task(1, 0, 11.0)]
    assert tasks.interconnect(cpu, one, False) == "none (one host, CPU)"
    assert tasks.interconnect(cpu * 2, two, False).startswith("gRPC over TCP")
    gpu = [{"device_kind": "gpu"}] * 2
    assert tasks.interconnect(gpu, two, False).startswith("not recorded (--nccl_debug")
    assert tasks.interconnect(gpu, two, True).startswith("no NCCL log line")
    two[1].nccl_text = ["h2:1:2 [0] NCCL INFO Using network IB"]
    assert tasks.interconnect(gpu, two, True) == ("NCCL: network IB available, no channel "
                                                  "between hosts seen")


@pytest.mark.parametrize("timeout, own, kill, local", [(120.0, 10.0, 5.0, 8.0),
                                                      (10.0, 4.0, 3.0, 5.0)])
def test_the_grace_periods_shrink_with_a_short_cluster_timeout(timeout, own, kill, local):
    cfg = tasks.LaunchConfig(hosts=HOSTS, flags=[], rsh=["ssh"], cluster_timeout=timeout)
    assert (cfg.own_grace, cfg.kill_after, cfg.local_kill_after) == pytest.approx(
        (own, kill, local))
