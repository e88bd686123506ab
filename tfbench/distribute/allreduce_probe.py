"""The all-reduce probe: a run's gradient reduction timed alone (`tfbench allreduce`, and the
all-reduce part of --explain_scaling).

It reduces tensors of given shapes and dtypes across the strategy's replicas exactly as a
training step does, with the step's own reduction in replica context (sync.reduce_gradients:
ReplicaContext.all_reduce(SUM, tensors), horovod's allreduce, or the sums at the variables of a
parameter server). So the strategy the run builds (tfbench.distribute.strategy.make_strategy)
reduces them with the reduction and the packing it installs (packing.py: the transfer dtype, the
packs), each replica's step compiled by XLA where the run's is.

Figures, as NCCL's tests define them (https://github.com/NVIDIA/nccl-tests/blob/master/doc/
PERFORMANCE.md): time is one all-reduce of the whole set. As all_reduce_perf launches its
iterations back to back and synchronises once, each call of the probe's step runs PER_SYNC
all-reduces one after another (each of the one before's results, as all_reduce_perf's run in
place) and waits for the host once: time = the call's time / PER_SYNC, the median over `repeats` calls
after `warmup` untimed ones. So the host's part of a call (matching its arguments, dispatching
to every device, the sync: about 0.8 ms on 8 devices) is spread over PER_SYNC all-reduces
instead of added to each. algbw = S / time, S the bytes each rank all-reduces (as sent: fp16
gradients count 2 bytes); busbw = algbw x 2(n - 1) / n, n the ranks (replicas of every
worker, or horovod's processes: the whole cluster's, not one host's), the figure to compare
with a link's bandwidth whatever n is. GB = 10^9 bytes.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

from tfbench.distribute import packing, sync
from tfbench.distribute.strategies import (HorovodStrategy, IndependentStrategy,
                                           is_parameter_server)
from tfbench.measure import stats

# All-reduces per timed call, back to back before one host sync: nccl-tests' -n 20 timed
# iterations after -w 5 warm-up ones are 2 timed calls and a half here; REPEATS calls give a
# spread as well (50 all-reduces, after 10 warm-up ones).
PER_SYNC = 10
REPEATS, WARMUP = 5, 1
GB = 1e9


@dataclasses.dataclass(frozen=True)
class TensorSet:
    """What one all-reduce reduces: the shapes and dtypes of its tensors."""
    label: str                               # "trivial gradients", "1 MiB"
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.shapes)

    @property
    def nbytes(self) -> int:
        """Bytes as computed (before any transfer dtype)."""
        return sum(_elements(s) * tf.as_dtype(d).size for s, d in zip(self.shapes, self.dtypes))


def _elements(shape: Sequence[int]) -> int:
    n = 1
    for dim in shape:
        n *= int(dim)
    return n


def gradient_set(label: str, variables: Sequence) -> TensorSet:
    """The gradients of `variables` (a model's trainable variables): one per variable, of its
    shape and dtype, as tape.gradient makes them."""
    return TensorSet(label, tuple(tuple(int(d) for d in v.shape) for v in variables),
                     tuple(tf.as_dtype(v.dtype).name for v in variables))


def size_sets(min_bytes: int, max_bytes: int, factor: int = 2,
              dtype: str = "float32") -> list[TensorSet]:
    """One tensor per size from min_bytes to max_bytes, times `factor` each (all_reduce_perf's
    -b, -e, -f), of `dtype` (the run's gradient dtype)."""
    if min_bytes < 1 or max_bytes < min_bytes or factor < 2:
        raise ValueError("sizes: need 1 <= min_bytes <= max_bytes and factor >= 2")
    size = tf.as_dtype(dtype).size
    out, nbytes = [], min_bytes
    while nbytes <= max_bytes:
        count = max(1, nbytes // size)
        out.append(TensorSet(human_bytes(count * size), ((count,),), (dtype,)))
        nbytes *= factor
    return out


def human_bytes(nbytes: float) -> str:
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return ("%.0f %s" if nbytes % scale == 0 else "%.1f %s") % (nbytes / scale, unit)
    return "%d B" % nbytes


def transfer(strategy: tf.distribute.Strategy) -> Optional[packing.Transfer]:
    """The packing the run installed (packing.install), None where gradients go as computed."""
    extended = strategy.extended
    for name in ("_collective_ops", "_cross_device_ops"):
        ops = getattr(extended, name, None)
        if isinstance(ops, packing.PackedAllReduce):
            return ops.transfer
    return None


def sent_bytes(tensors: TensorSet, strategy: tf.distribute.Strategy) -> int:
    """Bytes each rank all-reduces: float32 gradients in the transfer dtype when the run sends
    them so (fp16 runs with --compact_gradient_transfer)."""
    how = transfer(strategy)
    total = 0
    for shape, dtype in zip(tensors.shapes, tensors.dtypes):
        wire = tf.as_dtype(dtype)
        if how is not None:
            wire = packing._wire_dtype(wire, how)  # noqa: SLF001
        total += _elements(shape) * wire.size
    return total


def ranks(strategy: tf.distribute.Strategy) -> int:
    """The n of busbw: the replicas of every worker, or horovod's processes."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.hvd.size()
    return strategy.num_replicas_in_sync


def at_variables(strategy: tf.distribute.Strategy) -> bool:
    """Whether gradients are summed on each variable's device instead of all-reduced
    (--variable_update=parameter_server on one host: SpreadStorageStrategy, or
    CentralStorageStrategy with --local_parameter_device=cpu)."""
    return isinstance(strategy, tf.distribute.experimental.CentralStorageStrategy)


# Bytes each replica holds while one tensor is all-reduced, in copies of it: the tensor, the
# result of the all-reduce before (this one's input), its transfer copy (a cast, a pack) and
# this one's result.
HELD_COPIES = 4


def held_copies(strategy: tf.distribute.Strategy) -> int:
    """Copies of a tensor the busiest device holds while the strategy all-reduces it:
    HELD_COPIES, and one per local replica more where the reduction gathers every replica's
    copy on one device (ReductionToOneDevice: --all_reduce_spec=pscpu/psgpu; hierarchical
    copy)."""
    ops = getattr(strategy.extended, "_cross_device_ops", None)
    ops = getattr(ops, "inner", ops)     # packing.PackedAllReduce's wrapped reduction
    gathers = (tf.distribute.ReductionToOneDevice, tf.distribute.HierarchicalCopyAllReduce)
    if isinstance(ops, gathers):
        return HELD_COPIES + len(strategy.extended.worker_devices)
    return HELD_COPIES


def agreed(strategy: tf.distribute.Strategy,
           answers: Callable[[int], Sequence[bool]]) -> list[bool]:
    """Each answer true on every rank (the replica of global id r answers `answers(r)`), found
    with the run's own reduction of 0/1 flags, so every worker of a cluster skips the same
    sizes: a size skipped by one worker would leave the others waiting in its collective.
    Every worker must call it (it is a collective)."""
    count = len(answers(0))
    if not count:
        return []
    local = strategy.extended.worker_devices

    def make(context):
        replica = context.replica_id_in_sync_group
        with tf.device(local[replica % len(local)]):
            flags = [1.0 if yes else 0.0 for yes in answers(replica)]
            return [tf.constant(flags, tf.float32), tf.ones([count], tf.float32)]

    def replica(values):
        return sync.reduce_gradients(strategy, [tf.identity(v) for v in values])

    # The flags as they are: packed in the run's transfer dtype, bfloat16 would reach
    # TensorFlow's NCCL outside XLA (which refuses it) and counts over 256 ranks would round.
    with packing.as_computed(strategy):
        out = tf.function(lambda values: strategy.run(replica, args=(values,)), autograph=False)(
            strategy.experimental_distribute_values_from_function(make))
    # A sum (or horovod's average) of the flags equals that of ones where every rank says yes.
    flags, everyone = (strategy.experimental_local_results(x)[0].numpy() for x in out)
    return [bool(f == e) for f, e in zip(flags, everyone)]


def not_probed(strategy: Optional[tf.distribute.Strategy]) -> Optional[str]:
    """Why this strategy's gradients exchange nothing this probe can time, or None."""
    if strategy is None or is_parameter_server(strategy):
        return ("parameter-server tasks sum the gradients, on other hosts (this controller "
                "runs no step)")
    if isinstance(strategy, IndependentStrategy):
        return "independent replicas exchange no gradients"
    if ranks(strategy) < 2:
        return "one device: nothing to all-reduce"
    return None


@dataclasses.dataclass(frozen=True)
class Timing:
    """One tensor set's all-reduce, timed (see the module for the figures)."""
    label: str
    count: int                 # tensors
    nbytes: int                # bytes each rank all-reduces, as sent
    dtype: str                 # the dtype(s) as sent
    ranks: int
    times: tuple[float, ...]   # seconds per all-reduce: each timed call's / per_sync
    summary: dict = dataclasses.field(default_factory=dict)   # stats.probe_summary
    at_variables: bool = False   # summed at the variables' devices, not all-reduced
    per_sync: int = 1          # all-reduces in each timed call

    @property
    def time_ms(self) -> float:
        return self.summary["median_ms"]

    @property
    def algbw_gbs(self) -> Optional[float]:
        """None for sums at the variables: NCCL's definitions are an all-reduce's."""
        if self.at_variables:
            return None
        return self.nbytes / (self.time_ms / 1000.0) / GB

    @property
    def busbw_gbs(self) -> Optional[float]:
        algbw = self.algbw_gbs
        return None if algbw is None else algbw * bus_factor(self.ranks)


def bus_factor(n: int) -> float:
    """2(n - 1) / n: how much of a ring all-reduce's data crosses each rank's link."""
    return 2.0 * (n - 1) / n


def _values(strategy: tf.distribute.Strategy, tensors: TensorSet, fill: float = 0.0):
    """Every replica's tensors, made on its own device once (not timed). Zeros: their sums
    stay zeros however many all-reduces take each one's results (fill is for tests)."""
    local = strategy.extended.worker_devices

    def make(context):
        # Unplaced, every replica's values would be made on the first device.
        with tf.device(local[context.replica_id_in_sync_group % len(local)]):
            return [tf.fill(shape, tf.constant(fill, dtype))
                    for shape, dtype in zip(tensors.shapes, tensors.dtypes)]
    return strategy.experimental_distribute_values_from_function(make)


def _first(x) -> tf.Tensor:
    return tf.cast(tf.reshape(x, [-1])[0], tf.float32)


def _back_to_back(exchange: Callable[[list], list], values: list, per_sync: int) -> list:
    """`per_sync` exchanges one after another, each of the one before's results (one
    replica's), as all_reduce_perf's iterations run in place: a data chain, with nothing
    computed between them. (A chain of control edges would not hold: grappler's dependency
    optimizer makes a stateless op whose outputs only control edges take a NoOp, and the sums
    of TensorFlow's own reductions on CPU devices are stateless.)"""
    for _ in range(per_sync):
        values = exchange(values)
    return values


def _calls(strategy: tf.distribute.Strategy, replica: Callable) -> Callable:
    """The timed call: every replica's `replica`, and one scalar per worker from them."""
    def step(values):
        out = strategy.run(replica, args=(values,))
        return tf.add_n([tf.identity(x) for x in strategy.experimental_local_results(out)])
    return tf.function(step, autograph=False)


def _at_variables_step(strategy: tf.distribute.Strategy, variables: Sequence,
                       per_sync: int = PER_SYNC) -> Callable:
    """`per_sync` exchanges of a parameter-server step on one host, back to back: each
    gradient summed on its variable's device (sync.reduce_gradients, the step's own), then each
    sum copied to every replica, the bytes its next forward pass reads of the variable."""
    # Keras variables wrap TensorFlow's; destinations are TensorFlow's (as Keras' update passes).
    variables = [getattr(v, "value", v) for v in variables]

    def exchange(values):
        summed = sync.reduce_gradients(strategy, list(values), variables)
        return [tf.identity(x) for x in summed]    # on the replica's device

    def replica(values):
        values = [tf.identity(v) for v in values]
        return tf.add_n([_first(x) for x in _back_to_back(exchange, values, per_sync)])
    return _calls(strategy, replica)


def _step(strategy: tf.distribute.Strategy, compiled: bool,
          per_sync: int = PER_SYNC) -> Callable:
    """A call that all-reduces the given per-replica tensors, then its results, `per_sync`
    times in all, back to back, and returns one scalar per worker (a slice of the last
    results). Where the run compiles each replica's step with XLA, each all-reduce is one
    compiled call, as a step's is."""
    def all_reduce(values):
        return sync.reduce_gradients(strategy, values)
    if compiled:   # each replica's all-reduce compiled by XLA, as the run's step (steps.py)
        all_reduce = tf.function(all_reduce, jit_compile=True, autograph=False)

    def replica(values):
        # As gradients are: tensors of the replica's device in the step (a function input has
        # no device, and MultiWorkerMirroredStrategy takes a value's device as its destination).
        values = [tf.identity(v) for v in values]
        return tf.add_n([_first(r) for r in _back_to_back(all_reduce, values, per_sync)])
    return _calls(strategy, replica)


def time_all_reduce(strategy: tf.distribute.Strategy, tensors: TensorSet,
                    repeats: int = REPEATS, warmup: int = WARMUP, compiled: bool = False,
                    clock: Callable[[], float] = time.perf_counter,
                    variables: Optional[Sequence] = None, per_sync: int = PER_SYNC) -> Timing:
    """The gradient exchange of `tensors` timed in `repeats` calls after `warmup` untimed ones,
    each call `per_sync` exchanges back to back and one host sync: an all-reduce, or where the
    strategy sums gradients at the variables (at_variables) the sums and reads of `variables`,
    whose shapes `tensors` are. Every worker of a cluster must call it with the same arguments
    (it is a collective)."""
    if per_sync < 1:
        raise ValueError("per_sync: need at least one exchange per call")
    values = _values(strategy, tensors)
    if at_variables(strategy):
        if variables is None:
            raise ValueError("a parameter-server exchange needs the variables it sums at")
        step = _at_variables_step(strategy, variables, per_sync)
    else:
        step = _step(strategy, compiled, per_sync)
    # At least one untimed call: the first traces and compiles.
    calls = stats.timed_calls(lambda: step(values).numpy(), repeats, max(warmup, 1), clock)
    times = [t / per_sync for t in calls]
    how = transfer(strategy)
    dtypes = sorted(set(tensors.dtypes))
    if how is not None:
        dtypes = sorted({packing._wire_dtype(tf.as_dtype(d), how).name  # noqa: SLF001
                         for d in tensors.dtypes})
    return Timing(tensors.label, tensors.count, sent_bytes(tensors, strategy), "+".join(dtypes),
                  ranks(strategy), tuple(times), stats.probe_summary(times),
                  at_variables(strategy), per_sync)
