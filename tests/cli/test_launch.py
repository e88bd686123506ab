"""tfbench launch: the host program, faults and the scaling series (--hosts and versions:
launch/test_remote.py; the chief's console: launch/test_console.py). End-to-end runs use
scripts/local_rsh.sh (the command runs on this machine, as over ssh) and a stand-in tfbench
(tests/support/launch_fake_tfbench.py), so no TensorFlow starts here; real TensorFlow tasks are
in e2e/test_launch_localhost.py."""

import os
import re
import subprocess
import sys
import time

import pytest

from helpers import ROOT, SUPPORT, read_rows
from tfbench import errors
from tfbench.cli import launch as launch_cli
from tfbench.launch import remote as launch_remote, run as launch

LOCAL_RSH = os.path.join(ROOT, "scripts", "local_rsh.sh")
FAKE = "%s %s" % (sys.executable, os.path.join(SUPPORT, "launch_fake_tfbench.py"))


# --- hosts and flags ---------------------------------------------------------------------


def test_sweep_hosts_counts_are_checked_against_the_hosts():
    assert launch.parse_counts("1,2,4", 4) == [1, 2, 4]
    with pytest.raises(errors.UsageError, match="needs 4 hosts; --hosts names 3"):
        launch.parse_counts("1,4", 3)
    with pytest.raises(errors.UsageError, match="distinct host counts >= 1"):
        launch.parse_counts("2,2", 3)


@pytest.mark.parametrize("flags,needle", [
    (["--worker_hosts=a:1"], "--worker_hosts is set by tfbench launch"),
    (["--task_index=1"], "--task_index is set by tfbench launch"),
    (["--variable_update=replicated"], "runs MultiWorkerMirroredStrategy: use "
                                       "--variable_update=collective_all_reduce"),
    (["--variable_update=horovod"], "horovodrun or mpirun, not tfbench launch"),
    (["--model=resnet50", "--num_batches=0"], "--num_batches must be a positive integer"),
])
def test_flags_a_task_would_refuse_stop_the_launch_before_it_starts(flags, needle):
    with pytest.raises(errors.UsageError, match=needle):
        launch_cli.build(["--hosts=h1,h2", "--"] + flags)


def test_the_csv_stays_local_and_other_flags_go_to_every_task(tmp_path):
    preset = tmp_path / "p.flags"
    preset.write_text("--model=resnet50\n# a comment\n--batch_size=64\n")
    args, cfg = launch_cli.build(["--hosts=h1,h2", "--rsh=sh", "--", "--flagfile=%s" % preset,
                                  "--csv_file=mine.csv", "--cluster_timeout_secs=30"])
    assert cfg.flags == ["--model=resnet50", "--batch_size=64", "--cluster_timeout_secs=30"]
    assert cfg.csv_file == "mine.csv" and cfg.cluster_timeout == 30.0
    assert launch_remote.task_flags(cfg.flags, cfg.hosts, 1)[-3:] == [
        "--job_name=worker", "--worker_hosts=h1:2222,h2:2222", "--task_index=1"]


def _task_gpus(cfg):
    return [next((f for f in launch_remote.task_flags(cfg.flags, cfg.hosts, i, cfg.gpus_per_task)
                  if f.startswith("--gpu_indices=")), None) for i in range(len(cfg.hosts))]


def test_tasks_on_a_host_named_twice_get_gpus_of_their_own():
    """Two tasks on one host never share GPUs (each TensorFlow maps nearly all of a GPU's
    memory): the k-th task on a host takes --num_gpus GPUs from k x --num_gpus."""
    _, cfg = launch_cli.build(["--hosts=gpu1,gpu1,me@gpu2,Me@GPU1:2400", "--rsh=sh", "--",
                               "--model=resnet50", "--num_gpus=2"])
    assert _task_gpus(cfg) == ["--gpu_indices=0,1", "--gpu_indices=2,3", None,
                               "--gpu_indices=4,5"]
    # The default of one GPU per task; a scaling series' first point has the host once.
    _, cfg = launch_cli.build(["--hosts=gpu1,gpu1", "--rsh=sh", "--", "--model=resnet50"])
    assert _task_gpus(cfg) == ["--gpu_indices=0", "--gpu_indices=1"]
    assert launch_remote.task_flags(cfg.flags, cfg.hosts[:1], 0, cfg.gpus_per_task) == \
        cfg.flags + ["--job_name=worker", "--worker_hosts=gpu1:2222", "--task_index=0"]


