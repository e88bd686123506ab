"""tfbench launch with real TensorFlow tasks on 127.0.0.1 ports, through scripts/local_rsh.sh: the
chief's classic log, every host's row, and the two ways a run is cut short (a task killed, the
launcher stopped), with no process or temporary directory left behind."""

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, free_ports, read_rows
from tfbench.output import files

pytestmark = pytest.mark.slow

LOCAL_RSH = os.path.join(ROOT, "scripts", "local_rsh.sh")
TINY = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
        "--num_warmup_batches=1", "--display_every=1", "--json_dir=", "--monitor_interval_ms=0",
        "--cluster_timeout_secs=30"]


def _start(tmp_path, hosts, flags):
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tfbench", "launch", "--hosts=" + ",".join(hosts),
         "--rsh=" + LOCAL_RSH, "--remote_cmd=%s -m tfbench" % sys.executable, "--out_dir=out",
         "--"] + TINY + flags, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _hosts(n):
    return ["127.0.0.1:%d" % p for p in free_ports(n)]


def _rows(tmp_path):
    return read_rows(tmp_path / "tfbench_results.csv")


def _processes_of(hosts):
    """Processes on this machine (every "host") still running anything of this launch."""
    marker = ",".join(hosts).encode()
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if marker in handle.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _tfbench_pid(hosts, index):
    """The tfbench process of task `index` (not the shells around it)."""
    for pid in _processes_of(hosts):
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            args = handle.read().split(b"\0")
        if args[:3] == [sys.executable.encode(), b"-m", b"tfbench"] and \
                b"--task_index=%d" % index in args:
            return pid
    raise AssertionError("no tfbench process for task %d" % index)


def _wait_for_step(proc, n=3, timeout=90):
    """Reads the launcher's stdout (the chief's log) until Step line n; returns what it read."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if line.startswith("%d\timages/sec:" % n) or not line:
            break
    return seen


def test_two_hosts_print_the_chiefs_classic_log_unchanged_and_gather_both_rows(tmp_path):
    hosts = _hosts(2)
    proc = _start(tmp_path, hosts, ["--num_batches=4"])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    lines = out.splitlines()
    assert lines[-3] == lines[-1] == "-" * 64 and lines[-2].startswith("total images/sec: ")
    assert lines[-5].startswith("Launch: 2 row(s) of 2 task(s) (2 ok) appended to "
                                "tfbench_results.csv; host logs in out")
    assert lines[-4] == ("Interconnect: gRPC over TCP (TensorFlow's ring all-reduce; CPU "
                         "devices, no NCCL)")
    # The chief's own stdout, as its log file has it: the same lines, in the same order, its
    # Results line naming where the launcher put the row, not the task's temporary file.
    prefix = "[worker 0 %s] " % hosts[0]
    chief = [l[len(prefix):] for l in (tmp_path / "out" / ("worker0_%s.log" % hosts[0].replace(
        ":", "-"))).read_text().splitlines()]
    (temporary,) = [l for l in chief if l.startswith("Results: ")]
    assert "/tfbench-launch." in temporary
    chief = [files.results_line_to(l, "tfbench_results.csv") or l for l in chief]
    assert [l for l in chief if l in set(lines)] == lines[:-5] + lines[-3:]
    assert "Starting worker 0" in lines and "Batch size:  8 global" in lines
    worker1 = (tmp_path / "out" / ("worker1_%s.log" % hosts[1].replace(":", "-"))).read_text()
    assert "[worker 1 %s] Starting worker 1\n" % hosts[1] in worker1
    rows = _rows(tmp_path)
    assert [(r["status"], r["num_workers"], r["steps_run"]) for r in rows] == [
        ("ok", "2", "4"), ("ok", "2", "4")]
    assert abs(float(rows[0]["images_per_sec"]) - float(lines[-2].split(": ")[1])) < 0.01
    assert [n for n in os.listdir(tmp_path) if n.startswith("tfbench-launch.")] == []


def test_a_killed_task_is_named_the_other_stops_and_nothing_is_left(tmp_path):
    hosts = _hosts(2)
    proc = _start(tmp_path, hosts, ["--num_batches=100000"])
    try:
        _wait_for_step(proc)
        os.kill(_tfbench_pid(hosts, 1), signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)
        stopped = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("tfbench: error: %s (worker 1): killed by SIGKILL; the other "
                           "1 task(s) ended within " % hosts[1]), last
    assert stopped < 30 and "Traceback" not in err             # --cluster_timeout_secs=30
    rows = _rows(tmp_path)
    assert [r["status"] for r in rows] == ["error", "error"]
    assert rows[0]["error"].startswith("worker 0: lost the cluster")    # the chief's own row
    assert rows[1]["error"] == "killed by SIGKILL" and rows[1]["hostname"] == "127.0.0.1"
    assert _processes_of(hosts) == []
    assert [n for n in os.listdir(tmp_path) if n.startswith("tfbench-launch.")] == []


def test_sigterm_to_the_launcher_stops_every_task_which_writes_its_row(tmp_path):
    hosts = _hosts(2)
    proc = _start(tmp_path, hosts, ["--num_batches=100000"])
    try:
        _wait_for_step(proc)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert err.strip().splitlines()[-1].startswith(
        "tfbench: error: interrupted by SIGTERM; the 2 task(s) stopped within ")
    assert stopped < 30 and "Traceback" not in err
    rows = _rows(tmp_path)
    # Each task's own row: TensorFlow's preemption notifier no longer swallows SIGTERM.
    assert [(r["status"], r["error"]) for r in rows] == [
        ("interrupted", "interrupted by SIGTERM")] * 2
    # The chief printed Step 3 before the signal; a worker stopped inside a step whose
    # all-reduce completed has not counted that step yet.
    assert int(rows[0]["steps_run"]) >= 3 and int(rows[1]["steps_run"]) >= 2
    assert _processes_of(hosts) == []
    assert [n for n in os.listdir(tmp_path) if n.startswith("tfbench-launch.")] == []
