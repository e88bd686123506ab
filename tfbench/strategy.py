"""--variable_update and friends mapped onto tf.distribute strategies.

  one device                 OneDeviceStrategy (any single-host value)
  parameter_server           CentralStorageStrategy: variables on --local_parameter_device
                             (replicated under --xla with several devices)
  replicated                 MirroredStrategy; --all_reduce_spec / --hierarchical_copy pick
                             NcclAllReduce, HierarchicalCopyAllReduce or ReductionToOneDevice
  independent                MirroredStrategy whose gradient all-reduce is the identity: every
                             replica updates its own copy of the variables with its own gradient
  collective_all_reduce,     MultiWorkerMirroredStrategy over --worker_hosts or TF_CONFIG
  distributed_all_reduce,
  distributed_replicated
  parameter_server /         ParameterServerStrategy + ClusterCoordinator when --ps_hosts (or
  distributed_replicated     TF_CONFIG "ps") is given; ps and worker tasks serve
  horovod                    one device per process, gradients averaged with horovod.tensorflow

Steps (tfbench.steps) asks this module how to scale and reduce gradients (`gradient_divisor`,
`reduce_gradients`), whether to broadcast initial state (`sync_initial_state`) and how to run a
step on a parameter-server cluster (`coordinator`, `ScheduledStep`). The runner feeds real data
through `distribute_inputs`: one input pipeline per worker (or horovod process), each replica
taking its own batches, each pipeline reading its own part of the data.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tfbench import cluster as cluster_lib
from tfbench import params as params_lib
from tfbench.devices import DevicePlan
from tfbench.errors import UsageError

SINGLE_HOST_VALUES = ("parameter_server", "replicated", "independent")
MULTI_WORKER_VALUES = ("collective_all_reduce", "distributed_all_reduce",
                       "distributed_replicated")
PS_VALUES = ("parameter_server", "distributed_replicated")
# Values whose legacy header has an `AllReduce:` line.
ALL_REDUCE_VALUES = ("replicated", "distributed_all_reduce", "collective_all_reduce")


@dataclasses.dataclass
class StrategyPlan:
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
    cluster: Optional[cluster_lib.ClusterPlan] = None
    reduction: str = ""           # what reduces gradients, for the JSON manifest


# --- gradient reduction without exchange (independent) -------------------------------------

class _NoExchange(tf.distribute.CrossDeviceOps):
    """All-reduce is the identity; reductions to a device (metrics) are real.

    Keras all-reduces gradients across replicas and then updates each replica's copy of a
    mirrored variable with its own replica's value of the result; with the identity every
    replica applies its own gradient, so the replicas train as independent models.
    """

    def __init__(self):
        super().__init__()
        self._to_one = tf.distribute.ReductionToOneDevice()

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        if destinations is per_replica_value:     # an all-reduce: each replica keeps its own
            return per_replica_value
        return self._to_one.reduce_implementation(reduce_op, per_replica_value, destinations,
                                                  options)

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        return [self.reduce_implementation(reduce_op, value, dest, options)
                for value, dest in value_destination_pairs]

    def broadcast_implementation(self, tensor, destinations):
        return self._to_one.broadcast_implementation(tensor, destinations)


class IndependentStrategy(tf.distribute.MirroredStrategy):
    """MirroredStrategy whose replicas never exchange gradients (--variable_update=independent)."""

    def __init__(self, devices):
        super().__init__(list(devices), cross_device_ops=_NoExchange())


# --- horovod ---------------------------------------------------------------------------------

def import_horovod():
    """horovod.tensorflow, initialised; UsageError when it is not importable."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        raise UsageError("--variable_update=horovod needs horovod, which is not "
                         "importable; use --variable_update=replicated (MirroredStrategy) "
                         "or collective_all_reduce instead") from None
    hvd.init()
    return hvd


class HorovodStrategy(tf.distribute.OneDeviceStrategy):
    """One device per process; gradients averaged over processes with horovod's allreduce."""

    def __init__(self, device: str, hvd, device_dense: str = ""):
        super().__init__(device)
        self.hvd = hvd
        self.device_dense = device_dense

    def reduce_gradients(self, grads: list) -> list:
        kwargs = {"device_dense": self.device_dense} if self.device_dense else {}
        return [None if g is None else self.hvd.allreduce(g, op=self.hvd.Average, **kwargs)
                for g in grads]

    def broadcast(self, variables: list) -> None:
        self.hvd.broadcast_variables(variables, root_rank=0)


