"""--variable_update / --all_reduce_spec mapped onto tf.distribute (single-device, in-process).

Two-device numerics are in distribute/test_devices_logical.py, multi-host runs in
e2e/test_clusters.py.
"""

import keras
import pytest
import tensorflow as tf

from tfbench.distribute import cluster, packing, strategies, strategy as strategy_lib
from tfbench.engine import steps
from tfbench.distribute.devices import DeviceSet
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings

CPU1 = DeviceSet("cpu", 1, ("/cpu:0",), "NHWC")
CPU2 = DeviceSet("cpu", 2, ("/cpu:0", "/cpu:1"), "NHWC")
GPU2 = DeviceSet("gpu", 2, ("/gpu:0", "/gpu:1"), "NCHW", gpu_indices=(0, 1))


@pytest.mark.parametrize("spec,plan,kind,label", [
    ("pscpu", CPU2, tf.distribute.ReductionToOneDevice, "reduction_to_one_device(/cpu:0)"),
    ("psgpu", GPU2, tf.distribute.ReductionToOneDevice, "reduction_to_one_device(/gpu:0)"),
    ("nccl", GPU2, tf.distribute.NcclAllReduce, "nccl"),
    ("nccl#2", GPU2, tf.distribute.NcclAllReduce, "nccl"),
    ("hierarchical_copy", CPU2, tf.distribute.HierarchicalCopyAllReduce, "hierarchical_copy"),
])
def test_all_reduce_specs_map_to_cross_device_ops(spec, plan, kind, label):
    ops, got_label, notices = strategy_lib.cross_device_ops(spec, plan, False)
    assert isinstance(ops, kind) and got_label == label and notices == []


def test_xring_runs_as_hierarchical_copy_and_says_so():
    ops, label, notices = strategy_lib.cross_device_ops("xring", GPU2, False)
    assert isinstance(ops, tf.distribute.HierarchicalCopyAllReduce)
    assert label == "hierarchical_copy"
    assert notices == ["--all_reduce_spec=xring: TF2 has no ring all-reduce within one host; "
                       "using hierarchical copy (HierarchicalCopyAllReduce)"]


def _plan(kind, n):
    return DeviceSet(kind, n, tuple("/%s:%d" % (kind, i) for i in range(n)), "NHWC")


@pytest.mark.parametrize("n", [2, 4, 6, 8])
@pytest.mark.parametrize("spec,hierarchical", [("xring", False), (None, True),
                                               ("hierarchical_copy", True)])
def test_hierarchical_copy_runs_on_even_device_counts(n, spec, hierarchical):
    ops, label, _ = strategy_lib.cross_device_ops(spec, _plan("gpu", n), hierarchical)
    assert isinstance(ops, tf.distribute.HierarchicalCopyAllReduce)
    assert label == "hierarchical_copy"


@pytest.mark.parametrize("n", [3, 5, 7])
@pytest.mark.parametrize("spec,hierarchical", [("xring", False), (None, True)])
def test_hierarchical_copy_on_odd_device_counts_reduces_to_one_device(n, spec, hierarchical):
    ops, label, notices = strategy_lib.cross_device_ops(spec, _plan("gpu", n), hierarchical)
    assert isinstance(ops, tf.distribute.ReductionToOneDevice)
    assert ops.reduce_to_device == "/gpu:0" and label == "reduction_to_one_device(/gpu:0)"
    assert notices[-1] == ("HierarchicalCopyAllReduce sums two halves of the devices and would "
                           "leave /gpu:%d (of %d) out: reducing to one device (/gpu:0) instead"
                           % (n - 1, n))


def test_hierarchical_copy_ignored_outside_replicated_gives_no_odd_count_notice():
    sp = strategy_lib.make_strategy(make_settings(
        {"variable_update": "parameter_server", "device": "cpu", "num_gpus": 3,
         "hierarchical_copy": True}), _plan("cpu", 3))
    assert isinstance(sp.strategy, tf.distribute.experimental.CentralStorageStrategy)
    assert [n for n in sp.notices if "HierarchicalCopyAllReduce" in n] == []


def test_no_spec_is_tf_default_and_hierarchical_copy_flag():
    assert strategy_lib.cross_device_ops(None, GPU2, False) == (None, None, [])
    ops, label, _ = strategy_lib.cross_device_ops(None, GPU2, True)
    assert isinstance(ops, tf.distribute.HierarchicalCopyAllReduce) and label == "hierarchical_copy"


