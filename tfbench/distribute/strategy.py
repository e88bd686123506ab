"""--variable_update and friends mapped onto tf.distribute strategies.

  one device                 OneDeviceStrategy (any single-host value)
  parameter_server           SpreadStorageStrategy (spread.py): each variable on one compute
                             device, the least loaded, its gradients summed there; with
                             --local_parameter_device=cpu CentralStorageStrategy on the CPU
                             (replicated under --xla with several devices)
  replicated                 MirroredStrategy; --all_reduce_spec / --hierarchical_copy pick
                             NcclAllReduce, HierarchicalCopyAllReduce or ReductionToOneDevice;
                             without them NCCL on GPUs, and on CPU devices the legacy script's
                             own (strategies.SumsInTurn); gradients travel in the compute dtype
                             and in packs (packing.py; on CPU devices each alone unless asked)
  independent                MirroredStrategy whose gradient all-reduce is the identity: every
                             replica updates its own copy of the variables with its own gradient
  collective_all_reduce,     MultiWorkerMirroredStrategy over --worker_hosts or TF_CONFIG;
  distributed_all_reduce,    gradients travel as under replicated (packing.py: the transfer
  distributed_replicated     dtype, packs), so the first packs overlap the backward pass
  parameter_server /         ParameterServerStrategy + ClusterCoordinator when --ps_hosts (or
  distributed_replicated     TF_CONFIG "ps") is given; ps and worker tasks serve
  horovod                    one device per process, gradients averaged with horovod.tensorflow

This module builds the strategy for a run (make_strategy) and says what it built
(BuiltStrategy). tfbench's own strategies are in strategies.py, what steps and checkpoints ask of
a strategy in sync.py, the input pipelines under a strategy in pipelines.py, and the scope that
models and optimizers are built in (how their state is aggregated) in variables.py.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.distribute import cluster as cluster_lib
from tfbench.distribute import packing, peers
from tfbench.config import settings as settings_lib
from tfbench.distribute.devices import DeviceSet
from tfbench.distribute.spread import SpreadStorageStrategy
from tfbench.distribute.strategies import (HorovodStrategy, IndependentStrategy, SumsInTurn,
                                           coordinator, import_horovod, remember_cluster,
                                           replica_step_compilation)
from tfbench.errors import UsageError

SINGLE_HOST_VALUES = ("parameter_server", "replicated", "independent")
MULTI_WORKER_VALUES = ("collective_all_reduce", "distributed_all_reduce",
                       "distributed_replicated")
PS_VALUES = ("parameter_server", "distributed_replicated")
# Values whose legacy header has an `AllReduce:` line.
ALL_REDUCE_VALUES = ("replicated", "distributed_all_reduce", "collective_all_reduce")


@dataclasses.dataclass
class BuiltStrategy:
    """The strategy make_strategy built for a run's devices, and what the header, the notices
    and the manifest say of it."""
    strategy: Optional[tf.distribute.Strategy]   # None on a ps/worker task that only serves
    variables_label: str          # the header's `Variables:` line: what ran
    all_reduce_label: Optional[str]  # the header's `AllReduce:` line, when shown
    show_all_reduce: bool
    num_workers: int = 1
    notices: tuple[str, ...] = ()
    job_name: str = ""            # non-empty in a cluster: the header's `Sync:` line
    horovod_device: Optional[str] = None
    start_lines: tuple[str, ...] = ()   # legacy lines after the header (Starting worker i)
    serve: Optional[Callable[[], None]] = None   # a ps/worker task: blocks while serving
    cluster: Optional[cluster_lib.Cluster] = None
    reduction: str = ""           # what reduces gradients, for the JSON manifest


def distributed_failure(exc: BaseException, sp: BuiltStrategy):
    """A DistributedError for a peer failure during a multi-host run, else None."""
    return peers.as_distributed_error(exc, sp.cluster)


def num_workers(p: Settings, cluster: Optional[cluster_lib.Cluster]) -> int:
    """Processes whose images one step counts: the workers of `cluster` (read_cluster(p), read
    by the caller), or horovod's size."""
    if p.devices.variable_update == "horovod":
        try:
            import horovod.tensorflow as hvd
        except ImportError:
            return 1   # make_strategy reports the missing horovod
        hvd.init()
        return hvd.size()
    return cluster.num_workers if cluster is not None else 1


# --- all-reduce specs -----------------------------------------------------------------------