# --- hooks for the step functions -----------------------------------------------------------

def gradient_divisor(strategy: tf.distribute.Strategy) -> int:
    """Replicas whose gradients are summed into one update (each loss is divided by it)."""
    if isinstance(strategy, IndependentStrategy):
        return 1
    return strategy.num_replicas_in_sync


def reduce_gradients(strategy: tf.distribute.Strategy, grads: list) -> list:
    """Cross-process reduction that tf.distribute does not do itself (horovod)."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.reduce_gradients(grads)
    return grads


def sync_initial_state(strategy: tf.distribute.Strategy, variables: list) -> None:
    """Every process starts from rank 0's variables (horovod); tf.distribute syncs its own."""
    if isinstance(strategy, HorovodStrategy) and variables:
        strategy.broadcast(variables)


def _multi_worker(strategy: tf.distribute.Strategy) -> bool:
    """A MultiWorkerMirroredStrategy spanning more than this process."""
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.num_replicas_in_sync > len(strategy.extended.worker_devices))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes --train_dir (checkpoints, summaries): horovod rank 0, the
    MultiWorkerMirroredStrategy chief (TensorFlow's: the "chief" task, else worker 0), and
    every process that is alone in running the steps (the parameter-server controller too)."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.hvd.rank() == 0
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return bool(strategy.extended.should_checkpoint)
    return True


def chief_label(strategy: tf.distribute.Strategy) -> str:
    """The process that writes --train_dir, as a user names it."""
    if isinstance(strategy, HorovodStrategy):
        return "horovod rank 0"
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        jobs = strategy.cluster_resolver.cluster_spec().as_dict()
        return "the chief task" if jobs.get("chief") else "worker 0"
    return "this process"


def saves_beside_chief(strategy: tf.distribute.Strategy) -> bool:
    """A MultiWorkerMirroredStrategy worker other than the chief also saves each checkpoint,
    into a scratch directory it then removes: TensorFlow's documented pattern, because a save
    may need every worker (reading an on-read variable is a collective). Horovod ranks hold
    plain variables, so only rank 0 saves, as in the legacy script."""
    return _multi_worker(strategy) and not is_chief(strategy)


def sync_restored_state(strategy: tf.distribute.Strategy, variables: list) -> None:
    """After the chief restored a checkpoint (or found none), every process takes the chief's
    values, so no process needs the chief's files. Every process must call it, in the same
    place: it is a collective (horovod's broadcast; an all-reduce under MultiWorkerMirrored)."""
    if isinstance(strategy, HorovodStrategy) and variables:
        strategy.broadcast(variables)
    elif _multi_worker(strategy) and variables:
        _broadcast_from_chief(strategy, variables)


def _broadcast_from_chief(strategy: tf.distribute.Strategy, variables: list) -> None:
    """Every worker's copy of `variables` set to the chief's: a sum over all replicas in which
    only global replica 0 (the chief's first device) contributes.

    Eager, one all-reduce per variable: in a tf.function the collective batches its inputs
    (concat and split, one dtype per batch), and SplitV has no int64 GPU kernel for the step
    and seed counters; eagerly each value goes alone. Float32 and int64 are types that NCCL,
    ring and CPU collectives all take. It runs once, before warm-up.
    """
    def contribution():
        ctx = tf.distribute.get_replica_context()
        first = tf.get_static_value(ctx.replica_id_in_sync_group) == 0
        return [ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                               tf.convert_to_tensor(v) if first else tf.zeros(v.shape, v.dtype))
                for v in variables]
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")   # not TF's warning that running eagerly is slow: this runs once
    try:
        reduced = strategy.run(contribution)
    finally:
        logger.setLevel(level)
    for var, value in zip(variables, reduced):
        # The same value on every local replica: assign the first local one to all copies.
        var.assign(strategy.experimental_local_results(value)[0])


def is_parameter_server(strategy: Optional[tf.distribute.Strategy]) -> bool:
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def coordinator(strategy: tf.distribute.Strategy):
    """The strategy's ClusterCoordinator (TF keeps one per strategy)."""
    return tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)


# id(ParameterServerStrategy) -> (bounded caller, number of workers), set by make_strategy.
_PS_CLUSTERS: dict[int, tuple[cluster_lib.BoundedCalls, int]] = {}