def test_tasks_on_the_cpu_share_it_and_given_gpu_indices_are_refused_on_a_shared_host():
    _, cfg = launch_cli.build(["--hosts=h,h", "--rsh=sh", "--", "--device=cpu", "--num_gpus=2"])
    assert _task_gpus(cfg) == [None, None]
    with pytest.raises(errors.UsageError, match=re.escape(
            "--gpu_indices=0,1 would give every task on h the same GPUs; leave it out: "
            "tfbench launch gives each task on a host named several times --num_gpus GPUs of "
            "its own")):
        launch_cli.build(["--hosts=h,h", "--rsh=sh", "--", "--gpu_indices=0,1"])
    _, cfg = launch_cli.build(["--hosts=h1,h2", "--rsh=sh", "--", "--gpu_indices=0,1"])
    # Hosts named once keep what the flags say, and only that.
    assert [[f for f in launch_remote.task_flags(cfg.flags, cfg.hosts, i, cfg.gpus_per_task)
             if f.startswith("--gpu_indices")] for i in (0, 1)] == [["--gpu_indices=0,1"]] * 2


# --- end to end with the stand-ins -------------------------------------------------------

def _launch(tmp_path, args, rsh=LOCAL_RSH, remote_cmd=FAKE, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tfbench", "launch", "--rsh=" + rsh,
                           "--remote_cmd=" + remote_cmd, "--out_dir=out"] + args,
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.monotonic() - started


def _leftovers(tmp_path):
    return [n for n in os.listdir(tmp_path) if n.startswith("tfbench-launch.")]


@pytest.mark.slow
def test_a_scaling_series_prints_efficiency_with_the_interconnect_each_point_saw(tmp_path):
    proc, _ = _launch(tmp_path, ["--hosts=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
                                 "--sweep_hosts=1,2,3", "--nccl_debug", "--", "--json_dir="])
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith("| trivial |")]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in table]
    # workers, images/sec, speed-up, efficiency, interconnect
    assert [(c[4], c[8], c[10], c[11]) for c in cells] == [
        ("1", "100.0", "1.00", "100.0"), ("2", "180.0", "1.80", "90.0"),
        ("3", "240.0", "2.40", "80.0")]
    assert cells[0][12] == "NCCL 2.21.5+cuda12.4: within a host P2P/IPC"
    assert cells[2][12] == ("NCCL 2.21.5+cuda12.4: between hosts NET/IB (InfiniBand mlx5_0, "
                            "mlx5_1) with GPUDirect RDMA; within a host P2P/IPC")
    # every host's row, in the sweep's and the local CSV: 1 + 2 + 3 tasks
    for path in (tmp_path / "out" / "sweep.csv", tmp_path / "tfbench_results.csv"):
        rows = read_rows(path)
        assert [r["num_workers"] for r in rows] == ["1", "2", "2", "3", "3", "3"]
        assert {r["status"] for r in rows} == {"ok"}
    log = (tmp_path / "out" / "logs" / "002_hosts-3" / "worker2_127.0.0.1-3.log").read_text()
    assert "[worker 2 127.0.0.1:3] Starting worker 2\n" in log
    # One host named three times: each task drives its own GPU (one each, the default).
    assert "[worker 2 127.0.0.1:3] GPU indices: 2\n" in log
    first = (tmp_path / "out" / "logs" / "000_hosts-1" / "worker0_127.0.0.1-1.log").read_text()
    assert "GPU indices" not in first
    assert "[worker 2 127.0.0.1:3] [nccl] " in log
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_series_with_a_failed_point_writes_everything_then_exits_6(tmp_path):
    """As a sweep does: every point's rows and the tables first, then one line counting the
    points that did not finish (the first failure named) and the study's own exit code."""
    proc, _ = _launch(tmp_path, ["--hosts=127.0.0.1:1,127.0.0.1:2", "--sweep_hosts=1,2", "--",
                                 "--model=oom_with_2", "--json_dir="])
    assert proc.returncode == errors.EXIT_INCOMPLETE, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"tfbench: error: 1 of 2 points did not finish ok \(1 oom\); first: 2 host\(s\): "
        r"127\.0\.0\.1:2 \(worker 1\): OOM when allocating tensor with shape \[64\]; the other 1 "
        r"task\(s\) ended within [0-9.]+ s; rows in out/sweep\.csv, logs in out/logs", last), last
    rows = read_rows(tmp_path / "out" / "sweep.csv")
    assert [(r["num_workers"], r["status"]) for r in rows] == [
        ("1", "ok"), ("2", "error"), ("2", "oom")]
    assert "## All points" in proc.stdout and (tmp_path / "out" / "summary.md").exists()


