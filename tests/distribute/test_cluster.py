"""Cluster settings from the legacy flags and TF_CONFIG (a Slurm step: test_slurm.py; reachability
and the bounded wait: test_peers.py)."""

import json

import pytest

from tfbench.distribute import cluster
from tfbench.distribute import peers
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings


def _plan(env=None, **flags):
    return cluster.read_cluster(make_settings(flags), environ=env or {})


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