class ScheduledStep:
    """A step on a parameter-server cluster: one step scheduled per worker, then joined.

    Returns the mean of the workers' outputs, so one call is one round in which every worker
    trains one batch: the per-worker Step lines and the total (× workers) mean what they mean
    for the legacy script's synchronous workers.
    """

    def __init__(self, step_fn: Callable, strategy: tf.distribute.Strategy):
        self.step_fn = step_fn
        self.coordinator = coordinator(strategy)
        self.bounded, self.num_workers = _PS_CLUSTERS.get(id(strategy), (None, 1))

    def _round(self, inputs) -> np.ndarray:
        values = [self.coordinator.schedule(self.step_fn, args=(inputs,))
                  for _ in range(self.num_workers)]
        self.coordinator.join()
        return np.mean([np.asarray(v.fetch()) for v in values], axis=0)

    def __call__(self, inputs) -> tf.Tensor:
        out = self.bounded(self._round, inputs) if self.bounded else self._round(inputs)
        return tf.constant(out)


def distributed_failure(exc: BaseException, sp: StrategyPlan):
    """A DistributedError for a peer failure during a multi-host run, else None."""
    return cluster_lib.as_distributed_error(exc, sp.cluster)


def num_workers(p) -> int:
    """Processes whose images one step counts: cluster workers, or horovod's size."""
    if p.variable_update == "horovod":
        try:
            import horovod.tensorflow as hvd
        except ImportError:
            return 1   # make_strategy reports the missing horovod
        hvd.init()
        return hvd.size()
    plan = cluster_lib.cluster_plan(p)
    return plan.num_workers if plan is not None else 1


# --- all-reduce specs -----------------------------------------------------------------------

def _split_spec(spec: str) -> tuple[str, int]:
    """'nccl#2' -> ('nccl', 2): legacy `#N` splits gradients into N packs."""
    name, _, shards = spec.strip().partition("#")
    if shards and not shards.isdigit():
        raise UsageError("--all_reduce_spec=%s: the part after # must be a number of shards"
                         % spec)
    return name.strip().lower(), int(shards) if shards else 1


def cross_device_ops(spec: Optional[str], plan: DevicePlan, hierarchical: bool):
    """(CrossDeviceOps or None for TF's default, label of what runs, notices)."""
    notices: list[str] = []
    if hierarchical and not spec:
        return _hierarchical_copy(1, plan, notices)
    if not spec:
        return None, None, notices
    if "/" in spec or ":" in spec:
        raise UsageError("--all_reduce_spec=%s cannot be honoured under TF2: MirroredStrategy "
                         "applies one reduction to every gradient (no per-size or per-level "
                         "split); use nccl, hierarchical_copy, pscpu or psgpu" % spec)
    name, packs = _split_spec(spec)
    if hierarchical and name not in ("xring", "hierarchical_copy", "hierarchical"):
        raise UsageError("--hierarchical_copy conflicts with --all_reduce_spec=%s; give one"
                         % spec)
    if name == "nccl":
        if plan.kind != "gpu":
            raise UsageError("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); "
                             "on CPU use --all_reduce_spec=pscpu or hierarchical_copy")
        return tf.distribute.NcclAllReduce(num_packs=packs), "nccl", notices
    if name in ("xring", "hierarchical_copy", "hierarchical"):
        if name == "xring":
            notices.append("--all_reduce_spec=xring: TF2 has no ring all-reduce within one "
                           "host; using hierarchical copy (HierarchicalCopyAllReduce)")
        return _hierarchical_copy(packs, plan, notices)
    if name in ("pscpu", "psgpu"):
        if name == "psgpu" and plan.kind != "gpu":
            raise UsageError("--all_reduce_spec=psgpu needs GPUs; on CPU use pscpu")
        device = "/cpu:0" if name == "pscpu" else plan.names[0]
        if packs > 1:
            notices.append("--all_reduce_spec=%s: shards (#%d) have no TF2 equivalent for a "
                           "reduction to one device; reducing unsharded" % (spec, packs))
        return (tf.distribute.ReductionToOneDevice(reduce_to_device=device),
                "reduction_to_one_device(%s)" % device, notices)
    raise UsageError("--all_reduce_spec=%s cannot be honoured under TF2: use nccl, "
                     "hierarchical_copy (or xring), pscpu or psgpu" % spec)