@pytest.mark.slow
def test_the_chief_names_where_its_row_went_and_rows_record_the_users_command(tmp_path):
    """The task writes its row to a temporary file on its host, removed when it ends: the
    chief's Results line names the launcher's CSV instead, and the rows' command is the
    command the user typed, not the task's (with that temporary --csv_file)."""
    args = ["--hosts=127.0.0.1:1,127.0.0.1:2", "--", "--json_dir=", "--csv_file=mine.csv"]
    proc, _ = _launch(tmp_path, args)
    assert proc.returncode == 0, proc.stderr
    (said,) = [line for line in proc.stdout.splitlines() if line.startswith("Results: ")]
    rows = read_rows(tmp_path / "mine.csv")
    assert said == "Results: ok row appended to mine.csv (run %s)" % rows[0]["run_id"]
    typed = "tfbench launch --rsh=%s '--remote_cmd=%s' --out_dir=out %s" % (
        LOCAL_RSH, FAKE, " ".join(args))
    assert [r["command"] for r in rows] == [typed, typed]
    assert [r["command"] for r in read_rows(tmp_path / "out" / "rows.csv")] == [typed, typed]
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_row_that_did_not_come_back_from_a_container_is_named_with_the_mount(tmp_path):
    """--remote_cmd starting a container that sees neither the host's $TMPDIR nor NCCL_*."""
    proc, _ = _launch(tmp_path, ["--hosts=127.0.0.1:1,127.0.0.1:2", "--nccl_debug", "--",
                                 "--model=in_container", "--json_dir="])
    assert proc.returncode == errors.EXIT_RUN_ERROR, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "tfbench: error: 127.0.0.1:1 (worker 0): ended with exit code 0, but its CSV "
        "row did not come back: the task writes it under ${TMPDIR:-/tmp} on its host, which a "
        "--remote_cmd that starts a container must mount (docker run -v "
        "\"${TMPDIR:-/tmp}:${TMPDIR:-/tmp}\"); its classic log is in the host's log file")
    rows = read_rows(tmp_path / "tfbench_results.csv")
    assert [(r["status"], r["hostname"]) for r in rows] == [("error", "127.0.0.1")] * 2
    assert "docker run -e NCCL_DEBUG -e NCCL_DEBUG_SUBSYS -e NCCL_DEBUG_FILE" in proc.stdout
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_failing_task_is_named_and_the_others_are_stopped_within_the_timeout(tmp_path):
    """Worker 1 runs out of memory; the stand-in chief and worker 2 would train on (a real
    tfbench notices the lost peer itself): tfbench launch stops them."""
    hosts = "--hosts=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
    proc, seconds = _launch(tmp_path, [hosts, "--", "--model=oom_on_1", "--json_dir=",
                                       "--cluster_timeout_secs=5"])
    assert proc.returncode == errors.EXIT_OOM, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("tfbench: error: 127.0.0.1:2 (worker 1): OOM when allocating "
                           "tensor with shape [64]; the other 2 task(s) ended within ")
    assert float(last.rsplit(" ", 2)[1]) < 5          # --cluster_timeout_secs
    assert "Traceback" not in proc.stderr
    rows = read_rows(tmp_path / "tfbench_results.csv")
    assert [(r["status"], r["error"]) for r in rows] == [
        ("interrupted", "interrupted by SIGTERM"),
        ("oom", "OOM when allocating tensor with shape [64]"),
        ("interrupted", "interrupted by SIGTERM")]
    assert seconds < 30 and _leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_hung_task_is_named_once_the_others_lost_it(tmp_path):
    """Worker 1 stops (SIGSTOP, as a hung host); the others end with "lost the cluster" (exit 5,
    a consequence): the task that did not end is the one named, then killed."""
    proc, seconds = _launch(tmp_path, ["--hosts=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--",
                                       "--model=hang_on_1", "--json_dir=",
                                       "--cluster_timeout_secs=5"])
    assert proc.returncode == errors.EXIT_DISTRIBUTED, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"tfbench: error: 127\.0\.0\.1:2 \(worker 1\): still running [\d.]+ s after "
        r"worker [02] failed \(worker [02]: lost the cluster \(UnavailableError\); no heartbeat "
        r"from worker 1 \(hung, or cut off from this host\)\); stopped: killed by SIGKILL, "
        r"[\d.]+ s after it", last), last
    assert float(last.rsplit(" ", 4)[1]) < 5            # --cluster_timeout_secs
    rows = read_rows(tmp_path / "tfbench_results.csv")
    assert [(r["status"], r["error"][:30]) for r in rows] == [
        ("error", "worker 0: lost the cluster (Un"), ("error", "killed by SIGKILL"),
        ("error", "worker 2: lost the cluster (Un")]
    assert seconds < 30 and _leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_host_without_setsid_is_named_and_nothing_starts(tmp_path):
    """setsid puts a task in its own process group, the one a stop signals."""
    bin_dir = tmp_path / "bin"               # a PATH with sh and without setsid
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to("/bin/sh")
    rsh = tmp_path / "rsh.sh"
    rsh.write_text('#!/bin/sh\nshift\nexec env PATH=%s /bin/sh -c "$*"\n' % bin_dir)
    rsh.chmod(0o755)
    proc, _ = _launch(tmp_path, ["--hosts=127.0.0.1:1", "--", "--json_dir="], rsh=str(rsh))
    assert proc.returncode == errors.EXIT_DISTRIBUTED
    assert proc.stderr.strip().splitlines()[-1] == (
        "tfbench: error: 127.0.0.1:1: `%s --version` failed (exit code 126): setsid not "
        "found on this host (util-linux): tfbench launch needs it to stop its tasks" % FAKE)


