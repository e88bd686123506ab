"""How gradients travel between replicas under --variable_update=replicated.

The legacy script's batch all-reduce (batch_allreduce.py) casts fp16 runs' gradients to fp16
before the all-reduce and back after (--compact_gradient_transfer, on by default), and with
--gradient_repacking=N concatenates them into N packs. TensorFlow's own reductions all-reduce
the gradients as computed (float32 for mixed precision's float32 variables) and, by default, in
one pack of every gradient, which starts only when the whole backward pass is done.

PackedAllReduce wraps the strategy's reduction. For a batch all-reduce of dense floating
values (the gradients Keras all-reduces) it
  - orders the gradients as the backward pass makes them (the last layer's first),
  - cuts that order into packs: N packs of about equal bytes (--gradient_repacking=N, or the
    `#N` of --all_reduce_spec), else packs of PACK_BYTES,
  - hands the packs to the wrapped reduction so that its first all-reduce carries the last
    layers' pack (TensorFlow's collectives run one after another: see _groups),
  - on each device concatenates a pack's gradients and casts the pack to the transfer dtype
    (fp16 for fp16 runs; bf16 for bf16 runs whose all-reduce XLA compiles),
  - all-reduces each pack as one tensor with the wrapped reduction, so a pack's all-reduce can
    start once its gradients exist, while the backward pass computes the rest,
  - casts each pack back and splits it into the gradients.
Every other reduction (metrics, sparse values, integers) goes to the wrapped reduction as is.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, Optional

import tensorflow as tf
from tensorflow.python.distribute import collective_util
from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import distribute_utils
from tensorflow.python.distribute import values as tf_values
from tensorflow.python.util import nest
from tfbench.config.settings import Settings


# Packs of 25 MiB unless a pack count is given: PyTorch DistributedDataParallel's default
# bucket (bucket_cap_mb=25); ResNet-50's 98 MiB of float32 gradients make 4 packs, 49 MiB of
# fp16 ones 2, and a small model's gradients one.
PACK_BYTES = 25 * 2 ** 20


@dataclasses.dataclass(frozen=True)
class Transfer:
    """What a gradient all-reduce sends: in which dtype, in how many packs."""
    dtype: Optional[str] = None     # "float16" / "bfloat16": floating gradients travel so
    num_packs: int = 0              # > 0: this many packs of about equal bytes
    pack_bytes: int = PACK_BYTES    # num_packs == 0: a pack closes once it holds this many
    #                                 (0: each gradient is a pack of its own)

    def label(self) -> str:
        if self.num_packs:
            packs = "%d packs" % self.num_packs
        elif self.pack_bytes:
            packs = "packs of %d MiB" % (self.pack_bytes // 2 ** 20)
        else:
            packs = "each gradient alone"
        return "%s, %s" % (self.dtype or "as computed", packs)


def transfer_for(p: Settings, spec_packs: int, compiled: bool, device_kind: str) -> Transfer:
    """The transfer for the Settings: --compact_gradient_transfer (fp16 runs; bf16 runs only where
    XLA compiles the all-reduce: TensorFlow's own NCCL all-reduce takes half, float, double,
    int32 and int64, not bfloat16 (nccl_manager.cc kValidDataTypes), XLA's takes bf16 too),
    then --gradient_repacking, else the `#N` of --all_reduce_spec, else packs of PACK_BYTES on
    GPUs and, on CPU devices, each gradient alone, as the legacy script sends them (a pack is
    a concatenation and a split: on CPU devices only copies, no latency to hide)."""
    precision = p.asks.precision
    dtype = None
    if p.devices.compact_gradient_transfer and (precision == "fp16"
                                        or (precision == "bf16" and compiled)):
        dtype = {"fp16": "float16", "bf16": "bfloat16"}[precision]
    return Transfer(dtype=dtype, num_packs=p.devices.gradient_repacking or spec_packs,
                    pack_bytes=PACK_BYTES if device_kind == "gpu" else 0)


def split_into_packs(sizes: list[int], transfer: Transfer) -> list[list[int]]:
    """The indices of each pack, packs in the order the backward pass fills them.

    `sizes` are the gradients' bytes as sent, in variable order; the backward pass makes the
    last variable's gradient first, so packs take the gradients from last to first, each pack a
    run of neighbours.
    """
    order = list(range(len(sizes)))[::-1]
    if not order:
        return []
    packs: list[list[int]] = [[]]
    if transfer.num_packs > 0:
        total = sum(sizes)
        done = 0
        for i in order:
            # Close the pack once it reaches its share of the total (the last takes the rest).
            if packs[-1] and len(packs) < transfer.num_packs and \
                    done >= total * len(packs) / transfer.num_packs:
                packs.append([])
            packs[-1].append(i)
            done += sizes[i]
        return packs
    held = 0
    for i in order:
        if packs[-1] and held >= transfer.pack_bytes:
            packs.append([])
            held = 0
        packs[-1].append(i)
        held += sizes[i]
    return packs


def _wire_dtype(dtype: tf.DType, transfer: Transfer) -> tf.DType:
    """float32 gradients travel in the transfer dtype; others (already 16-bit) as they are."""
    if transfer.dtype and dtype.is_floating and dtype.size > tf.as_dtype(transfer.dtype).size:
        return tf.as_dtype(transfer.dtype)
    return dtype


def _groups(tensors: list, transfer: Transfer) -> list[list[int]]:
    """Packs of indices into `tensors` (one device's gradients), each of one dtype, in the
    order the wrapped reduction takes them: variable order, the first layers' pack first.

    That is the order of Keras' gradient list, which TensorFlow's reductions expect:
    CollectiveAllReduce reverses the list it is given and launches one collective per pack in
    that reversed order, each after the one before (cross_device_ops.CollectiveAllReduce.
    _all_reduce, the ordering token of cross_device_utils.CollectiveReplicaLauncher, TF 2.17 to
    2.21). So the first collective carries the last layers' pack, whose gradients the backward
    pass makes first. The other reductions launch no chain: for them the order is immaterial.
    """
    by_dtype: dict[tf.DType, list[int]] = {}
    for i, t in enumerate(tensors):
        by_dtype.setdefault(t.dtype, []).append(i)
    out = []
    for dtype, indices in by_dtype.items():
        wire = _wire_dtype(dtype, transfer)
        sizes = [tensors[i].shape.num_elements() * wire.size for i in indices]
        out += [[indices[k] for k in pack] for pack in split_into_packs(sizes, transfer)]
    return sorted(out, key=min)


def _pack(tensors: list, pack: list[int], transfer: Transfer):
    """One device's pack: its gradients flattened, concatenated and cast, as one tensor."""
    flat = [tf.reshape(tensors[i], [-1]) for i in pack]
    joined = flat[0] if len(flat) == 1 else tf.concat(flat, axis=0)
    return tf.cast(joined, _wire_dtype(joined.dtype, transfer))


def _unpack(reduced, tensors: list, pack: list[int]) -> list:
    """One device's reduced pack back into its gradients (dtype and shapes of `tensors`)."""
    value = tf.cast(reduced, tensors[pack[0]].dtype)
    sizes = [tensors[i].shape.num_elements() for i in pack]
    parts = [value] if len(pack) == 1 else tf.split(value, sizes)
    return [tf.reshape(part, tensors[i].shape) for part, i in zip(parts, pack)]


def _packable(tensors: list) -> bool:
    return bool(tensors) and all(
        isinstance(t, tf.Tensor) and t.dtype.is_floating and t.shape.is_fully_defined()
        for t in tensors)


# One pack, one collective: CollectiveAllReduce would otherwise group our packs into its own
# (cross_device_utils.group_by_size starts a new group after any pack above 1 byte).
_ONE_PER_PACK = collective_util.Options(bytes_per_pack=1)


class PackedAllReduce(tf.distribute.CrossDeviceOps):
    """A strategy's reduction whose gradient all-reduces travel in packs (see the module)."""

    def __init__(self, inner: tf.distribute.CrossDeviceOps, transfer: Transfer):
        super().__init__()
        self.inner = inner
        self.transfer = transfer
        self._canonicalize_devices = getattr(inner, "_canonicalize_devices", True)
        self.held_back = 0   # > 0 inside as_computed(): every reduction goes to `inner` as is

    @property
    def _num_between_graph_workers(self):
        return self.inner._num_between_graph_workers  # noqa: SLF001

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        return self.inner.reduce_implementation(reduce_op, per_replica_value, destinations,
                                                options)

    def broadcast_implementation(self, tensor, destinations):
        return self.inner.broadcast_implementation(tensor, destinations)

    def _gather_implementation(self, per_replica_value, destinations, axis, options):
        return self.inner._gather_implementation(  # noqa: SLF001
            per_replica_value, destinations, axis, options)

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        """A batch all-reduce in packs (merge calls: the step outside XLA)."""
        values = [v for v, _ in value_destination_pairs]
        if self.held_back:
            return self.inner.batch_reduce_implementation(reduce_op, value_destination_pairs,
                                                          options)
        # An all-reduce: every value goes back to its own devices (CollectiveAllReduce's test).
        # CrossDeviceOps.batch_reduce has made one device's tensor (a worker of one GPU under
        # MultiWorkerMirroredStrategy) a PerReplica whose destination is its device's name.
        all_reduce = cross_device_ops_lib._all_devices_match(  # noqa: SLF001
            value_destination_pairs, self._canonicalize_devices)
        if not all_reduce or not all(isinstance(v, tf_values.PerReplica) for v in values):
            return self.inner.batch_reduce_implementation(reduce_op, value_destination_pairs,
                                                          options)
        per_device = list(zip(*[v.values for v in values]))   # device -> its gradients
        if not all(_packable(list(tensors)) for tensors in per_device):
            return self.inner.batch_reduce_implementation(reduce_op, value_destination_pairs,
                                                          options)
        packs = _groups(list(per_device[0]), self.transfer)
        packed = []
        for pack in packs:
            components = []
            for tensors in per_device:
                with tf.device(tensors[pack[0]].device):
                    components.append(_pack(list(tensors), pack, self.transfer))
            packed.append(tf_values.PerReplica(components))
        reduced = self.inner.batch_reduce(reduce_op, [(p, p) for p in packed],
                                          options.merge(_ONE_PER_PACK))
        out: list[list] = [[None] * len(per_device) for _ in values]
        for pack, result in zip(packs, reduced):
            components = result.values if isinstance(result, tf_values.DistributedValues) \
                else (result,)   # one device's, unwrapped
            for d, (tensors, component) in enumerate(zip(per_device, components)):
                with tf.device(component.device):
                    for i, part in zip(pack, _unpack(component, list(tensors), pack)):
                        out[i][d] = part
        # As CollectiveAllReduce returns them: one device's value unwrapped.
        return [distribute_utils.regroup(tuple(parts), wrap_class=tf_values.Mirrored)
                for parts in out]

    def _all_reduce(self, reduce_op, value, replica_id, options):
        """One replica's all-reduce in packs (no merge calls: each replica's step compiled by
        XLA on GPUs, where MirroredStrategy calls its collective reduction per replica)."""
        flat = nest.flatten(value)
        if self.held_back or not _packable(flat):
            return self.inner._all_reduce(reduce_op, value, replica_id, options)  # noqa: SLF001
        packs = _groups(flat, self.transfer)
        packed = [_pack(flat, pack, self.transfer) for pack in packs]
        reduced = self.inner._all_reduce(  # noqa: SLF001
            reduce_op, packed, replica_id, options.merge(_ONE_PER_PACK))
        out = [None] * len(flat)
        for pack, result in zip(packs, reduced):
            for i, part in zip(pack, _unpack(result, flat, pack)):
                out[i] = part
        return nest.pack_sequence_as(value, out)


@contextlib.contextmanager
def as_computed(strategy: tf.distribute.Strategy) -> Iterator[None]:
    """Inside, the strategy's reductions go as they are, neither packed nor cast: for values
    that are not gradients and that every replica must get exactly, such as a checkpoint's
    state broadcast from the chief (sync.sync_restored_state) and the all-reduce probe's
    flags. In fp16 a restored dynamic loss scale of 65536 would arrive as inf and an Adam
    second moment of 1e-9 as 0; TensorFlow's NCCL all-reduce outside XLA refuses bfloat16
    (nccl_manager.cc kValidDataTypes). Merge calls run the reduction in the caller's thread
    while the replicas wait, so the mark is the reduction's, not a thread's."""
    wrapped = [ops for ops in (getattr(strategy.extended, name, None)
                               for name in ("_collective_ops", "_cross_device_ops"))
               if isinstance(ops, PackedAllReduce)]
    for ops in wrapped:
        ops.held_back += 1
    try:
        yield
    finally:
        for ops in wrapped:
            ops.held_back -= 1


def install(strategy: tf.distribute.Strategy, transfer: Transfer,
            compiled_replicas: bool) -> None:
    """Gradients of `strategy`'s replicas travel as `transfer` says.

    MirroredStrategy (TF 2.17 to 2.21) reduces with `extended._cross_device_ops` through merge
    calls, and with `extended._collective_ops` (a CollectiveAllReduce) when each replica's step
    is compiled by XLA on GPUs (compiled_replicas); there it warns when the other one is not a
    CollectiveAllReduce, so only the reduction that runs is wrapped.

    MultiWorkerMirroredStrategy reduces the compute devices' values with
    `extended._cross_device_ops` on both paths (CollectiveAllReduceExtended._get_cross_device_ops
    for merge calls, _replica_ctx_all_reduce inside XLA; TF 2.17 to 2.21). Its own packing,
    CommunicationOptions.bytes_per_pack, would not do: the XLA path hands CollectiveAllReduce
    the caller's options, not the strategy's, so bytes_per_pack 0 there puts every gradient in
    one collective (cross_device_utils.group_by_size), and the transfer dtype has no option.
    """
    extended = strategy.extended
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        extended._cross_device_ops = PackedAllReduce(extended._cross_device_ops,  # noqa: SLF001
                                                     transfer)
    elif compiled_replicas:
        extended._collective_ops = PackedAllReduce(extended._collective_ops,  # noqa: SLF001
                                                   transfer)
    else:
        extended._cross_device_ops = PackedAllReduce(extended._cross_device_ops,  # noqa: SLF001
                                                     transfer)