@pytest.mark.parametrize("spec,plan,needle", [
    ("nccl", CPU2, "--all_reduce_spec=nccl needs GPUs"),
    ("psgpu", CPU2, "--all_reduce_spec=psgpu needs GPUs"),
    ("pscpu:32k:xring", GPU2, "--all_reduce_spec=pscpu:32k:xring cannot be honoured under TF2"),
    ("nccl/xring", GPU2, "cannot be honoured under TF2"),
    ("magic", GPU2, "--all_reduce_spec=magic cannot be honoured under TF2: use nccl"),
    ("nccl#x", GPU2, "the part after # must be a number"),
])
def test_specs_that_cannot_be_honoured_are_usage_errors(spec, plan, needle):
    with pytest.raises(UsageError) as err:
        strategy_lib.cross_device_ops(spec, plan, False)
    assert needle in str(err.value)


@pytest.mark.parametrize("spec,plan,name", [
    (None, CPU1, "AUTO"), ("collective", CPU1, "AUTO"), ("ring", CPU1, "RING"),
    ("xring", CPU1, "RING"), ("nccl", GPU2, "NCCL"),
    # Unset on GPUs: NCCL. TensorFlow's AUTO would run its own ring all-reduce there.
    (None, GPU2, "NCCL")])
def test_collective_implementation(spec, plan, name):
    impl, _ = strategy_lib.collective_implementation(spec, plan)
    assert impl == getattr(tf.distribute.experimental.CommunicationImplementation, name)


def test_collective_nccl_on_cpu_is_an_error():
    with pytest.raises(UsageError, match="nccl needs GPUs"):
        strategy_lib.collective_implementation("nccl", CPU1)


@pytest.mark.parametrize("vu,show", [("parameter_server", False), ("replicated", True),
                                     ("independent", False)])
def test_one_device_is_one_device_strategy_with_the_legacy_labels(vu, show):
    sp = strategy_lib.make_strategy(make_settings({"variable_update": vu, "device": "cpu"}), CPU1)
    assert isinstance(sp.strategy, tf.distribute.OneDeviceStrategy)
    assert (sp.variables_label, sp.show_all_reduce, sp.all_reduce_label) == (vu, show, None)
    assert sp.num_workers == 1 and sp.job_name == "" and sp.serve is None


@pytest.mark.parametrize("flags,unused", [
    ({"all_reduce_spec": "nccl"}, "--all_reduce_spec"),
    ({"all_reduce_spec": "psgpu#4"}, "--all_reduce_spec"),
    ({"hierarchical_copy": True}, "--hierarchical_copy")])
def test_a_legacy_one_gpu_line_on_the_cpu_has_nothing_to_reduce(flags, unused):
    """`--num_gpus=1 --variable_update=replicated --all_reduce_spec=nccl` where no GPU is visible
    falls back to the CPU (devices.select_devices) and runs: one device reduces nothing."""
    sp = strategy_lib.make_strategy(make_settings(dict(variable_update="replicated", **flags)),
                                    CPU1)
    assert isinstance(sp.strategy, tf.distribute.OneDeviceStrategy)
    assert sp.notices == ("One device: nothing to all-reduce (%s unused)" % unused,)


def test_multi_worker_value_without_a_cluster_runs_replicated_and_says_so():
    sp = strategy_lib.make_strategy(
        make_settings({"variable_update": "collective_all_reduce", "device": "cpu"}), CPU1)
    assert sp.variables_label == "replicated"
    assert sp.notices[0].startswith("--variable_update=collective_all_reduce without a cluster")


@pytest.mark.parametrize("flags,plan,needle", [
    (dict(variable_update="replicated", job_name="worker", worker_hosts="127.0.0.1:1"), CPU1,
     "use --variable_update=collective_all_reduce"),
    (dict(variable_update="parameter_server", job_name="worker", worker_hosts="127.0.0.1:1"),
     CPU1, "not parameter_server"),
    (dict(variable_update="collective_all_reduce", job_name="worker", ps_hosts="127.0.0.1:3",
          worker_hosts="127.0.0.1:1", controller_host="127.0.0.1:2"), CPU1,
     "use --variable_update=parameter_server or distributed_replicated"),
    (dict(job_name="worker", worker_hosts="127.0.0.1:1", num_gpus=2), CPU2,
     "a multi-host run uses one CPU device per task"),
    (dict(job_name="worker", worker_hosts="127.0.0.1:1", ps_hosts="127.0.0.1:3",
          controller_host="127.0.0.1:2", num_gpus=2), CPU2,
     "a multi-host run uses one CPU device per task"),
    (dict(variable_update="collective_all_reduce", job_name="worker",
          worker_hosts="127.0.0.1:1", all_reduce_spec="pscpu"), CPU1,
     "cannot be honoured by MultiWorkerMirroredStrategy"),
    (dict(job_name="ps", ps_hosts="127.0.0.1:3", worker_hosts="127.0.0.1:1", xla=True,
          controller_host="127.0.0.1:2"), CPU1,
     "--xla cannot compile a step whose variables live on parameter servers (XLA reads only "
     "variables on its own device): leave out --ps_hosts (MultiWorkerMirroredStrategy) or --xla"),
])
def test_multi_host_misuse_is_a_usage_error(flags, plan, needle):
    with pytest.raises(UsageError) as err:
        strategy_lib.make_strategy(make_settings(dict(device="cpu", **flags)), plan)
    assert needle in str(err.value)


