"""Gradient packs through TensorFlow's collectives on 2 logical CPU devices, run in a fresh
process by test_packing.py.

Six gradients of distinct sizes (variable order, first layer first) are all-reduced in 3 packs
by packing.PackedAllReduce wrapped around a CollectiveAllReduce: MirroredStrategy's (RING on
CPUs), MultiWorkerMirroredStrategy's (one worker), and the per-replica all-reduce that XLA
compiles on GPUs (MirroredStrategy's _collective_ops, traced for replica 0 only). For each it
prints the element counts of device 0's collectives in the order their control edges chain them
(TensorFlow launches them one after another), and the summed values. Prints one JSON object on
a `RESULT ` line.
"""

from __future__ import annotations

import json
import sys

import paths  # noqa: F401 - the checkout's root first on sys.path

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from tensorflow.python.distribute import collective_util  # noqa: E402

from tfbench.distribute import allreduce_probe, packing, sync  # noqa: E402

DEVICES = ["/cpu:0", "/cpu:1"]
SIZES = [10, 20, 30, 40, 50, 60]     # elements per gradient, first layer first
TRANSFER = packing.Transfer(num_packs=3)


def _gradients(replica) -> list:
    """Gradient i of replica r holds (i + 1) * (r + 1): sums are 3 * (i + 1) on 2 replicas."""
    scale = tf.cast(replica, tf.float32) + 1.0
    return [tf.fill([n], float(i + 1)) * scale for i, n in enumerate(SIZES)]


def _chain(graph) -> list[int]:
    """Element counts of CPU:0's collectives, first launched first (by their control edges)."""
    ops = [op for op in graph.get_operations() if op.type == "CollectiveReduceV2"
           and tf.DeviceSpec.from_string(op.device).device_index in (0, None)]
    after = {}
    for op in ops:
        before = [c for c in op.control_inputs if c in ops]
        assert len(before) <= 1, op.name
        after[before[0].name if before else None] = op
    chain, name = [], None
    while name in after:
        op = after[name]
        chain.append(op.inputs[0].shape.num_elements())
        name = op.name
    assert len(chain) == len(ops), "collectives not in one chain"
    return chain


def merge_call_path(strategy) -> dict:
    packing.install(strategy, TRANSFER, compiled_replicas=False)

    @tf.function(autograph=False)
    def step():
        def replica_fn():
            context = tf.distribute.get_replica_context()
            return context.all_reduce("sum", _gradients(context.replica_id_in_sync_group))
        return strategy.run(replica_fn)

    chain = _chain(step.get_concrete_function().graph)
    # Each replica's copy of each gradient: the values it holds (one, when summed whole).
    sums = [[sorted(set(v.numpy().tolist())) for v in strategy.experimental_local_results(g)]
            for g in step()]
    return {"chain": chain, "sums": sums}


def compiled_replica_path(strategy) -> dict:
    """The all-reduce a GPU replica's XLA-compiled step makes (no merge call), traced only."""
    packing.install(strategy, TRANSFER, compiled_replicas=True)
    reduction = strategy.extended._collective_ops  # noqa: SLF001

    @tf.function(autograph=False)
    def replica_0():
        with tf.device(DEVICES[0]):
            return reduction._all_reduce(  # noqa: SLF001
                tf.distribute.ReduceOp.SUM, _gradients(0), 0, collective_util.Options())

    return {"chain": _chain(replica_0.get_concrete_function().graph)}


def as_computed_path(strategy) -> dict:
    """An fp16 transfer: the dtypes the wrapped reduction gets from a gradient all-reduce, from
    sync's broadcast of the chief's state and from allreduce_probe.agreed; the broadcast's
    values (fp16 would make 70000 inf and 1e-9 zero)."""
    packing.install(strategy, packing.Transfer(dtype="float16", pack_bytes=0),
                    compiled_replicas=False)
    inner = strategy.extended._cross_device_ops.inner  # noqa: SLF001
    seen: list = []
    reduce = inner.batch_reduce_implementation

    def recording(reduce_op, pairs, options):
        seen.extend(v.values[0].dtype.name for v, _ in pairs)
        return reduce(reduce_op, pairs, options)
    inner.batch_reduce_implementation = recording

    @tf.function(autograph=False)
    def gradients():
        return strategy.run(lambda: sync.reduce_gradients(strategy, [tf.ones([3])]))
    gradients()
    out = {"gradient_dtypes": sorted(set(seen))}
    seen.clear()
    with strategy.scope():
        state = tf.Variable([70000.0, 1e-9, 0.1])
    sync._broadcast_from_chief(strategy, [state])  # noqa: SLF001
    out["broadcast_dtypes"], out["broadcast"] = sorted(set(seen)), state.numpy().tolist()
    seen.clear()
    out["agreed"] = allreduce_probe.agreed(strategy, lambda replica: [True, replica != 1])
    out["agreed_dtypes"] = sorted(set(seen))
    return out


def main() -> None:
    if sys.argv[1:] == ["as_computed"]:   # a process of its own: its collectives' keys too
        out = {"as_computed": as_computed_path(
            tf.distribute.MultiWorkerMirroredStrategy._from_local_devices(DEVICES))}  # noqa: SLF001
        print("RESULT " + json.dumps(out))
        return
    out = {
        "mirrored": merge_call_path(tf.distribute.MirroredStrategy(DEVICES)),
        "multi_worker": merge_call_path(
            tf.distribute.MultiWorkerMirroredStrategy._from_local_devices(DEVICES)),  # noqa: SLF001
        "compiled_replica": compiled_replica_path(tf.distribute.MirroredStrategy(DEVICES)),
    }
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
