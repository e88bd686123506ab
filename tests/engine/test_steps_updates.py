"""Training steps update each variable with one TensorFlow training kernel on every device kind,
with Keras' values; on the CPU plain SGD applies the weight decay inside its kernel, and only
CPU steps do."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.config.fast_paths import CPU, STANDARD, for_device
from tfbench.config.settings import make_settings
from tfbench.engine import lr, optimizers, steps, update_kernels


def _model():
    keras.utils.set_random_seed(3)
    inputs = keras.Input((4, 4, 3))
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(5, dtype="float32")(x))


IMAGES = tf.random.normal([6, 4, 4, 3], seed=1)
LABELS = tf.constant([0, 1, 2, 3, 4, 0])


def _train(make_opt, fast_paths, weight_decay=1e-3, steps_run=3, loss_scaling="none"):
    """(weights, reported losses, op types of the step) after `steps_run` steps on one CPU."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        opt = make_opt()
        if loss_scaling == "dynamic":
            opt = optimizers.LossScaleOptimizer(opt, initial_scale=8.0)
        opt.build(model.trainable_variables)
    st = steps.Steps(model, opt, strategy, steps.StepConfig(
        5, weight_decay, loss_scaling=loss_scaling, fast_paths=fast_paths))
    step = tf.function(lambda: strategy.run(st._train_replica, args=(IMAGES, LABELS)))
    graph = step.get_concrete_function().graph.as_graph_def()
    ops = [n.op for n in graph.node] + [n.op for f in graph.library.function for n in f.node_def]
    outputs = [step().numpy() for _ in range(steps_run)]
    assert int(opt.iterations.numpy()) == steps_run
    return [v.numpy() for v in model.trainable_variables], outputs, ops


def test_decay_in_the_update_matches_keras_sgd():
    schedule = lr.KerasSchedule(lr.Schedule(boundaries=(0,), values=(0.1, 0.05)))
    fused_vars, fused_out, fused_ops = _train(lambda: keras.optimizers.SGD(schedule), CPU)
    keras_vars, keras_out, _ = _train(lambda: keras.optimizers.SGD(schedule), STANDARD)
    assert fused_ops.count("ResourceApplyProximalGradientDescent") == 2
    for a, b in zip(fused_vars, keras_vars):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # The reported losses include the weight-decay term on both paths.
    np.testing.assert_allclose(fused_out, keras_out, rtol=1e-6)
    base, total = fused_out[0][:2]
    assert total > base


# --optimizer -> the kernel; precision as the step sees it (mixed precision keeps float32
# variables; fp16 wraps the optimizer in dynamic loss scaling).
KERNEL = {"sgd": "ResourceApplyGradientDescent", "momentum": "ResourceApplyKerasMomentum",
          "rmsprop": "ResourceApplyRMSProp", "adam": "ResourceApplyAdam"}
KERAS = {update_kernels.FusedSGD: keras.optimizers.SGD,
         update_kernels.FusedRMSprop: keras.optimizers.RMSprop,
         update_kernels.FusedAdam: keras.optimizers.Adam}


@pytest.mark.parametrize("optimizer,precision,kind", [
    ("sgd", "fp32", "gpu"), ("momentum", "fp32", "gpu"), ("rmsprop", "fp32", "gpu"),
    ("adam", "fp32", "gpu"), ("momentum", "fp16", "gpu"), ("adam", "bf16", "gpu"),
    ("sgd", "fp32", "cpu"), ("momentum", "fp32", "cpu")])
def test_each_optimizer_updates_with_one_kernel_per_variable(optimizer, precision, kind):
    """As --optimizer builds it (with the legacy defaults), against Keras' own optimizer of the
    same settings, on the step each device kind traces (a GPU step's weight decay is
    differentiated; the CPU's plain SGD applies it in the update)."""
    p = make_settings({"optimizer": optimizer})
    fused = optimizers.make_optimizer(p, 0.1)
    twin = KERAS[type(fused)].from_config(fused.get_config())
    scaling = "dynamic" if precision == "fp16" else "none"
    optimizers.set_policy(precision)
    try:
        got, got_out, ops = _train(lambda: optimizers.make_optimizer(p, 0.1), for_device(kind),
                                   loss_scaling=scaling)
        want, want_out, keras_ops = _train(lambda: twin.from_config(twin.get_config()),
                                           STANDARD, loss_scaling=scaling)
    finally:
        optimizers.set_policy("fp32")
    decay_in_update = optimizer == "sgd" and kind == "cpu"
    kernel = "ResourceApplyProximalGradientDescent" if decay_in_update else KERNEL[optimizer]
    assert ops.count(kernel) == 2                      # kernel and bias
    assert not [op for op in ops if op.startswith("ResourceApply") and op != kernel]
    assert ops.count("L2Loss") == 2 and (ops.count("AddN") == 1) == decay_in_update
    assert not [op for op in keras_ops if op.startswith("ResourceApply")]
    # 1 - beta in float32 inside Adam's and RMSProp's kernels (tests/engine/test_update_kernels.py).
    tol = 1e-4 if optimizer in ("rmsprop", "adam") else 1e-5
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.max(np.abs(b)))
    np.testing.assert_allclose(got_out, want_out, rtol=tol)


def _one_weight_update(grad):
    """The one weight 2.0 after one plain-SGD update (lr 0.5, weight decay 0.1) with `grad`."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
        model.layers[0].kernel.assign([[2.0]])
        opt = keras.optimizers.SGD(0.5)
    st = steps.Steps(model, opt, strategy, steps.StepConfig(1, 0.1, fast_paths=CPU))
    st._apply([grad], model.trainable_variables)
    return model.layers[0].kernel.numpy()


def test_sgd_decay_update_is_exact_for_a_known_step():
    # var * (1 - lr * wd) - lr * grad: 2 * (1 - 0.5 * 0.1) - 0.5 * 3 = 0.4
    np.testing.assert_allclose(_one_weight_update(tf.constant([[3.0]])), [[0.4]], rtol=1e-6)


def test_clipping_keeps_the_decay_out_of_the_update():
    """Keras clips the gradient before its update, so the L2 term's gradient must be in it."""
    p = make_settings({"optimizer": "sgd", "gradient_clip": 1.0})
    _, _, ops = _train(lambda: optimizers.make_optimizer(p, 0.1), CPU, steps_run=1)
    assert ops.count("ResourceApplyGradientDescent") == 2
    assert "ResourceApplyProximalGradientDescent" not in ops


def test_sgd_decays_a_weight_the_loss_does_not_use():
    # No gradient: 2 * (1 - 0.5 * 0.1) = 1.9
    np.testing.assert_allclose(_one_weight_update(None), [[1.9]], rtol=1e-6)


def test_a_parameter_server_controller_traces_the_standard_gpu_safe_step():
    """Its workers may compute on GPUs whatever the controller's own device kind: no CPU-only
    rewrite may reach them."""
    import dataclasses
    from tfbench.engine.base import step_fast_paths
    from tfbench.engine.resolved import resolve
    controller = resolve(make_settings({
        "device": "cpu", "model": "trivial", "ps_hosts": "127.0.0.1:7001",
        "worker_hosts": "127.0.0.1:7002", "controller_host": "127.0.0.1:7004",
        "job_name": "controller"}))
    assert controller.parameter_server and step_fast_paths(controller) == STANDARD
    one = resolve(make_settings({"device": "cpu", "model": "trivial"}))
    assert step_fast_paths(one) == CPU
    gpu = one.with_facts(device=dataclasses.replace(one.device, kind="gpu"))
    assert step_fast_paths(gpu) == STANDARD