def test_a_model_keras_compiles_with_xla_is_refused_on_parameter_servers():
    flags = dict(device="cpu", job_name="ps", ps_hosts="127.0.0.1:3", worker_hosts="127.0.0.1:1",
                 controller_host="127.0.0.1:2")
    with pytest.raises(UsageError) as err:
        strategy_lib.make_strategy(make_settings(flags), CPU1,
                                   "convnext_tiny: Keras compiles its grouped convolutions with XLA")
    assert str(err.value) == (
        "convnext_tiny: Keras compiles its grouped convolutions with XLA, which cannot read "
        "variables that live on parameter servers (XLA reads only variables on its own device): "
        "leave out --ps_hosts (MultiWorkerMirroredStrategy)")


def test_a_slurm_step_picks_the_strategy_as_worker_hosts_do(monkeypatch):
    from slurm_env import SLURM_TASK_2
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in SLURM_TASK_2.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UsageError) as err:
        strategy_lib.make_strategy(make_settings(dict(device="cpu",
                                                    variable_update="replicated")), CPU1)
    assert str(err.value).startswith("a Slurm step of several tasks without ps runs "
                                     "MultiWorkerMirroredStrategy: use --variable_update="
                                     "collective_all_reduce")
    p = make_settings({})
    assert strategy_lib.num_workers(p, cluster.read_cluster(p)) == 3


def test_ps_and_worker_tasks_serve_with_the_legacy_lines():
    flags = dict(device="cpu", ps_hosts="127.0.0.1:3", worker_hosts="127.0.0.1:1,127.0.0.1:4",
                 controller_host="127.0.0.1:2")
    ps = strategy_lib.make_strategy(make_settings(dict(job_name="ps", **flags)), CPU1)
    assert ps.strategy is None and callable(ps.serve)
    assert ps.start_lines == ("Running parameter server 0",)
    assert (ps.variables_label, ps.num_workers, ps.job_name) == ("parameter_server", 2, "ps")
    worker = strategy_lib.make_strategy(
        make_settings(dict(job_name="worker", task_index=1, **flags)), CPU1)
    assert worker.start_lines == ("Starting worker 1",)


def test_a_ps_task_with_gpus_says_it_leaves_them_unused():
    ps = strategy_lib.make_strategy(make_settings(dict(
        job_name="ps", ps_hosts="127.0.0.1:3", worker_hosts="127.0.0.1:1",
        controller_host="127.0.0.1:2", num_gpus=2)), GPU2)
    assert ps.notices == ("Parameter server: variables live on this task's CPU "
                          "(ParameterServerStrategy); its GPUs are left unused and free",)


def test_parameter_server_workers_with_different_gpu_counts_are_a_usage_error(monkeypatch):
    """Workers now run the GPUs their flags choose; TensorFlow needs the same count on each."""
    from tfbench.distribute import peers

    def mismatched(resolver):
        raise ValueError("Mismatched number of GPUs per worker")
    monkeypatch.setattr(peers, "rendezvous", lambda *args, **kwargs: None)
    monkeypatch.setattr(tf.distribute.experimental, "ParameterServerStrategy", mismatched)
    with pytest.raises(UsageError, match="parameter-server workers run different numbers of "
                                         "GPUs: give every worker the same --num_gpus"):
        strategy_lib.make_strategy(make_settings(dict(
            device="cpu", job_name="controller", ps_hosts="127.0.0.1:3",
            worker_hosts="127.0.0.1:1", controller_host="127.0.0.1:2")), CPU1)


def test_num_workers_counts_cluster_workers():
    alone = make_settings({})
    assert strategy_lib.num_workers(alone, cluster.read_cluster(alone)) == 1
    three = make_settings({"job_name": "worker", "worker_hosts": "a:1,b:2,c:3"})
    assert strategy_lib.num_workers(three, cluster.read_cluster(three)) == 3