def _split_spec(spec: str) -> tuple[str, int]:
    """'nccl#2' -> ('nccl', 2): legacy `#N` splits gradients into N packs."""
    name, _, shards = spec.strip().partition("#")
    if shards and not shards.isdigit():
        raise UsageError("--all_reduce_spec=%s: the part after # must be a number of shards"
                         % spec)
    return name.strip().lower(), int(shards) if shards else 0


def spec_packs(spec: Optional[str]) -> int:
    """The `#N` of --all_reduce_spec: gradient packs (0 when not given)."""
    return _split_spec(spec)[1] if spec else 0


def cross_device_ops(spec: Optional[str], device_set: DeviceSet, hierarchical: bool):
    """(CrossDeviceOps or None for TF's default, label of what runs, notices).

    The `#N` of the spec (spec_packs) is honoured by packing.PackedAllReduce, which hands the
    reduction one gradient pack at a time: the reduction itself packs nothing (num_packs=0)."""
    notices: list[str] = []
    if hierarchical and not spec:
        return _hierarchical_copy(device_set, notices)
    if not spec:
        return None, None, notices
    if "/" in spec or ":" in spec:
        raise UsageError("--all_reduce_spec=%s cannot be honoured under TF2: MirroredStrategy "
                         "applies one reduction to every gradient (no per-size or per-level "
                         "split); use nccl, hierarchical_copy, pscpu or psgpu" % spec)
    name, _ = _split_spec(spec)
    if hierarchical and name not in ("xring", "hierarchical_copy", "hierarchical"):
        raise UsageError("--hierarchical_copy conflicts with --all_reduce_spec=%s; give one"
                         % spec)
    if name == "nccl":
        why = settings_lib.nccl_refusal(spec, device_set.kind == "gpu", multi_worker=False)
        if why:
            raise UsageError(why)
        return tf.distribute.NcclAllReduce(num_packs=0), "nccl", notices
    if name in ("xring", "hierarchical_copy", "hierarchical"):
        if name == "xring":
            notices.append("--all_reduce_spec=xring: TF2 has no ring all-reduce within one "
                           "host; using hierarchical copy (HierarchicalCopyAllReduce)")
        return _hierarchical_copy(device_set, notices)
    if name in ("pscpu", "psgpu"):
        if name == "psgpu" and device_set.kind != "gpu":
            raise UsageError("--all_reduce_spec=psgpu needs GPUs; on CPU use pscpu")
        device = "/cpu:0" if name == "pscpu" else device_set.names[0]
        return (tf.distribute.ReductionToOneDevice(reduce_to_device=device),
                "reduction_to_one_device(%s)" % device, notices)
    raise UsageError("--all_reduce_spec=%s cannot be honoured under TF2: use nccl, "
                     "hierarchical_copy (or xring), pscpu or psgpu" % spec)


def _hierarchical_copy(device_set: DeviceSet, notices: list[str]):
    """HierarchicalCopyAllReduce where it sums every device's value: an even device count.

    TensorFlow (cross_device_utils.aggregate_gradients_using_hierarchical_copy, 2.17 to 2.21)
    sums devices [0, n//2) and [n//2, 2*(n//2)), so with an odd n the last device's gradient
    is left out, silently. Any even n (6 too) is covered.
    """
    n = device_set.num_devices
    if n > 1 and n % 2:
        device = device_set.names[0]
        notices.append("HierarchicalCopyAllReduce sums two halves of the devices and would "
                       "leave %s (of %d) out: reducing to one device (%s) instead"
                       % (device_set.names[-1], n, device))
        return (tf.distribute.ReductionToOneDevice(reduce_to_device=device),
                "reduction_to_one_device(%s)" % device, notices)
    return tf.distribute.HierarchicalCopyAllReduce(num_packs=0), "hierarchical_copy", notices


def collective_implementation(spec: Optional[str], device_set: DeviceSet):
    """(CommunicationImplementation, label) for MultiWorkerMirroredStrategy.

    Unset on GPUs is NCCL: TensorFlow's AUTO takes NCCL only when asked by name or config
    (collective_param_resolver_local.cc, AssignCollectiveType, 2.17 to 2.21) and otherwise runs
    its own ring all-reduce, device copies within a host and gRPC between hosts.
    """
    impl = tf.distribute.experimental.CommunicationImplementation
    if not spec:
        if device_set.kind == "gpu":
            return impl.NCCL, "nccl (the GPU default)"
        return impl.AUTO, "auto"
    name, _ = _split_spec(spec)
    if name in ("collective", "auto"):
        return impl.AUTO, "auto"
    if name in ("ring", "xring", "grpc"):
        return impl.RING, "ring"
    if name == "nccl":
        why = settings_lib.nccl_refusal(spec, device_set.kind == "gpu", multi_worker=True)
        if why:
            raise UsageError(why)
        return impl.NCCL, "nccl"
    raise UsageError("--all_reduce_spec=%s cannot be honoured by MultiWorkerMirroredStrategy: "
                     "use collective (auto), ring or nccl" % spec)


