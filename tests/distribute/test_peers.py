"""tfbench.distribute.peers on 127.0.0.1 ports: reachability, the rendezvous and the bounded wait,
TensorFlow's peer failures as one error, a parameter-server task serving, the SIGTERM handler."""

import json
import socket
import threading

import pytest

from tfbench.distribute import cluster
from tfbench.distribute import peers
from helpers import free_ports as _free_ports
from tfbench.errors import DistributedError
from tfbench.config.settings import make_settings


def _plan(env=None, **flags):
    return cluster.read_cluster(make_settings(flags), environ=env or {})


# What TensorFlow says when a peer stops sending heartbeats (a hung or cut-off task), as
# recorded from a stopped worker: TF 2.21, then TF 2.17.
_HEARTBEAT_2_21 = (
    "Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most recent call "
    "last):\n  File \"x.py\", line 9, in <module>\n\nCollective ops is aborted by: Error reported "
    "from /job:worker/task:1: The following tasks are unhealthy (stopped sending heartbeats):\n"
    "/job:worker/replica:0/task:1\nThe tasks have crashed. Check the task logs for an earlier "
    "error, or scheduler events (e.g. preemption, eviction) to debug further.\nThe error could be "
    "from a previous operation. Restart your program to reset.\n\t [[{{node CollectiveReduceV2}}]]"
    " [Op:__inference_step_31]")
_HEARTBEAT_2_17 = (
    "Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most recent call "
    "last):\n  File \"x.py\", line 9, in <module>\n\nCollective ops is aborted by: Error reported "
    "from /job:worker/task:1: Task /job:worker/replica:0/task:1 heartbeat timeout. This indicates "
    "that the remote task has failed, got preempted, or crashed unexpectedly. Check the task logs "
    "for an earlier error to debug further.\nThe error could be from a previous operation. "
    "Restart your program to reset.\n\t [[{{node CollectiveReduceV2}}]] [Op:__inference_step_31]")


_SERVE_WITH_FLAGS = r"""
import json, sys
import tensorflow as tf
from tfbench.distribute import cluster, devices, peers
from tfbench.config.settings import make_settings
p = make_settings({"device": "cpu", "num_intra_threads": 3, "num_inter_threads": 2,
                 "enable_optimizations": False, "job_name": sys.argv[1],
                 "worker_hosts": "127.0.0.1:1", "ps_hosts": "127.0.0.1:2",
                 "controller_host": "127.0.0.1:3"})
devices.configure_runtime(p, devices.select_devices(p))
created = {}
tf.distribute.Server = lambda *args, **kwargs: created.update(kwargs)
answers = iter([None] + ["connection refused"] * 3)   # the controller comes, then goes
peers.probe = lambda address, timeout=1.0: next(answers)
peers.serve(cluster.read_cluster(p, environ={}), timeout_secs=10, poll_secs=0.01)
config = created["config"]
print("RESULT " + json.dumps({
    "threads": [config.intra_op_parallelism_threads, config.inter_op_parallelism_threads],
    "devices": dict(config.device_count),
    "no_meta_optimizer": config.graph_options.rewrite_options.disable_meta_optimizer}))
"""


@pytest.mark.slow
def test_probe_reports_refused_and_accepted():
    server = socket.create_server(("127.0.0.1", 0))
    try:
        assert peers.probe("127.0.0.1:%d" % server.getsockname()[1]) is None
    finally:
        server.close()
    (port,) = _free_ports(1)
    assert peers.probe("127.0.0.1:%d" % port) == "connection refused"


@pytest.mark.slow
def test_rendezvous_of_two_tasks_returns_for_both():
    ports = _free_ports(2)
    hosts = ",".join("127.0.0.1:%d" % p for p in ports)
    plans = [_plan(job_name="worker", worker_hosts=hosts, task_index=i) for i in range(2)]
    errors = []

    def wait(plan):
        try:
            peers.rendezvous(plan, timeout_secs=20, poll_secs=0.05)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=wait, args=(plan,)) for plan in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads)


@pytest.mark.slow
def test_rendezvous_names_the_missing_peer_at_the_deadline():
    ports = _free_ports(3)
    hosts = ",".join("127.0.0.1:%d" % p for p in ports)
    plan = _plan(job_name="worker", worker_hosts=hosts, task_index=0)
    with pytest.raises(DistributedError) as err:
        peers.rendezvous(plan, timeout_secs=0.5, poll_secs=0.05)
    message = str(err.value)
    assert message.startswith("worker 0: the cluster did not form within 0.5s")
    assert "worker 1 at 127.0.0.1:%d (connection refused)" % ports[1] in message
    assert "worker 2 at 127.0.0.1:%d" % ports[2] in message
    assert "\n" not in message