class _CapturedStrategy:
    """Stands in for MultiWorkerMirroredStrategy: keeps what tfbench passes to it."""

    def __init__(self, cluster_resolver=None, communication_options=None):
        import types
        self.cluster_resolver = cluster_resolver
        self.communication_options = communication_options
        # TensorFlow's reduction of the compute devices' values, which packing wraps.
        self.extended = types.SimpleNamespace(_cross_device_ops="CollectiveAllReduce")


@pytest.fixture
def captured_multi_worker(monkeypatch):
    from tfbench.distribute import peers
    monkeypatch.setattr(peers, "rendezvous", lambda *args, **kwargs: None)
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", _CapturedStrategy)

    def make(plan, **flags):
        p = make_settings(dict(device=plan.kind, job_name="worker", task_index=0,
                             worker_hosts="127.0.0.1:1,127.0.0.1:2", **flags))
        return strategy_lib.make_strategy(p, plan).strategy
    return make


def _local_devices(resolver):
    """The devices MultiWorkerMirroredStrategy computes on, as TensorFlow derives them."""
    from tensorflow.python.distribute import collective_all_reduce_strategy as mwms
    devices, _ = mwms.CollectiveAllReduceExtended._initialize_local_devices(
        None, resolver, "/job:worker/task:0")
    return devices


def test_multi_worker_strategy_computes_on_the_planned_gpus(captured_multi_worker):
    resolver = captured_multi_worker(GPU2).cluster_resolver
    assert resolver.num_accelerators() == {"GPU": 2}
    assert _local_devices(resolver) == ("/job:worker/task:0/device:GPU:0",
                                        "/job:worker/task:0/device:GPU:1")


def test_multi_worker_strategy_on_cpu_keeps_one_cpu_device(captured_multi_worker):
    resolver = captured_multi_worker(CPU1).cluster_resolver
    assert resolver.num_accelerators() == {}
    assert _local_devices(resolver) == ("/job:worker/task:0/device:CPU:0",)


@pytest.mark.parametrize("plan,spec,name", [(CPU1, None, "AUTO"), (CPU1, "ring", "RING"),
                                            (GPU2, "nccl", "NCCL")])
def test_multi_worker_collectives_carry_no_per_collective_timeout(captured_multi_worker, plan,
                                                                  spec, name):
    # A timeout starts a thread per collective (TensorFlow: a debugging aid); lost peers are
    # found by the coordination service's heartbeats instead.
    options = captured_multi_worker(plan, all_reduce_spec=spec,
                                    cluster_timeout_secs=7).communication_options
    assert options.timeout_seconds is None
    assert options.implementation == getattr(
        tf.distribute.experimental.CommunicationImplementation, name)


def _step_compiles(p, plan, strategy) -> bool:
    """What the run's step decides (engine.steps, from the runner's step settings)."""
    from tfbench.engine import base
    from tfbench.engine.resolved import TRAINING, resolve
    runner = base.ModeRunner(p=p, plan=resolve(p.with_flags(device="cpu")), strategy=strategy)
    config = runner.step_config(TRAINING)
    return strategies.replica_step_compilation(strategy, xla=config.jit_compile)[0]


FORWARD_BACKWARD_ONLY = ("--xla compiles each replica's forward and backward passes, not its "
                         "all-reduce and update: ")


@pytest.mark.parametrize("flags", [
    {"xla": True},
    {"xla_compile": True, "use_fp16": True, "fp16_enable_auto_loss_scale": True},
    {"xla": True, "precision": "bf16"},
])
@pytest.mark.parametrize("collectives_compiled", [True, False])
def test_the_strategy_and_the_step_decide_alike_what_xla_compiles(monkeypatch, flags,
                                                                  collectives_compiled):
    """On GPUs with --xla (dynamic loss scaling too), the strategy's words and the step agree:
    each replica's whole step where XLA takes the collectives, else forward and backward."""
    if not collectives_compiled:   # RING, as MirroredStrategy takes on virtual GPUs
        monkeypatch.setattr(strategies, "xla_takes_its_collectives", lambda strategy: False)
    p = make_settings(dict(num_gpus=2, variable_update="replicated", **flags))
    sp = strategy_lib.make_strategy(p, GPU2)
    assert _step_compiles(p, GPU2, sp.strategy) is collectives_compiled
    assert ("inside XLA" in sp.reduction) is collectives_compiled
    said = [n for n in sp.notices if n.startswith(FORWARD_BACKWARD_ONLY)]
    assert said == ([] if collectives_compiled else [
        FORWARD_BACKWARD_ONLY + "XLA does not compile the NCCL collectives TensorFlow chose for "
                                "these devices"])


