"""Cluster settings from the legacy flags and TF_CONFIG; reachability and the bounded wait."""

import json
import socket
import threading

import pytest

from tfbench.distribute import cluster
from tfbench.distribute import slurm
from tfbench.distribute import peers
from helpers import free_ports as _free_ports
from tfbench.errors import DistributedError, UsageError
from tfbench.config.params import make_params


def _plan(env=None, **flags):
    return cluster.cluster_plan(make_params(flags), environ=env or {})


def test_no_cluster_is_a_single_host():
    assert _plan() is None


def test_worker_hosts_make_a_multi_worker_cluster():
    plan = _plan(job_name="worker", worker_hosts="h1:1000, grpc://h2:1001", task_index=1)
    assert plan.mode == cluster.MULTI_WORKER and plan.source == "flags"
    assert plan.job_dict == {"worker": ["h1:1000", "h2:1001"]}
    assert (plan.task_type, plan.task_index, plan.address) == ("worker", 1, "h2:1001")
    assert plan.num_workers == 2 and plan.label == "worker 1" and plan.worker_rank == 1
    assert plan.peers() == [("worker 0", "h1:1000")]


def test_ps_hosts_make_a_parameter_server_cluster():
    flags = dict(ps_hosts="p:1", worker_hosts="w0:2,w1:3", controller_host="c:4")
    controller = _plan(job_name="controller", **flags)
    assert controller.mode == cluster.PARAMETER_SERVER
    assert controller.job_dict == {"chief": ["c:4"], "worker": ["w0:2", "w1:3"], "ps": ["p:1"]}
    assert (controller.task_type, controller.label, controller.num_workers) == \
        ("chief", "controller", 2)
    ps = _plan(job_name="ps", **flags)
    assert (ps.task_type, ps.address, ps.label) == ("ps", "p:1", "ps 0")


@pytest.mark.parametrize("flags,needle", [
    (dict(job_name="worker"), "--job_name=worker needs --worker_hosts"),
    (dict(worker_hosts="h:1"), "--worker_hosts needs --job_name"),
    (dict(job_name="worker", worker_hosts="h:1", task_index=1),
     "--task_index=1 is out of range: job worker has 1 task(s) (h:1)"),
    (dict(job_name="worker", worker_hosts="h1"), "'h1' is not host:port"),
    (dict(job_name="worker", worker_hosts="h:1", ps_hosts="p:2"),
     "--ps_hosts needs --controller_host"),
    (dict(job_name="ps", worker_hosts="h:1"), "--job_name=ps needs --ps_hosts"),
    (dict(job_name="controller", worker_hosts="h:1"), "--job_name=controller is for --ps_hosts"),
    (dict(controller_host="c:1"), "--controller_host needs --ps_hosts"),
])
def test_inconsistent_flags_are_usage_errors(flags, needle):
    with pytest.raises(UsageError) as err:
        _plan(**flags)
    assert needle in str(err.value)


def test_distributed_all_reduce_accepts_and_notes_the_legacy_controller_host():
    plan = _plan(job_name="worker", worker_hosts="h:1,h:2", controller_host="c:3",
                 variable_update="distributed_all_reduce")
    assert plan.mode == cluster.MULTI_WORKER and plan.job_dict == {"worker": ["h:1", "h:2"]}
    assert plan.notices[0].startswith("--controller_host unused")


def test_tf_config_multi_worker_with_a_chief():
    env = {"TF_CONFIG": json.dumps({"cluster": {"chief": ["c:1"], "worker": ["w:2", "w:3"]},
                                    "task": {"type": "worker", "index": 1}})}
    plan = _plan(env)
    assert plan.source == "TF_CONFIG" and plan.mode == cluster.MULTI_WORKER
    assert plan.num_workers == 3 and plan.worker_rank == 2 and plan.address == "w:3"


def test_tf_config_with_ps_is_a_parameter_server_cluster():
    env = {"TF_CONFIG": json.dumps({"cluster": {"chief": ["c:1"], "worker": ["w:2"],
                                                "ps": ["p:3"]},
                                    "task": {"type": "chief", "index": 0}})}
    plan = _plan(env)
    assert plan.mode == cluster.PARAMETER_SERVER and plan.label == "controller"


def test_flags_take_precedence_over_tf_config():
    env = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1", "b:2"]},
                                    "task": {"type": "worker", "index": 0}})}
    plan = _plan(env, job_name="worker", worker_hosts="x:5")
    assert plan.source == "flags" and plan.job_dict == {"worker": ["x:5"]}