# --- strategies -----------------------------------------------------------------------------

def make_strategy(p: Settings, device_set: DeviceSet, model_xla: str = "") -> BuiltStrategy:
    """The strategy for --variable_update on this host (or this task of a cluster). model_xla:
    what of the model's step Keras compiles with XLA whatever --xla, named ('convnext_tiny: Keras
    compiles its grouped convolutions with XLA'; '' for nothing: ModelSpec.xla_compiled)."""
    cl = cluster_lib.read_cluster(p)
    if p.devices.variable_update == "horovod":
        if cl is not None:
            raise UsageError("--variable_update=horovod starts its processes with horovodrun "
                             "or mpirun, not --worker_hosts/--ps_hosts/TF_CONFIG")
        return _horovod(p, device_set)
    if cl is not None:
        return _multi_host(p, device_set, cl, model_xla)
    return _single_host(p, device_set, model_xla)


def _single_host(p: Settings, device_set: DeviceSet, model_xla: str = "") -> BuiltStrategy:
    vu = p.devices.variable_update
    notices: list[str] = []
    if vu in MULTI_WORKER_VALUES:
        notices.append("--variable_update=%s without a cluster (--worker_hosts or TF_CONFIG): "
                       "running on this host alone as replicated (MirroredStrategy)" % vu)
        vu = "replicated"
    if vu == "parameter_server" and device_set.num_devices > 1 and (p.asks.xla or model_xla):
        # An XLA cluster reads only variables on its own device (tensorflow.org/xla/known_issues).
        notices.append("%s cannot read variables held on another device, so each device keeps "
                       "its own copy (--variable_update=replicated instead of parameter_server)"
                       % ("--xla: XLA" if p.asks.xla else model_xla + ", which"))
        vu = "replicated"
    show = vu in ALL_REDUCE_VALUES
    if device_set.num_devices == 1:
        # A legacy line for one GPU (say --all_reduce_spec=nccl, after the no-GPU fallback to
        # the CPU) has nothing to reduce: never an error.
        unused = [flag for flag, given in (("--all_reduce_spec", p.devices.all_reduce_spec),
                                           ("--hierarchical_copy", p.devices.hierarchical_copy))
                  if given]
        if unused:
            notices.append("One device: nothing to all-reduce (%s unused)" % " and ".join(unused))
        return BuiltStrategy(tf.distribute.OneDeviceStrategy(device_set.names[0]), vu,
                             p.devices.all_reduce_spec, show, notices=tuple(notices),
                             reduction="none (one device)")
    ops, label, spec_notices = cross_device_ops(p.devices.all_reduce_spec, device_set,
                                                p.devices.hierarchical_copy)
    if vu != "replicated" and (p.devices.all_reduce_spec or p.devices.hierarchical_copy):
        notices.append("--all_reduce_spec/--hierarchical_copy apply to "
                       "--variable_update=replicated; ignored with %s" % vu)
        ops, label, spec_notices = None, None, []
    if vu != "replicated" and p.devices.gradient_repacking:
        notices.append("--gradient_repacking applies to --variable_update=replicated; ignored "
                       "with %s" % vu)
    notices.extend(spec_notices)
    if vu == "parameter_server":
        if p.devices.local_parameter_device.lower() != "cpu":
            strategy = SpreadStorageStrategy(device_set.names)
            return BuiltStrategy(strategy, vu, None, False, notices=tuple(notices),
                                 reduction="variables spread over the %d devices, each "
                                           "gradient summed on its variable's device"
                                           % device_set.num_devices)
        strategy = tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=list(device_set.names), parameter_device="/cpu:0")
        # TensorFlow's default ReductionToOneDevice(_LOCAL_CPU) is the parameter device here;
        # named so that the reduction's device is the one the flag says.
        strategy.extended._cross_device_ops = tf.distribute.ReductionToOneDevice(  # noqa: SLF001
            reduce_to_device="/cpu:0")
        return BuiltStrategy(strategy, vu, None, False, notices=tuple(notices),
                             reduction="central storage on /cpu:0, gradients summed there")
    if vu == "independent":
        return BuiltStrategy(IndependentStrategy(device_set.names), vu, None, False,
                             notices=tuple(notices), reduction="none (independent replicas)")
    reduction = label or "MirroredStrategy default"
    if ops is None and device_set.kind == "cpu":
        # As the legacy script: NCCL needs GPUs, and TensorFlow's ring on CPU devices copies.
        devices = ["/cpu:0"] if p.devices.local_parameter_device.lower() == "cpu" \
            else list(device_set.names)
        ops = SumsInTurn(devices)
        reduction = "each gradient summed on %s (the legacy default on CPU devices)" % (
            devices[0] if len(devices) == 1 else "one of the %d devices in turn" % len(devices))
    strategy = tf.distribute.MirroredStrategy(list(device_set.names), cross_device_ops=ops)
    compiled = _replica_steps_compiled(p, strategy, notices)
    if compiled:
        impl = strategy.extended._communication_options.implementation.value  # noqa: SLF001
        reduction = "collective (%s, inside XLA)" % impl.lower()
        if ops is not None:
            notices.append("--xla compiles each replica's step with its all-reduce, which "
                           "TensorFlow runs as %s collectives inside XLA: the algorithm of %s "
                           "is not used" % (impl, "--all_reduce_spec=%s" % p.devices.all_reduce_spec
                                            if p.devices.all_reduce_spec
                                            else "--hierarchical_copy"))
            # What MirroredStrategy holds when given none: its collectives, which it uses inside
            # XLA whatever it was given (MirroredExtended._get_cross_device_ops, 2.17 to 2.21).
            strategy.extended._cross_device_ops = strategy.extended._collective_ops  # noqa: SLF001
            label = reduction
    transfer = packing.transfer_for(p, spec_packs(p.devices.all_reduce_spec), compiled,
                                    device_set.kind)
    packing.install(strategy, transfer, compiled)
    return BuiltStrategy(strategy, vu, p.devices.all_reduce_spec if label is None else label, show,
                         notices=tuple(notices),
                         reduction="%s; gradients %s" % (reduction, transfer.label()))