def _hierarchical_copy(packs: int, plan: DevicePlan, notices: list[str]):
    """HierarchicalCopyAllReduce where it sums every device's value: an even device count.

    TensorFlow (cross_device_utils.aggregate_gradients_using_hierarchical_copy, 2.17 to 2.21)
    sums devices [0, n//2) and [n//2, 2*(n//2)), so with an odd n the last device's gradient
    is left out, silently. Any even n (6 too) is covered.
    """
    n = plan.num_devices
    if n > 1 and n % 2:
        device = plan.names[0]
        notices.append("HierarchicalCopyAllReduce sums two halves of the devices and would "
                       "leave %s (of %d) out: reducing to one device (%s) instead"
                       % (plan.names[-1], n, device))
        return (tf.distribute.ReductionToOneDevice(reduce_to_device=device),
                "reduction_to_one_device(%s)" % device, notices)
    return tf.distribute.HierarchicalCopyAllReduce(num_packs=packs), "hierarchical_copy", notices


def collective_implementation(spec: Optional[str], plan: DevicePlan):
    """(CommunicationImplementation, label) for MultiWorkerMirroredStrategy."""
    impl = tf.distribute.experimental.CommunicationImplementation
    if not spec:
        return impl.AUTO, "auto"
    name, _ = _split_spec(spec)
    if name in ("collective", "auto"):
        return impl.AUTO, "auto"
    if name in ("ring", "xring", "grpc"):
        return impl.RING, "ring"
    if name == "nccl":
        if plan.kind != "gpu":
            raise UsageError("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); "
                             "on CPU use --all_reduce_spec=ring or leave it unset")
        return impl.NCCL, "nccl"
    raise UsageError("--all_reduce_spec=%s cannot be honoured by MultiWorkerMirroredStrategy: "
                     "use collective (auto), ring or nccl" % spec)


# --- strategies -----------------------------------------------------------------------------

def make_strategy(p, plan: DevicePlan) -> StrategyPlan:
    """The strategy for --variable_update on this host (or this task of a cluster)."""
    cl = cluster_lib.cluster_plan(p)
    if p.variable_update == "horovod":
        if cl is not None:
            raise UsageError("--variable_update=horovod starts its processes with horovodrun "
                             "or mpirun, not --worker_hosts/--ps_hosts/TF_CONFIG")
        return _horovod(p, plan)
    if cl is not None:
        return _multi_host(p, plan, cl)
    return _single_host(p, plan)


def _single_host(p, plan: DevicePlan) -> StrategyPlan:
    vu = p.variable_update
    notices: list[str] = []
    if vu in MULTI_WORKER_VALUES:
        notices.append("--variable_update=%s without a cluster (--worker_hosts or TF_CONFIG): "
                       "running on this host alone as replicated (MirroredStrategy)" % vu)
        vu = "replicated"
    if vu == "parameter_server" and plan.num_devices > 1 and params_lib.xla_requested(p):
        # An XLA cluster reads only variables on its own device (tensorflow.org/xla/known_issues).
        notices.append("--xla: XLA cannot read variables held on another device, so each device "
                       "keeps its own copy (--variable_update=replicated instead of "
                       "parameter_server)")
        vu = "replicated"
    show = vu in ALL_REDUCE_VALUES
    if plan.num_devices == 1:
        # A legacy line for one GPU (say --all_reduce_spec=nccl, after the no-GPU fallback to
        # the CPU) has nothing to reduce: never an error.
        unused = [flag for flag, given in (("--all_reduce_spec", p.all_reduce_spec),
                                           ("--hierarchical_copy", p.hierarchical_copy)) if given]
        if unused:
            notices.append("One device: nothing to all-reduce (%s unused)" % " and ".join(unused))
        return StrategyPlan(tf.distribute.OneDeviceStrategy(plan.names[0]), vu,
                            p.all_reduce_spec, show, notices=tuple(notices),
                            reduction="none (one device)")
    ops, label, spec_notices = cross_device_ops(p.all_reduce_spec, plan, p.hierarchical_copy)
    if vu != "replicated" and (p.all_reduce_spec or p.hierarchical_copy):
        notices.append("--all_reduce_spec/--hierarchical_copy apply to "
                       "--variable_update=replicated; ignored with %s" % vu)
        ops, label, spec_notices = None, None, []
    notices.extend(spec_notices)
    if vu == "parameter_server":
        ps_device = "/cpu:0" if p.local_parameter_device.lower() == "cpu" else plan.names[0]
        strategy = tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=list(plan.names), parameter_device=ps_device)
        # TensorFlow sums the replicas' gradients on the host CPU whatever the parameter device
        # (parameter_server_strategy.py, 2.17 to 2.21: ReductionToOneDevice(_LOCAL_CPU)): every
        # GPU's gradients would cross PCIe twice a step. The legacy script sums them where the
        # variables live; so does this (the attribute is the one TF's own reduce calls use).
        strategy.extended._cross_device_ops = tf.distribute.ReductionToOneDevice(  # noqa: SLF001
            reduce_to_device=ps_device)
        return StrategyPlan(strategy, vu, None, False, notices=tuple(notices),
                            reduction="central storage on %s, gradients summed there"
                            % ps_device)
    if vu == "independent":
        return StrategyPlan(IndependentStrategy(plan.names), vu, None, False,
                            notices=tuple(notices), reduction="none (independent replicas)")
    strategy = tf.distribute.MirroredStrategy(list(plan.names), cross_device_ops=ops)
    return StrategyPlan(strategy, vu, p.all_reduce_spec if label is None else label, show,
                        notices=tuple(notices),
                        reduction=label or "MirroredStrategy default")