@pytest.mark.slow
def test_run_bounded_gives_up_and_names_unreachable_peers():
    ports = _free_ports(2)
    plan = _plan(job_name="worker", worker_hosts=",".join("127.0.0.1:%d" % p for p in ports))
    release = threading.Event()
    with pytest.raises(DistributedError) as err:
        peers.run_bounded(lambda: release.wait(10), plan, 0.2, "joining")
    release.set()
    assert "no cluster after 0.2s joining" in str(err.value)
    assert "worker 1 at 127.0.0.1:%d" % ports[1] in str(err.value)
    assert peers.run_bounded(lambda: 7, plan, 5, "x") == 7


@pytest.mark.slow
def test_peer_failures_become_distributed_errors():
    import tensorflow as tf
    ports = _free_ports(2)
    plan = _plan(job_name="worker", worker_hosts=",".join("127.0.0.1:%d" % p for p in ports))
    failure = peers.as_distributed_error(
        tf.errors.UnavailableError(None, None, "Collective ops is aborted"), plan)
    assert isinstance(failure, DistributedError) and failure.exit_code == 5
    assert str(failure).startswith("worker 0: lost the cluster (UnavailableError)")
    assert peers.as_distributed_error(ValueError("x"), plan) is None
    assert peers.as_distributed_error(
        tf.errors.UnavailableError(None, None, "x"), None) is None


@pytest.mark.slow
@pytest.mark.parametrize("message", [_HEARTBEAT_2_21, _HEARTBEAT_2_17])
def test_a_peer_without_heartbeats_is_named(message):
    import tensorflow as tf
    server = socket.create_server(("127.0.0.1", 0))   # a hung peer still accepts connections
    try:
        hosts = "127.0.0.1:%d,127.0.0.1:%d" % (_free_ports(1)[0], server.getsockname()[1])
        plan = _plan(job_name="worker", worker_hosts=hosts, task_index=0)
        failure = peers.as_distributed_error(tf.errors.UnavailableError(None, None, message),
                                               plan)
    finally:
        server.close()
    assert str(failure) == ("worker 0: lost the cluster (UnavailableError); no heartbeat from "
                            "worker 1 (hung, or cut off from this host)")


@pytest.mark.slow
def test_other_peer_failures_keep_tensorflows_cause_without_the_trace():
    import tensorflow as tf
    server = socket.create_server(("127.0.0.1", 0))
    try:
        hosts = "127.0.0.1:%d,127.0.0.1:%d" % (_free_ports(1)[0], server.getsockname()[1])
        plan = _plan(job_name="worker", worker_hosts=hosts, task_index=0)
        message = ("Graph execution error:\n\nDetected at node X defined at (most recent call "
                   "last):\n  File \"x.py\", line 9\n\nCollective ops is aborted by: peer went "
                   "away\nThe error could be from a previous operation.")
        failure = peers.as_distributed_error(tf.errors.AbortedError(None, None, message), plan)
    finally:
        server.close()
    assert str(failure) == "worker 0: lost the cluster (AbortedError); peer went away"


@pytest.mark.slow
@pytest.mark.parametrize("job", ["worker", "ps"])
def test_a_parameter_server_task_serves_with_the_runtime_its_flags_set(job):
    """A worker's or parameter server's tf.distribute.Server gets its config=: without it the task
    would ignore --num_gpus, --gpu_indices, --gpu_memory_limit_mb, --allow_growth and the thread
    flags."""
    import os
    import zygote
    from helpers import ROOT
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TF_CONFIG", None)
    proc = zygote.run([job], os.getcwd(), env, 120, code=_SERVE_WITH_FLAGS)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got == {"threads": [3, 2], "devices": {"CPU": 1, "GPU": 0},
                   "no_meta_optimizer": True}


def test_the_sigterm_handler_comes_back_after_tensorflow_replaced_it():
    """TensorFlow's preemption notifier replaces the C-level SIGTERM handler (as libc's
    signal() does here); Python then never runs its own handler."""
    import ctypes
    import os
    import signal
    import time
    got = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    try:
        libc = ctypes.CDLL(None)
        libc.signal(signal.SIGTERM, ctypes.c_void_p(1))   # SIG_IGN, behind Python's back
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert got == []
        peers.restore_sigterm_handler()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