def _replica_steps_compiled(p: Settings, strategy: tf.distribute.Strategy,
                            notices: list[str]) -> bool:
    """Whether --xla compiles each replica's whole step, all-reduce included, as the step will
    (strategies.replica_step_compilation); where it compiles forward and backward only on
    GPUs, a notice says why."""
    compiled, why = replica_step_compilation(strategy, xla=p.asks.xla)
    if why is not None:
        notices.append("--xla compiles each replica's forward and backward passes, not its "
                       "all-reduce and update: %s" % why)
    return compiled


def _horovod(p: Settings, device_set: DeviceSet) -> BuiltStrategy:
    hvd = import_horovod()
    if device_set.num_devices != 1:
        raise UsageError("--variable_update=horovod runs one device per process (start one "
                         "process per GPU with horovodrun); got --num_gpus=%d"
                         % device_set.num_devices)
    strategy = HorovodStrategy(device_set.names[0], hvd, p.devices.horovod_device)
    return BuiltStrategy(strategy, "horovod", None, False, num_workers=hvd.size(),
                         horovod_device=p.devices.horovod_device or None,
                         reduction="horovod allreduce (average over %d processes)" % hvd.size())


def _multi_host(p: Settings, device_set: DeviceSet, cl: cluster_lib.Cluster,
                model_xla: str = "") -> BuiltStrategy:
    vu = p.devices.variable_update
    explicit = p.is_explicit("variable_update")
    timeout = p.cluster.cluster_timeout_secs
    # The controller and ps tasks of a parameter-server cluster run no step: their devices
    # do not matter (the same command line on every task is fine).
    computes = not (cl.mode == cluster_lib.PARAMETER_SERVER and cl.task_type in ("chief", "ps"))
    if computes and device_set.kind == "cpu" and device_set.num_devices > 1:
        raise UsageError("a multi-host run uses one CPU device per task; --device=cpu "
                         "--num_gpus=%d splits the CPU only on a single host"
                         % device_set.num_devices)
    job_name = p.cluster.job_name or {"chief": "controller"}.get(cl.task_type, cl.task_type)
    if cl.mode == cluster_lib.PARAMETER_SERVER:
        if p.asks.xla:
            raise UsageError("--xla cannot compile a step whose variables live on parameter "
                             "servers (XLA reads only variables on its own device): leave out "
                             "--ps_hosts (MultiWorkerMirroredStrategy) or --xla")
        if model_xla:
            raise UsageError("%s, which cannot read variables that live on parameter servers "
                             "(XLA reads only variables on its own device): leave out --ps_hosts "
                             "(MultiWorkerMirroredStrategy)" % model_xla)
        if explicit and vu not in PS_VALUES:
            raise UsageError("--ps_hosts (or TF_CONFIG with ps) runs ParameterServerStrategy: "
                             "use --variable_update=parameter_server or distributed_replicated, "
                             "not %s" % vu)
        label = vu if vu in PS_VALUES else "parameter_server"
        if cl.task_type in ("ps", "worker"):
            line = ("Running parameter server %d" if cl.task_type == "ps"
                    else "Starting worker %d") % cl.task_index
            notices = ()
            if cl.task_type == "ps" and device_set.kind == "gpu":
                notices = ("Parameter server: variables live on this task's CPU "
                           "(ParameterServerStrategy); its GPUs are left unused and free",)
            return BuiltStrategy(None, label, None, False, num_workers=cl.num_workers,
                                 notices=notices, job_name=job_name, start_lines=(line,),
                                 cluster=cl,
                                 serve=lambda: peers.serve(cl, timeout, p.cluster.server_protocol),
                                 reduction="parameter servers")
        peers.rendezvous(cl, timeout, listen=False)
        try:
            strategy = peers.run_bounded(
                lambda: tf.distribute.experimental.ParameterServerStrategy(
                    cl.resolver(p.cluster.server_protocol)), cl, timeout,
                "connecting to the ps and workers")
        except ValueError as exc:
            # TF counts replicas from the workers' GPUs (one per GPU) and needs equal counts.
            if "Mismatched number of GPUs" not in str(exc):
                raise
            raise UsageError("parameter-server workers run different numbers of GPUs: give "
                             "every worker the same --num_gpus (or as many --gpu_indices); "
                             "ParameterServerStrategy runs one replica per worker GPU") from None
        peers.run_bounded(lambda: coordinator(strategy), cl, timeout,
                                "starting the coordinator")
        peers.restore_sigterm_handler()
        remember_cluster(strategy, peers.BoundedCalls(cl, timeout, "waiting for a step"),
                         cl.num_workers)
        return BuiltStrategy(strategy, label, None, False, num_workers=cl.num_workers,
                             job_name=job_name, cluster=cl,
                             reduction="parameter servers (%d)" % len(cl.addresses("ps")))
    notices = list(cl.notices)
    if explicit and vu not in MULTI_WORKER_VALUES:
        raise UsageError("%s without ps runs "
                         "MultiWorkerMirroredStrategy: use --variable_update="
                         "collective_all_reduce (or distributed_all_reduce, "
                         "distributed_replicated), not %s"
                         % ("a Slurm step of several tasks" if cl.source == "Slurm"
                            else "--worker_hosts (or TF_CONFIG)", vu))
    if vu not in MULTI_WORKER_VALUES:
        vu = "collective_all_reduce"
        notices.append("Cluster without ps: MultiWorkerMirroredStrategy "
                       "(--variable_update=collective_all_reduce)")
    impl, impl_label = collective_implementation(p.devices.all_reduce_spec, device_set)
    # No timeout_seconds: it starts a thread per collective. A lost peer aborts the collectives
    # through the coordination service (see tfbench.distribute.cluster).
    options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
    resolver = cl.resolver(p.cluster.server_protocol,
                           num_gpus=device_set.num_devices if device_set.kind == "gpu" else 0)
    peers.rendezvous(cl, timeout)
    strategy = peers.run_bounded(
        lambda: tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=options),
        cl, timeout, "waiting for all workers to join")
    peers.restore_sigterm_handler()
    compiled = _replica_steps_compiled(p, strategy, notices)
    # Packs as on one host (the transfer dtype, --gradient_repacking, the `#N` of the spec), so
    # the first packs are all-reduced while the backward pass makes the rest.
    transfer = packing.transfer_for(p, spec_packs(p.devices.all_reduce_spec), compiled,
                                    device_set.kind)
    packing.install(strategy, transfer, compiled)
    return BuiltStrategy(strategy, vu, p.devices.all_reduce_spec, vu in ALL_REDUCE_VALUES,
                         num_workers=cl.num_workers, notices=tuple(notices), job_name=job_name,
                         start_lines=("Starting worker %d" % cl.worker_rank,), cluster=cl,
                         reduction="collective all-reduce (%s) over %d workers%s; gradients %s"
                         % (impl_label, cl.num_workers, ", inside XLA" if compiled else "",
                            transfer.label()))