def _horovod(p, plan: DevicePlan) -> StrategyPlan:
    hvd = import_horovod()
    if plan.num_devices != 1:
        raise UsageError("--variable_update=horovod runs one device per process (start one "
                         "process per GPU with horovodrun); got --num_gpus=%d"
                         % plan.num_devices)
    strategy = HorovodStrategy(plan.names[0], hvd, p.horovod_device)
    return StrategyPlan(strategy, "horovod", None, False, num_workers=hvd.size(),
                        horovod_device=p.horovod_device or None,
                        reduction="horovod allreduce (average over %d processes)" % hvd.size())


def _multi_host(p, plan: DevicePlan, cl: cluster_lib.ClusterPlan) -> StrategyPlan:
    vu = p.variable_update
    explicit = p.is_explicit("variable_update")
    timeout = p.cluster_timeout_secs
    # The controller and ps tasks of a parameter-server cluster run no step: their devices
    # do not matter (the same command line on every task is fine).
    computes = not (cl.mode == cluster_lib.PARAMETER_SERVER and cl.task_type in ("chief", "ps"))
    if computes and plan.kind == "cpu" and plan.num_devices > 1:
        raise UsageError("a multi-host run uses one CPU device per task; --device=cpu "
                         "--num_gpus=%d splits the CPU only on a single host" % plan.num_devices)
    job_name = p.job_name or {"chief": "controller"}.get(cl.task_type, cl.task_type)
    if cl.mode == cluster_lib.PARAMETER_SERVER:
        if params_lib.xla_requested(p):
            raise UsageError("--xla cannot compile a step whose variables live on parameter "
                             "servers (XLA reads only variables on its own device): leave out "
                             "--ps_hosts (MultiWorkerMirroredStrategy) or --xla")
        if explicit and vu not in PS_VALUES:
            raise UsageError("--ps_hosts (or TF_CONFIG with ps) runs ParameterServerStrategy: "
                             "use --variable_update=parameter_server or distributed_replicated, "
                             "not %s" % vu)
        label = vu if vu in PS_VALUES else "parameter_server"
        if cl.task_type in ("ps", "worker"):
            line = ("Running parameter server %d" if cl.task_type == "ps"
                    else "Starting worker %d") % cl.task_index
            notices = ()
            if cl.task_type == "ps" and plan.kind == "gpu":
                notices = ("Parameter server: variables live on this task's CPU "
                           "(ParameterServerStrategy); its GPUs are left unused and free",)
            return StrategyPlan(None, label, None, False, num_workers=cl.num_workers,
                                notices=notices, job_name=job_name, start_lines=(line,),
                                cluster=cl,
                                serve=lambda: cluster_lib.serve(cl, timeout, p.server_protocol),
                                reduction="parameter servers")
        cluster_lib.rendezvous(cl, timeout, listen=False)
        try:
            strategy = cluster_lib.run_bounded(
                lambda: tf.distribute.experimental.ParameterServerStrategy(
                    cl.resolver(p.server_protocol)), cl, timeout,
                "connecting to the ps and workers")
        except ValueError as exc:
            # TF counts replicas from the workers' GPUs (one per GPU) and needs equal counts.
            if "Mismatched number of GPUs" not in str(exc):
                raise
            raise UsageError("parameter-server workers run different numbers of GPUs: give "
                             "every worker the same --num_gpus (or as many --gpu_indices); "
                             "ParameterServerStrategy runs one replica per worker GPU") from None
        cluster_lib.run_bounded(lambda: coordinator(strategy), cl, timeout,
                                "starting the coordinator")
        cluster_lib.restore_sigterm_handler()
        _PS_CLUSTERS[id(strategy)] = (cluster_lib.BoundedCalls(cl, timeout, "waiting for a step"),
                                      cl.num_workers)
        return StrategyPlan(strategy, label, None, False, num_workers=cl.num_workers,
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
    impl, impl_label = collective_implementation(p.all_reduce_spec, plan)
    # No timeout_seconds: it starts a thread per collective. A lost peer aborts the collectives
    # through the coordination service (see tfbench.cluster).
    options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
    resolver = cl.resolver(p.server_protocol,
                           num_gpus=plan.num_devices if plan.kind == "gpu" else 0)
    cluster_lib.rendezvous(cl, timeout)
    strategy = cluster_lib.run_bounded(
        lambda: tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=options),
        cl, timeout, "waiting for all workers to join")
    cluster_lib.restore_sigterm_handler()
    return StrategyPlan(strategy, vu, p.all_reduce_spec, vu in ALL_REDUCE_VALUES,
                        num_workers=cl.num_workers, notices=tuple(notices), job_name=job_name,
                        start_lines=("Starting worker %d" % cl.worker_rank,), cluster=cl,
                        reduction="collective all-reduce (%s) over %d workers"
                        % (impl_label, cl.num_workers))