def test_without_xla_nothing_is_said_of_replica_steps():
    p = make_settings(dict(num_gpus=2, variable_update="replicated"))
    sp = strategy_lib.make_strategy(p, GPU2)
    assert not _step_compiles(p, GPU2, sp.strategy)
    assert "XLA" not in sp.reduction and not any("--xla" in n for n in sp.notices)


class _MultiWorkerOnTwoGpus(tf.distribute.MultiWorkerMirroredStrategy):
    """Stands in for MultiWorkerMirroredStrategy on this worker's two GPUs (no cluster starts):
    what TensorFlow's strategy holds that decides how it runs a compiled replica function."""

    def __init__(self, cluster_resolver=None, communication_options=None):  # noqa: D107
        import types
        self._extended = types.SimpleNamespace(
            _communication_options=communication_options, _num_replicas_in_sync=4,
            _cross_device_ops="CollectiveAllReduce",
            worker_devices=("/job:worker/replica:0/task:0/device:GPU:0",
                            "/job:worker/replica:0/task:0/device:GPU:1"))


PACKS = "gradients as computed, packs of 25 MiB"


@pytest.mark.parametrize("flags, compiled, reduction, notice", [
    ({"xla": True}, True,
     "collective all-reduce (nccl (the GPU default)) over 2 workers, inside XLA; " + PACKS, None),
    ({"xla": True, "all_reduce_spec": "collective"}, True,
     "collective all-reduce (auto) over 2 workers, inside XLA; " + PACKS, None),
    ({"xla": True, "all_reduce_spec": "ring"}, False,
     "collective all-reduce (ring) over 2 workers; " + PACKS,
     FORWARD_BACKWARD_ONLY + "XLA does not compile the RING collectives --all_reduce_spec asks "
                             "for (nccl and collective it does)"),
    ({}, False, "collective all-reduce (nccl (the GPU default)) over 2 workers; " + PACKS, None),
])
def test_a_multi_worker_strategy_says_what_xla_compiles_as_its_step_does(
        monkeypatch, flags, compiled, reduction, notice):
    from tfbench.distribute import peers
    monkeypatch.setattr(peers, "rendezvous", lambda *args, **kwargs: None)
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", _MultiWorkerOnTwoGpus)
    p = make_settings(dict(device="gpu", num_gpus=2, job_name="worker", task_index=0,
                         worker_hosts="127.0.0.1:1,127.0.0.1:2", **flags))
    sp = strategy_lib.make_strategy(p, GPU2)
    assert _step_compiles(p, GPU2, sp.strategy) is compiled
    assert sp.reduction == reduction
    said = [n for n in sp.notices if n.startswith(FORWARD_BACKWARD_ONLY)]
    assert said == ([notice] if notice else [])


def test_the_step_asks_the_strategys_function_with_its_xla_setting(monkeypatch):
    asked = []

    def answer(strategy, *, xla):
        asked.append((strategy, xla))
        return False, None
    monkeypatch.setattr(strategies, "replica_step_compilation", answer)
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    with one.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    for jit in (True, False):
        steps.Steps(model, None, one, steps.StepConfig(
            num_label_classes=3, weight_decay=0.0, jit_compile=jit)).forward_step()
    assert asked == [(one, True), (one, False)]


@pytest.mark.parametrize("plan, flags, transfer", [
    (GPU2, {}, packing.Transfer(None, 0, packing.PACK_BYTES)),
    (GPU2, {"use_fp16": True, "gradient_repacking": 3},
     packing.Transfer("float16", 3, packing.PACK_BYTES)),
    (GPU2, {"all_reduce_spec": "nccl#2"}, packing.Transfer(None, 2, packing.PACK_BYTES)),
    (CPU1, {}, packing.Transfer(None, 0, 0)),
])
def test_multi_worker_gradients_travel_as_on_one_host(captured_multi_worker, plan, flags,
                                                      transfer):
    """MultiWorkerMirroredStrategy's reduction of the compute devices' values, on both of its
    paths (merge calls and each replica's XLA step), is wrapped in the packing a single-host
    run installs: the transfer dtype, --gradient_repacking or the spec's `#N`, packs of 25 MiB
    on GPUs and each gradient alone on CPUs. Without it TensorFlow all-reduces every gradient
    in one collective after the backward pass (gpu_path/test_graph_audit.py shows the graph)."""
    ops = captured_multi_worker(plan, **flags).extended._cross_device_ops  # noqa: SLF001
    assert isinstance(ops, packing.PackedAllReduce)
    assert (ops.inner, ops.transfer) == ("CollectiveAllReduce", transfer)
