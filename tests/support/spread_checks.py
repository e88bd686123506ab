"""SpreadStorageStrategy on 2 logical CPU devices, run in a fresh process by test_spread.py:
where its variables live, what an all-reduce gives each replica, and where the step's gradient
reduction (sync.reduce_gradients) sums each gradient. Prints one JSON object on a `RESULT `
line.
"""

from __future__ import annotations

import json

import paths  # noqa: F401 - the checkout's root first on sys.path

import tensorflow as tf  # noqa: E402

import keras  # noqa: E402

from tfbench.config.settings import make_settings  # noqa: E402
from tfbench.distribute import sync, variables  # noqa: E402
from tfbench.engine import optimizers, steps  # noqa: E402
from tfbench.distribute.spread import SpreadStorageStrategy  # noqa: E402
from step_graph import short_device  # noqa: E402 - benchmarks/, on sys.path by paths


def misplaced_checks(strategy) -> dict:
    """A training step of a two-layer model with dynamic loss scaling and --gradient_clip under
    the spread parameter server: the finite check's and the clip's ops whose input lives on
    another device (each reads a gradient sum, which lives on its variable's device)."""
    with variables.scope(strategy):
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),
                                  keras.layers.Dense(3)])
        inner = optimizers.make_optimizer(make_settings({"gradient_clip": 1.0}), 0.1)
        opt = optimizers.LossScaleOptimizer(inner)
        opt.build(model.trainable_variables)
    st = steps.Steps(model, opt, strategy, steps.StepConfig(3, 0.0, loss_scaling="dynamic"))
    images = strategy.experimental_distribute_values_from_function(lambda _: tf.ones([2, 4]))
    graph = st.train_step().function.get_concrete_function(images).graph
    checked, misplaced = 0, []
    ops = list(graph.get_operations())
    for branch in graph._functions.values():   # the cond's branches: where the clip runs
        ops += list(getattr(branch, "graph", None).get_operations()) if hasattr(branch, "graph") \
            else []
    for op in ops:
        if op.type not in ("IsFinite", "Minimum", "Maximum") or not op.device:
            continue
        source = op.inputs[0]
        while source.op.type in ("Identity", "Placeholder") and source.op.inputs:
            source = source.op.inputs[0]
        if not source.device:
            continue
        checked += 1
        if short_device(source.device) != short_device(op.device):
            misplaced.append("%s on %s, its input on %s" % (
                op.type, short_device(op.device), short_device(source.device)))
    return {"checked": checked, "misplaced": misplaced}


def main() -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = SpreadStorageStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        # 8 floats on the emptier device, then 2 on the other, then 3 beside the 2.
        big, small, third = (tf.Variable(tf.zeros([n])) for n in (8, 2, 3))
    variables = [big, small, third]

    @tf.function(autograph=False)
    def step():
        def replica():
            r = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group + 1,
                        tf.float32)
            grads = [tf.fill([8], r), None, tf.fill([3], 10.0 * r)]
            summed = sync.reduce_gradients(strategy, grads, variables)
            return summed[0], summed[2]
        return strategy.run(replica)

    @tf.function(autograph=False)
    def all_reduce():
        def replica():
            r = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group + 1,
                        tf.float32)
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, r)
        return strategy.run(replica)

    first, third_sum = step()
    graph = step.get_concrete_function().graph
    sums = [short_device(op.device) for op in graph.get_operations() if op.type == "AddN"]
    total = all_reduce()
    out = {
        "variable_devices": [short_device(v.device) for v in variables],
        "sums": [first.numpy().tolist(), third_sum.numpy().tolist()],
        "gradient_sums_on": sums,
        "all_reduce": [float(t.numpy()) for t in strategy.experimental_local_results(total)],
        "checks": misplaced_checks(strategy),
    }
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
