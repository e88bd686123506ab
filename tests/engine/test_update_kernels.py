"""tfbench's optimizers update each variable with one TensorFlow training kernel and give Keras'
own values (tfbench.engine.update_kernels).

Each case runs the fused optimizer and Keras' own over three steps from the same start and the
same gradients and compares every variable and slot. With constants that are binary fractions
(0.875, 1 - 2^-10) the two agree to the last bit in every dtype; with the legacy defaults the
kernels compute 1 - beta in the variable's dtype (1 - 0.999f = 0.00099998713), where Keras has
the Python float (0.001), and the values differ by that rounding and no more.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

from tfbench.engine import optimizers, update_kernels as uk

SGD, RMSPROP, ADAM = keras.optimizers.SGD, keras.optimizers.RMSprop, keras.optimizers.Adam
FUSED = {SGD: uk.FusedSGD, RMSPROP: uk.FusedRMSprop, ADAM: uk.FusedAdam}

# name -> (Keras class, arguments, kernel); binary constants.
EXACT = {
    "sgd": (SGD, {}, "ResourceApplyGradientDescent"),
    "momentum": (SGD, dict(momentum=0.875), "ResourceApplyKerasMomentum"),
    "nesterov": (SGD, dict(momentum=0.875, nesterov=True), "ResourceApplyKerasMomentum"),
    "rmsprop": (RMSPROP, dict(rho=0.875, momentum=0.875, epsilon=0.5), "ResourceApplyRMSProp"),
    "rmsprop_no_momentum": (RMSPROP, dict(rho=0.875, momentum=0.0, epsilon=2.0 ** -10),
                            "ResourceApplyRMSProp"),
    "adam": (ADAM, dict(beta_1=0.875, beta_2=1 - 2.0 ** -10, epsilon=2.0 ** -10),
             "ResourceApplyAdam"),
}
# The legacy flags' defaults (--momentum, --rmsprop_*, --adam_*) and the betas whose 1 - beta
# the kernel computes in the variable's dtype.
LEGACY = {
    "nesterov": (SGD, dict(momentum=0.9, nesterov=True), ()),
    "rmsprop": (RMSPROP, dict(rho=0.9, momentum=0.9, epsilon=1.0), (0.9,)),
    "adam": (ADAM, dict(beta_1=0.9, beta_2=0.999, epsilon=1e-8), (0.9, 0.999)),
}
ULPS = 4
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


def _run(opt, dtype, loss_scaled=False, mode="eager"):
    """Variables and slots after three steps of `opt` from a fixed start and gradients, and the
    types of the ops one step runs (mode "graph" or "xla": a tf.function; "eager": no ops)."""
    rng = np.random.default_rng(0)
    variables = [keras.Variable(rng.normal(size=shape).astype(np.float32), dtype=dtype)
                 for shape in [(3, 4), (4,)]]
    if loss_scaled:
        opt = optimizers.LossScaleOptimizer(opt, initial_scale=4.0)
    step = (lambda grads: opt.apply(grads, variables)) if mode == "eager" else \
        tf.function(lambda grads: opt.apply(grads, variables), jit_compile=mode == "xla")
    for _ in range(3):
        grads = [rng.normal(size=v.shape).astype(np.float32) for v in variables]
        step([tf.constant(g * (4.0 if loss_scaled else 1.0), dtype) for g in grads])
    ops = []
    if mode != "eager":
        graph = step.get_concrete_function(
            [tf.TensorSpec(v.shape, dtype) for v in variables]).graph.as_graph_def()
        # The step's ops and those of the functions it calls (loss scaling's cond branches).
        ops = [node.op for node in graph.node] + [
            node.op for function in graph.library.function for node in function.node_def]
    inner = getattr(opt, "inner_optimizer", opt)
    slots = {}   # ("momentum" | "velocity", k) -> the k-th such slot, as Keras orders them
    for v in inner.variables:
        kind = v.name.rsplit("_", 1)[-1]
        if kind in ("momentum", "velocity"):
            slots[kind, sum(k == kind for k, _ in slots)] = np.asarray(v.numpy(), np.float64)
    return [np.asarray(v.numpy(), np.float64) for v in variables], slots, ops


def _assert_equal(got, want, dtype, extra=0.0):
    tol = ULPS * EPS[dtype] + extra
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.max(np.abs(b)))


def _writes(ops) -> list[str]:
    return sorted(op for op in ops if op.startswith(("ResourceApply", "Assign")))


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("name", sorted(EXACT))
def test_one_kernel_per_variable_gives_keras_values(name, dtype):
    keras_class, kwargs, kernel = EXACT[name]
    mode = "graph" if dtype == "float32" else "eager"
    got, got_slots, ops = _run(FUSED[keras_class](0.25, **kwargs), dtype, mode=mode)
    want, want_slots, keras_ops = _run(keras_class(0.25, **kwargs), dtype, mode=mode)
    _assert_equal(got, want, dtype)
    _assert_equal([got_slots[k] for k in want_slots], list(want_slots.values()), dtype)
    if mode == "graph":
        # One kernel for each of the two variables; the one other write is the step counter.
        assert _writes(ops) == ["AssignVariableOp", kernel, kernel]
        assert not [op for op in keras_ops if op.startswith("ResourceApply")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_defaults_differ_from_keras_by_the_rounding_of_one_minus_beta(name, dtype):
    keras_class, kwargs, betas = LEGACY[name]
    as_dtype = tf.as_dtype(dtype).as_numpy_dtype
    rounding = max([abs(1 - (1 - as_dtype(b)) / (1 - b)) for b in betas], default=0.0)
    got, got_slots, _ = _run(FUSED[keras_class](0.25, **kwargs), dtype)
    want, want_slots, _ = _run(keras_class(0.25, **kwargs), dtype)
    _assert_equal(got, want, dtype, 2 * rounding)
    _assert_equal([got_slots[k] for k in want_slots], list(want_slots.values()), dtype,
                  2 * rounding)


def test_rmsprop_without_momentum_gets_the_slot_the_kernel_needs():
    _, slots, _ = _run(uk.FusedRMSprop(0.25, momentum=0.0), "float32")
    _, keras_slots, _ = _run(RMSPROP(0.25, momentum=0.0), "float32")
    assert sorted(keras_slots) == [("velocity", 0), ("velocity", 1)]
    assert sorted(slots) == [("momentum", 0), ("momentum", 1), ("velocity", 0), ("velocity", 1)]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_under_dynamic_loss_scaling_and_xla(name):
    """Wrapped in tfbench's LossScaleOptimizer (fp16 runs), and compiled by XLA (--xla), whose
    own kernels for these ops (tf2xla) a GPU compiles too."""
    keras_class, kwargs, kernel = EXACT[name]
    want, _, _ = _run(keras_class(0.25, **kwargs), "float32", loss_scaled=True)
    got, _, ops = _run(FUSED[keras_class](0.25, **kwargs), "float32", loss_scaled=True,
                       mode="graph")
    _assert_equal(got, want, "float32")
    assert ops.count(kernel) == 2
    got, _, _ = _run(FUSED[keras_class](0.25, **kwargs), "float32", mode="xla")
    want, _, _ = _run(keras_class(0.25, **kwargs), "float32")
    _assert_equal(got, want, "float32")


@pytest.mark.parametrize("name", ["nesterov", "adam"])
def test_bfloat16_variables_and_sparse_gradients_keep_keras_update(name):
    """No GPU kernel of these ops takes bfloat16; a sparse gradient has its own kernels."""
    keras_class, kwargs, _ = EXACT[name]
    got, _, ops = _run(FUSED[keras_class](0.25, **kwargs), "bfloat16", mode="graph")
    want, _, _ = _run(keras_class(0.25, **kwargs), "bfloat16")
    assert not [op for op in ops if op.startswith("ResourceApply")]
    _assert_equal(got, want, "bfloat16", 0.0)
    sparse = tf.IndexedSlices(tf.ones([1, 4]), tf.constant([1]), tf.constant([3, 4]))
    assert not uk.fused(sparse, tf.Variable(tf.zeros([3, 4])))


GPU_DTYPES = {
    op: {tf.as_dtype(t) for k in kernels.get_registered_kernels_for_op(op).kernel
         if k.device_type == "GPU" for c in k.constraint if c.name == "T"
         for t in c.allowed_values.list.type}
    for op in uk.KERNELS}


@pytest.mark.skipif(not any(GPU_DTYPES.values()),
                    reason="this TensorFlow registers no GPU kernels (tensorflow-cpu)")
def test_every_kernel_has_a_gpu_kernel_for_every_dtype_it_is_given():
    """The registry of the full wheel (TF 2.21 here; TF 2.17.1's lists the same)."""
    for op, dtypes in GPU_DTYPES.items():
        assert set(uk.FUSED_DTYPES) <= dtypes, op
        assert tf.bfloat16 not in dtypes, op   # else bfloat16 variables could be fused too