# --- input pipelines ------------------------------------------------------------------------

def pipeline_shard(pipeline_id, num_pipelines: int, rank=0, size: int = 1) -> tuple:
    """(index, count) of input pipeline `pipeline_id` of `num_pipelines` in process `rank` of
    `size`: the part of the data it reads (every count-th example from index). Ints, or a
    tensor index on a parameter-server worker."""
    return rank * num_pipelines + pipeline_id, size * num_pipelines


def process_rank(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(rank, size) among processes that tf.distribute does not know of: horovod's."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.hvd.rank(), strategy.hvd.size()
    return 0, 1


def distribute_inputs(strategy: tf.distribute.Strategy, make: Callable[..., tf.data.Dataset]):
    """An iterator giving every replica its own batch; per worker on a parameter-server cluster.

    make(index, count) builds input pipeline `index` of `count` (see pipeline_shard), batched
    per replica: each replica takes whole batches from its worker's pipeline. A dataset handed
    to experimental_distribute_dataset would instead be taken as the global batch and split
    over every worker's replicas.
    """
    if is_parameter_server(strategy):
        _, num = _PS_CLUSTERS.get(id(strategy), (None, 1))

        def per_worker():
            def dataset_fn(context):
                # Each worker runs the traced function; its index is known only there.
                worker = tf.distribute.coordinator.experimental_get_current_worker_index()
                return make(*pipeline_shard(context.input_pipeline_id,
                                            context.num_input_pipelines, worker, num))
            return strategy.distribute_datasets_from_function(dataset_fn)
        return iter(coordinator(strategy).create_per_worker_dataset(per_worker))
    rank, size = process_rank(strategy)

    def dataset_fn(context):
        return make(*pipeline_shard(context.input_pipeline_id, context.num_input_pipelines,
                                    rank, size))
    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def process_shard(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(index, count) of this process's part of the data, read without tf.distribute
    (--data_only): the same part its replicas read through distribute_inputs."""
    rank, size = process_rank(strategy)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # One input pipeline per worker, numbered chief first (as TensorFlow numbers them).
        resolver = strategy.cluster_resolver
        jobs = resolver.cluster_spec().as_dict()
        chiefs = len(jobs.get("chief", ()))
        worker = resolver.task_id + (chiefs if resolver.task_type == "worker" else 0)
        return pipeline_shard(worker, chiefs + len(jobs.get("worker", ())), rank, size)
    return pipeline_shard(0, 1, rank, size)


def per_worker_synthetic(strategy: tf.distribute.Strategy, make: Callable):
    """Per-worker iterator repeating one per-replica batch of images made by make(context)."""
    def per_worker():
        def dataset_fn(context):
            return tf.data.Dataset.from_tensors(make(context)).repeat()
        return strategy.distribute_datasets_from_function(dataset_fn)
    return iter(coordinator(strategy).create_per_worker_dataset(per_worker))