@pytest.mark.slow
def test_an_unreachable_host_is_named_and_nothing_starts(tmp_path):
    proc, _ = _launch(tmp_path, ["--hosts=127.0.0.1:1,gpu-node7:2", "--", "--json_dir="])
    assert proc.returncode == errors.EXIT_DISTRIBUTED
    assert proc.stderr.strip().splitlines()[-1] == (
        "tfbench: error: gpu-node7:2: unreachable over `%s`: ssh: Could not resolve "
        "hostname gpu-node7: Name or service not known" % LOCAL_RSH)
    assert proc.stdout == ""
    (row,) = read_rows(tmp_path / "tfbench_results.csv")
    assert row["status"] == "error" and row["hostname"] == "gpu-node7"
    assert row["error"].startswith("gpu-node7:2: unreachable over")
    assert row["num_workers"] == "2"
    assert not (tmp_path / "out" / "worker0_127.0.0.1-1.log").exists()


@pytest.mark.slow
def test_a_host_with_other_versions_is_named_and_nothing_starts(tmp_path):
    rsh = tmp_path / "rsh.sh"
    rsh.write_text('#!/bin/sh\ncase "$1:$2" in 127.0.0.2:*--version*)\n'
                   '  echo "tfbench 0.1.0 | TensorFlow 2.17.1 | Keras 3.8.0 | Python 3.10.12"; '
                   'exit 0;;\nesac\nexec %s "$@"\n' % LOCAL_RSH)
    rsh.chmod(0o755)
    proc, _ = _launch(tmp_path, ["--hosts=127.0.0.1:1,127.0.0.2:2", "--", "--json_dir="],
                      rsh=str(rsh))
    assert proc.returncode == errors.EXIT_DISTRIBUTED
    assert proc.stderr.strip().splitlines()[-1] == (
        "tfbench: error: 127.0.0.2:2: runs TensorFlow 2.17.1, Keras 3.8.0 where the "
        "chief (127.0.0.1:1) runs TensorFlow 2.21.0, Keras 3.15.1")
    (row,) = read_rows(tmp_path / "tfbench_results.csv")
    assert row["status"] == "error" and row["hostname"] == "127.0.0.2"