@pytest.mark.parametrize("config,needle", [
    ("{not json", "TF_CONFIG is not valid JSON"),
    (json.dumps({"cluster": {"worker": ["a:1"]}}), "TF_CONFIG needs"),
    (json.dumps({"cluster": {"evaluator": ["a:1"], "worker": ["b:2"]},
                 "task": {"type": "worker", "index": 0}}), "job(s) evaluator not supported"),
    (json.dumps({"cluster": {"worker": ["a:1"], "ps": ["p:2"]},
                 "task": {"type": "worker", "index": 0}}), "needs a \"chief\""),
    (json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}),
     "TF_CONFIG task index=3 is out of range"),
])
def test_bad_tf_config_is_a_usage_error(config, needle):
    with pytest.raises(UsageError) as err:
        _plan({"TF_CONFIG": config})
    assert needle in str(err.value)


def test_tf_config_without_a_cluster_is_ignored():
    assert _plan({"TF_CONFIG": json.dumps({"task": {"type": "worker", "index": 0}})}) is None


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


def test_resolver_carries_the_cluster():
    plan = _plan(job_name="worker", worker_hosts="127.0.0.1:1,127.0.0.1:2", task_index=1)
    resolver = plan.resolver()
    assert resolver.cluster_spec().as_dict() == {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("worker", 1, "grpc")


def test_resolver_carries_the_local_gpu_count_and_nothing_for_cpu():
    plan = _plan(job_name="worker", worker_hosts="127.0.0.1:1,127.0.0.1:2", task_index=0)
    assert plan.resolver(num_gpus=2).num_accelerators() == {"GPU": 2}
    assert plan.resolver().num_accelerators() == {}
    assert plan.resolver(num_gpus=0).num_accelerators() == {}


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


_SERVE_WITH_FLAGS = r"""
import json, sys
import tensorflow as tf
from tfbench.distribute import cluster, devices, peers
from tfbench.config.params import make_params
p = make_params({"device": "cpu", "num_intra_threads": 3, "num_inter_threads": 2,
                 "enable_optimizations": False, "job_name": sys.argv[1],
                 "worker_hosts": "127.0.0.1:1", "ps_hosts": "127.0.0.1:2",
                 "controller_host": "127.0.0.1:3"})
devices.configure_runtime(p, devices.plan_devices(p))
created = {}
tf.distribute.Server = lambda *args, **kwargs: created.update(kwargs)
answers = iter([None] + ["connection refused"] * 3)   # the controller comes, then goes
peers.probe = lambda address, timeout=1.0: next(answers)
peers.serve(cluster.cluster_plan(p, environ={}), timeout_secs=10, poll_secs=0.01)
config = created["config"]
print("RESULT " + json.dumps({
    "threads": [config.intra_op_parallelism_threads, config.inter_op_parallelism_threads],
    "devices": dict(config.device_count),
    "no_meta_optimizer": config.graph_options.rewrite_options.disable_meta_optimizer}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("job", ["worker", "ps"])
def test_a_parameter_server_task_serves_with_the_runtime_its_flags_set(job):
    """Issue A4: tf.distribute.Server was created without config=, so a worker ignored
    --num_gpus, --gpu_indices, --gpu_memory_limit_mb, --allow_growth and the thread flags."""
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


def test_a_ps_task_makes_no_gpu_device(monkeypatch):
    """ParameterServerStrategy keeps variables on the ps tasks' CPU: a ps task on a GPU host
    must not reserve GPU memory; workers keep the GPUs their flags chose."""
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.eager import context

    class Context:
        config = config_pb2.ConfigProto(device_count={"CPU": 1, "GPU": 2},
                                        gpu_options=config_pb2.GPUOptions(
                                            visible_device_list="2,3", allow_growth=True))
    monkeypatch.setattr(context, "context", lambda: Context)
    assert peers.server_config("ps").device_count["GPU"] == 0
    worker = peers.server_config("worker")
    assert worker == Context.config and worker is not Context.config


# --- Kubernetes: TF_CONFIG as the training operator's TFJob sets it ------------------------

def test_tf_config_as_the_kubeflow_tfjob_operator_sets_it():
    """The operator's format (training-operator tensorflow/tensorflow.go): one address per
    replica through its headless service, plus "environment": "cloud"."""
    env = {"TF_CONFIG": '{"cluster":{"worker":["tfbench-worker-0.default.svc:2222",'
                        '"tfbench-worker-1.default.svc:2222"]},"task":{"type":"worker",'
                        '"index":1},"environment":"cloud"}'}
    plan = _plan(env)
    assert plan.source == "TF_CONFIG" and plan.mode == cluster.MULTI_WORKER
    assert plan.address == "tfbench-worker-1.default.svc:2222" and plan.num_workers == 2


# --- Slurm ---------------------------------------------------------------------------------

# An srun step of 3 tasks, one per node (`srun -N3 --ntasks-per-node=1 tfbench ...` in job
# 48213), as seen by task 2: Slurm's documented variables in the forms slurmstepd writes them
# (composed from the srun/sbatch manual pages, not captured on a cluster).
SLURM_TASK_2 = {
    "SLURM_JOB_ID": "48213", "SLURM_STEP_ID": "0", "SLURM_PROCID": "2", "SLURM_LOCALID": "0",
    "SLURM_NODEID": "2", "SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NODELIST": "dgx[8-10]",
    "SLURM_JOB_NODELIST": "dgx[8-10]", "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
    "SLURM_TASKS_PER_NODE": "1(x3)", "SLURMD_NODENAME": "dgx10", "SLURM_GPUS_ON_NODE": "8",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
}


@pytest.mark.parametrize("text,hosts", [
    ("dgx[8-10]", ["dgx8", "dgx9", "dgx10"]),
    ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
    ("a100-[09-10]-ib,h100-2", ["a100-09-ib", "a100-10-ib", "h100-2"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
])
def test_slurm_host_lists_expand_in_slurms_order(text, hosts):
    assert slurm.expand_hostlist(text) == hosts


def test_a_slurm_step_makes_one_worker_per_node_in_node_list_order():
    plan = _plan(SLURM_TASK_2)
    port = 12000 + (48213 + 0) % 20000
    assert plan.source == "Slurm" and plan.mode == cluster.MULTI_WORKER
    assert plan.job_dict == {"worker": ["dgx8:%d" % port, "dgx9:%d" % port, "dgx10:%d" % port]}
    assert (plan.task_type, plan.task_index, plan.address) == ("worker", 2, "dgx10:%d" % port)
    assert plan.notices == ("Cluster from Slurm (job 48213, step 0): 3 workers on dgx[8-10], "
                            "this task worker 2 at dgx10:%d" % port,)
    reserved = dict(SLURM_TASK_2, SLURM_STEP_RESV_PORTS="31000-31002")
    assert _plan(reserved).address == "dgx10:31000"


def test_tensorflows_slurm_resolver_would_give_task_0_the_wrong_host(monkeypatch):
    """Why tfbench reads the variables itself: TF's resolver orders hosts as strings, so the
    task Slurm started on dgx8 (task 0) would take dgx10's address."""
    import tensorflow as tf
    for name, value in dict(SLURM_TASK_2, SLURM_PROCID="0", SLURMD_NODENAME="dgx8").items():
        monkeypatch.setenv(name, value)
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
        gpus_per_node=8, auto_set_gpu=False)
    assert resolver.cluster_spec().as_dict()["worker"][0] == "dgx10:8888"
    assert _plan(dict(SLURM_TASK_2, SLURM_PROCID="0", SLURMD_NODENAME="dgx8")).address \
        .startswith("dgx8:")


