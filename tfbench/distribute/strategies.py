"""tfbench's own strategies beside TensorFlow's: independent replicas (no gradient exchange),
horovod (one device per process), and the parameter-server step that schedules one batch on every
worker per call; and the legacy script's default gradient all-reduce on CPU devices.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tfbench.distribute import peers
from tfbench.errors import UsageError


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


class SumsInTurn(tf.distribute.CrossDeviceOps):
    """The legacy script's default batch all-reduce of --variable_update=replicated
    (batch_allreduce.CopyToDeviceAlgorithm, no --all_reduce_spec): each gradient summed on one
    of `devices`, the next gradient on the next device, and every replica reading its sum from
    there. On CPU devices, which share the host's memory, that is one pass over each gradient;
    TensorFlow's default there, a ring of collectives over packs concatenated and split again,
    copied each gradient several times (trivial on 2 logical devices: 2,300 against the legacy
    script's 3,400 images/sec)."""

    def __init__(self, devices):
        super().__init__()
        self._to = [tf.distribute.ReductionToOneDevice(reduce_to_device=d) for d in devices]

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        return self._to[0].reduce_implementation(reduce_op, per_replica_value, destinations,
                                                 options)

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        return [self._to[i % len(self._to)].reduce_implementation(reduce_op, value, dest,
                                                                   options)
                for i, (value, dest) in enumerate(value_destination_pairs)]

    def broadcast_implementation(self, tensor, destinations):
        return self._to[0].broadcast_implementation(tensor, destinations)


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


def gpu_devices(devices) -> bool:
    """Whether every device is a GPU, by TensorFlow's own test (mirrored_run._is_gpu_device,
    TF 2.17 to 2.21), the one that decides how it runs an XLA-compiled replica step."""
    try:
        from tensorflow.python.distribute import mirrored_run
        test = mirrored_run._is_gpu_device  # noqa: SLF001
    except (ImportError, AttributeError):   # a TensorFlow that moved it
        def test(device):
            return tf.DeviceSpec.from_string(device).device_type == "GPU"
    return bool(devices) and all(test(d) for d in devices)


def replica_step_compilation(strategy: Optional[tf.distribute.Strategy], *, xla: bool
                             ) -> tuple[bool, Optional[str]]:
    """(whether --xla compiles each replica's whole step: forward, backward, all-reduce and
    update; why not). The one answer that the strategy's words (its reduction, a notice), the
    step (tfbench.engine.steps) and the all-reduce probes act on.

    Given a jit-compiled function, MirroredStrategy and MultiWorkerMirroredStrategy call it once
    per replica in pure replica context, all-reducing with collectives inside the compiled
    function, only when every device is a GPU (mirrored_run.call_for_each_replica,
    MirroredExtended._use_merge_call and CollectiveAllReduceExtended._use_merge_call, TF 2.17
    to 2.21), and XLA compiles only some collectives (xla_takes_its_collectives). On other
    devices TensorFlow compiles one function over all replicas, which XLA refuses (it reads
    variables on its own device only). Independent replicas are excluded: inside XLA
    TensorFlow all-reduces with its own collectives and would mix their gradients. Dynamic loss
    scaling does not matter: the step all-reduces before the finite check
    (tfbench.distribute.sync.reduce_gradients), so the check's cond holds the update alone.

    Why not is None when it compiles, when XLA was not asked for, and where no replica step is
    compiled whatever the collectives (one replica, a device that is not a GPU, independent
    replicas, horovod, a parameter server); else it names the collectives XLA does not take
    (XLA then compiles each replica's forward and backward passes only).
    """
    if not xla or not _replicated_on_gpus(strategy):
        return False, None
    if xla_takes_its_collectives(strategy):
        return True, None
    options = getattr(strategy.extended, "_communication_options", None)
    impl = options.implementation.value if options is not None else "cross-device"
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # Its collectives are those --all_reduce_spec names (strategy.collective_implementation).
        return False, ("XLA does not compile the %s collectives --all_reduce_spec asks for "
                       "(nccl and collective it does)" % impl)
    return False, ("XLA does not compile the %s collectives TensorFlow chose for these devices"
                   % impl)


def _replicated_on_gpus(strategy: Optional[tf.distribute.Strategy]) -> bool:
    """A (multi-worker) mirrored strategy of several replicas, every device a GPU."""
    if strategy is None or isinstance(strategy, (IndependentStrategy, HorovodStrategy)):
        return False
    if not isinstance(strategy, (tf.distribute.MirroredStrategy,
                                 tf.distribute.MultiWorkerMirroredStrategy)):
        return False
    return strategy.num_replicas_in_sync > 1 and gpu_devices(strategy.extended.worker_devices)


def xla_takes_its_collectives(strategy: tf.distribute.Strategy) -> bool:
    """Whether XLA compiles the strategy's collectives: NCCL or AUTO only
    (CollectiveReduceV2Op::Compile, tf2xla all_reduce_op.cc, 2.17 to 2.21). RING is what
    --all_reduce_spec=ring/xring/grpc asks of MultiWorkerMirroredStrategy, and what
    MirroredStrategy takes on virtual GPUs; physical GPUs get NCCL."""
    options = getattr(strategy.extended, "_communication_options", None)
    impl = tf.distribute.experimental.CommunicationImplementation
    return options is not None and options.implementation in (impl.NCCL, impl.AUTO)


def is_parameter_server(strategy: Optional[tf.distribute.Strategy]) -> bool:
    """Whether `strategy` is a ParameterServerStrategy: for code handed a strategy and no plan
    (how its steps and values are driven). A run's own question, "is this a parameter-server
    run?", is its plan's (engine.resolved: Resolved.parameter_server)."""
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def coordinator(strategy: tf.distribute.Strategy):
    """The strategy's ClusterCoordinator (TF keeps one per strategy)."""
    return tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)


# id(ParameterServerStrategy) -> (bounded caller, number of workers), set by make_strategy.
_PS_CLUSTERS: dict[int, tuple[peers.BoundedCalls, int]] = {}


def remember_cluster(strategy: tf.distribute.Strategy, bounded: peers.BoundedCalls,
                     num_workers: int) -> None:
    """What a parameter-server strategy's steps need: the bounded caller and the workers."""
    _PS_CLUSTERS[id(strategy)] = (bounded, num_workers)


def cluster_of(strategy: tf.distribute.Strategy) -> tuple[Optional[peers.BoundedCalls], int]:
    """(bounded caller or None, number of workers) remembered for `strategy`."""
    return _PS_CLUSTERS.get(id(strategy), (None, 1))


class ScheduledStep:
    """A step on a parameter-server cluster: one step scheduled per worker, then joined.

    Returns the mean of the workers' outputs, so one call is one round in which every worker
    trains one batch: the per-worker Step lines and the total (× workers) mean what they mean
    for the legacy script's synchronous workers.
    """

    def __init__(self, step_fn: Callable, strategy: tf.distribute.Strategy):
        self.step_fn = step_fn
        self.coordinator = coordinator(strategy)
        self.bounded, self.num_workers = cluster_of(strategy)

    def _round(self, inputs) -> np.ndarray:
        values = [self.coordinator.schedule(self.step_fn, args=(inputs,))
                  for _ in range(self.num_workers)]
        self.coordinator.join()
        return np.mean([np.asarray(v.fetch()) for v in values], axis=0)

    def __call__(self, inputs) -> tf.Tensor:
        out = self.bounded(self._round, inputs) if self.bounded else self._round(inputs)
        return tf.constant(out)