@pytest.mark.slow
def test_a_killed_launcher_leaves_no_task_and_no_temporary_directory(tmp_path):
    """SIGKILL gives tfbench launch no chance to stop anything: the hosts' watchers see the
    remote shells' stdin close and stop their tasks."""
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    hosts = "127.0.0.1:7001,127.0.0.1:7002"
    proc = subprocess.Popen([sys.executable, "-m", "tfbench", "launch", "--rsh=" + LOCAL_RSH,
                             "--remote_cmd=" + FAKE, "--out_dir=out", "--hosts=" + hosts, "--",
                             "--model=until_stopped", "--json_dir="],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline() == "Starting worker 0\n"
        assert len(_processes_with(hosts)) >= 4      # at least both shells and both tasks
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 15
        while (_processes_with(hosts) or _leftovers(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _processes_with(hosts) == [] and _leftovers(tmp_path) == []


def _processes_with(text):
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if text.encode() in handle.read():
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("login_shell", ["sh", "tcsh"])
def test_the_remote_program_runs_under_the_users_login_shell(tmp_path, login_shell):
    """ssh hands the command line to the user's login shell; csh/tcsh (still the default on
    some clusters) refuse a newline inside quotes, so the program is one line."""
    import shlex
    import shutil
    import subprocess
    if not shutil.which(login_shell):
        pytest.skip("%s is not installed" % login_shell)
    fake = tmp_path / "fake_tfbench.sh"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in --csv_file=*) '
                    'printf "model\\ntrivial\\n" > "${a#--csv_file=}";; esac; done\nexit 3\n')
    fake.chmod(0o755)
    script = launch_remote.remote_script(str(fake), ["--model=trivial"], tag="t")
    assert "\n" not in script
    # The launcher keeps the watcher's stdin open: an open pipe stands for the connection.
    proc = subprocess.Popen([login_shell, "-c", "sh -c " + shlex.quote(script)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        out = proc.stdout.read().splitlines()
        assert proc.wait(timeout=30) == 3, proc.stderr.read()
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
    assert out[0] == launch_remote.MARK + "exit 3"
    assert out[1:4] == [launch_remote.MARK + "rows", "model", "trivial"]
    assert [p for p in os.listdir(tmp_path) if p.startswith("tfbench-launch.")] == []


@pytest.mark.parametrize("rsh,bad", [
    ("ssh -o BatchMode=yes", ""), ("ssh -oBatchMode=yes -l root -p 22", ""),
    ("ssh -i /keys/id_ed25519 -J bastion", ""), ("scripts/local_rsh.sh -n", ""),
    ("ssh -n", "-n"), ("ssh -o BatchMode=yes -tt", "-t"), ("ssh -qf", "-f"),
    ("/usr/bin/ssh -lroot -T -n", "-n")])
def test_ssh_options_that_would_stop_every_task_are_named(rsh, bad):
    import shlex
    assert launch_cli._ssh_stdin_options(shlex.split(rsh)) == bad