def test_no_slurm_cluster_outside_a_step_of_several_tasks_or_under_horovod():
    batch_script = {k: v for k, v in SLURM_TASK_2.items() if not k.startswith("SLURM_STEP")}
    assert _plan(batch_script) is None
    assert _plan(dict(SLURM_TASK_2, SLURM_STEP_NUM_TASKS="1", SLURM_PROCID="0")) is None
    assert _plan(SLURM_TASK_2, variable_update="horovod") is None   # horovod reads Slurm itself


def test_flags_and_tf_config_take_precedence_over_slurm():
    assert _plan(SLURM_TASK_2, job_name="worker", worker_hosts="x:1").source == "flags"
    tf_config = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker",
                                                                     "index": 0}})
    assert _plan(dict(SLURM_TASK_2, TF_CONFIG=tf_config)).source == "TF_CONFIG"


@pytest.mark.parametrize("changes,needle", [
    ({"SLURM_STEP_TASKS_PER_NODE": "2,1", "SLURM_STEP_NODELIST": "dgx[8-9]"},
     "one task per host under Slurm, and this step has 2 on a host: start it with srun "
     "--ntasks-per-node=1"),
    ({"SLURMD_NODENAME": "dgx9"}, "Slurm placed task 2 on dgx9, but the step's node list "
                                  "(dgx[8-10]) puts it on dgx10"),
    ({"SLURM_STEP_NODELIST": "dgx[8-9]"}, "SLURM_STEP_NODELIST (2 hosts) and "
                                          "SLURM_STEP_TASKS_PER_NODE=1(x3) do not agree"),
    ({"SLURM_STEP_NODELIST": "dgx[8-"}, "Slurm host list 'dgx[8-': unbalanced brackets"),
])
def test_a_slurm_step_tfbench_cannot_run_is_one_clear_error(changes, needle):
    with pytest.raises(UsageError) as err:
        _plan(dict(SLURM_TASK_2, **changes))
    assert needle in str(err.value)


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
