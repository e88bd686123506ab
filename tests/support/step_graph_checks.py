"""step_graph checks on 2 logical CPU devices, run in a fresh process by test_step_graph.py.

Small hand-built steps whose answers are known without the walker: Keras' SGD writes a variable
with a multiply and a subtract, a fused training kernel with one op, a MirroredStrategy
all-reduces each gradient in the dtype it is given, a variable placed on one device is held
there only, and a jit_compile function holds its update inside the XLA cluster. Prints one JSON
object on a `RESULT ` line.
"""

from __future__ import annotations

import json

import paths  # noqa: F401 - the checkout's root first on sys.path

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import step_graph  # noqa: E402 - benchmarks/, on sys.path by paths

DEVICES = ("/cpu:0", "/cpu:1")


def _model():
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(2)])


def _describe(model, optimizer):
    return step_graph.describe_variables(model.trainable_variables,
                                         list(model.non_trainable_variables)
                                         + list(optimizer.variables))


def _summary(audit) -> dict:
    return {"kernels": sorted(set(audit.update_kernels.values())),
            "copies": sorted("%s@%s" % key for key in audit.update_kernels),
            "reductions": sorted({(r.kind, r.dtype, r.nbytes) for r in audit.reductions}),
            "packs_per_device": audit.packs_per_device(),
            "bytes_per_device": audit.bytes_per_device,
            "largest": audit.largest_variable_bytes,
            "xla": audit.xla}


def keras_step(optimizer, jit: bool = False) -> dict:
    """One device, Keras' own apply_gradients."""
    model = _model()
    optimizer.build(model.trainable_variables)
    x = tf.ones((2, 4))

    @tf.function(jit_compile=jit)
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    concrete = step.get_concrete_function(x)
    return _summary(step_graph.audit(concrete, _describe(model, optimizer)))


def fused_step() -> dict:
    """One device, one ResourceApplyGradientDescent per variable."""
    model = _model()
    x = tf.ones((2, 4))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        for v, g in zip(model.trainable_variables, grads):
            tf.raw_ops.ResourceApplyGradientDescent(var=v.value.handle, alpha=0.1, delta=g)
        return loss

    return _summary(step_graph.audit(step.get_concrete_function(x),
                                     step_graph.describe_variables(model.trainable_variables,
                                                                   [])))


def mirrored_step(reduce_dtype: str) -> dict:
    """Two replicas; Keras all-reduces each gradient in the dtype it is given (SGD casts it
    back to the variable's)."""
    strategy = tf.distribute.MirroredStrategy(list(DEVICES))
    with strategy.scope():
        model = _model()
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)
    x = tf.ones((2, 4))

    def replica(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [tf.cast(g, reduce_dtype) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def step(x):
        return strategy.run(replica, (x,))

    audit = step_graph.audit(step.get_concrete_function(x), _describe(model, optimizer))
    return _summary(audit)


def overlap_step(gate: str) -> list[list]:
    """Two replicas, two variables (v0 first in the forward pass, so its gradient comes last),
    each gradient all-reduced on its own and applied; (waits for the last gradient, gradients
    waited for) per all-reduce on the first device. gate: "" (data edges only), "control" (v1's
    all-reduce under a control dependency on v0's gradient), "compiled" (both gradients made in
    one XLA-compiled function, whose outputs all exist only once all of it has run)."""
    strategy = tf.distribute.MirroredStrategy(list(DEVICES))
    with strategy.scope():
        v0, v1 = keras.Variable(np.ones(4, "float32")), keras.Variable(np.ones(4, "float32"))

    def gradients(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sin(v1 * tf.sin(v0 * x)))
        return tape.gradient(loss, [v0, v1])

    compiled = tf.function(gradients, jit_compile=True, autograph=False)

    def replica(x):
        g0, g1 = compiled(x) if gate == "compiled" else gradients(x)
        ctx = tf.distribute.get_replica_context()
        if gate == "control":
            with tf.control_dependencies([g0]):
                r1 = ctx.all_reduce(tf.distribute.ReduceOp.SUM, g1)
        else:
            r1 = ctx.all_reduce(tf.distribute.ReduceOp.SUM, g1)
        r0 = ctx.all_reduce(tf.distribute.ReduceOp.SUM, g0)
        v1.assign_sub(r1)
        v0.assign_sub(r0)
        return tf.constant(0.0)

    @tf.function(autograph=False)
    def step(x):
        return strategy.run(replica, (x,))

    x = tf.ones([4])
    audit = step_graph.audit(step.get_concrete_function(x),
                             step_graph.describe_variables([v0, v1], []))
    return [[w.waits_for_last, w.waits_for, w.gradients] for w in audit.overlap
            if w.device == "CPU:0"]


def one_device_variables() -> dict:
    """Every variable on the second device, no step: the bytes each device holds."""
    with tf.device(DEVICES[1]):
        model = _model()
    return step_graph.held_bytes(step_graph.describe_variables(model.trainable_variables, []))


def main() -> None:
    out = {
        "sgd": keras_step(keras.optimizers.SGD(0.1)),
        "nesterov": keras_step(keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)),
        "sgd_xla": keras_step(keras.optimizers.SGD(0.1), jit=True),
        "fused": fused_step(),
        "mirrored_fp32": mirrored_step("float32"),
        "mirrored_fp16": mirrored_step("float16"),
        "placed": one_device_variables(),
        "overlap": overlap_step(""),
        "overlap_control": overlap_step("control"),
        "overlap_compiled": overlap_step("compiled"),
    }
    print("RESULT " + json.dumps(out, default=list))


if __name__ == "__main__":
    main()
