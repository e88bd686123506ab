"""The one-kernel SGD updates (plain with weight decay, and momentum) equal Keras' own updates,
and only CPU steps take them."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.engine import lr, steps
from tfbench.config.fast_paths import CPU, for_device


def _model():
    keras.utils.set_random_seed(3)
    inputs = keras.Input((4, 4, 3))
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(5, dtype="float32")(x))


def test_fused_sgd_matches_keras_sgd():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    images = tf.random.normal([6, 4, 4, 3], seed=1)
    labels = tf.constant([0, 1, 2, 3, 4, 0])
    schedule = lr.Schedule(lr.Plan(boundaries=(0,), values=(0.1, 0.05)))
    results, outputs = [], []
    for fused in (True, False):
        with strategy.scope():
            model = _model()
            opt = keras.optimizers.SGD(schedule)
            opt.build(model.trainable_variables)
        st = steps.Steps(model, opt, strategy, steps.StepConfig(5, 1e-3, fast_paths=CPU))
        assert st._plain_sgd()
        if not fused:
            st._plain_sgd = lambda: False
        step = tf.function(lambda: strategy.run(st._train_replica, args=(images, labels)))
        outputs.append([step().numpy() for _ in range(2)])
        results.append(([v.numpy() for v in model.trainable_variables],
                        int(opt.iterations.numpy())))
    (fused_vars, fused_it), (keras_vars, keras_it) = results
    assert fused_it == keras_it == 2
    for a, b in zip(fused_vars, keras_vars):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # The reported losses include the weight-decay term on both paths.
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-6)
    base, total = outputs[0][0][:2]
    assert total > base


def _update_ops(weight_decay, kind="cpu", momentum=0.0):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        opt = keras.optimizers.SGD(0.1, momentum=momentum)
        opt.build(model.trainable_variables)
    st = steps.Steps(model, opt, strategy,
                     steps.StepConfig(5, weight_decay, fast_paths=for_device(kind)))
    images = tf.random.normal([6, 4, 4, 3], seed=1)
    graph = tf.function(lambda: st._train_replica(images)).get_concrete_function().graph
    return [op.type for op in graph.get_operations()]


def test_sgd_applies_weight_decay_in_its_update():
    ops = _update_ops(1e-3)
    # kernel and bias: one fused update each, and the L2 term is not differentiated.
    assert ops.count("ResourceApplyProximalGradientDescent") == 2
    assert "ResourceApplyGradientDescent" not in ops
    assert ops.count("L2Loss") == 2
    # One AddN, the L2 sum; differentiating the L2 term would add one per weight.
    assert ops.count("AddN") == 1
    ops = _update_ops(0.0)
    assert ops.count("ResourceApplyGradientDescent") == 2
    assert "ResourceApplyProximalGradientDescent" not in ops and "L2Loss" not in ops


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_gpu_steps_update_with_keras_own_ops(momentum):
    """ResourceApplyProximalGradientDescent has a CPU kernel only: a GPU step must not hold it
    (nor any other raw training kernel); the weight decay is differentiated, as Keras does."""
    ops = _update_ops(1e-3, kind="gpu", momentum=momentum)
    assert not [op for op in ops if op.startswith("ResourceApply")]
    assert ops.count("L2Loss") == 2
    assert "AssignSubVariableOp" in ops or "AssignVariableOp" in ops


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


@pytest.mark.parametrize("nesterov", [True, False])
def test_fused_momentum_matches_keras_momentum(nesterov):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    images = tf.random.normal([6, 4, 4, 3], seed=1)
    labels = tf.constant([0, 1, 2, 3, 4, 0])
    results = []
    for fused in (True, False):
        with strategy.scope():
            model = _model()
            opt = keras.optimizers.SGD(0.1, momentum=0.9, nesterov=nesterov)
            opt.build(model.trainable_variables)
        st = steps.Steps(model, opt, strategy, steps.StepConfig(5, 1e-3, fast_paths=CPU))
        assert st._momentum_sgd() and not st._plain_sgd()
        if not fused:
            st._momentum_sgd = lambda: False
        step = tf.function(lambda: strategy.run(st._train_replica, args=(images, labels)))
        ops = [op.type for op in step.get_concrete_function().graph.get_operations()]
        outputs = [step().numpy() for _ in range(3)]
        results.append(([v.numpy() for v in model.trainable_variables + opt.momentums],
                        int(opt.iterations.numpy()), outputs, ops))
    (fused_vars, fused_it, fused_out, fused_ops), (keras_vars, keras_it, keras_out, keras_ops) = \
        results
    assert fused_ops.count("ResourceApplyKerasMomentum") == 2
    assert "ResourceApplyKerasMomentum" not in keras_ops
    assert fused_it == keras_it == 3
    for a, b in zip(fused_vars, keras_vars):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused_out, keras_out, rtol=1e-5)


def test_an_unbuilt_momentum_optimizer_keeps_the_keras_path():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        opt = keras.optimizers.SGD(0.1, momentum=0.9)
    st = steps.Steps(model, opt, strategy, steps.StepConfig(5, 0.0, fast_paths=CPU))
    assert not st._momentum_sgd()


def test_clipping_keeps_the_keras_path():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        opt = keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True, clipvalue=1.0)
        opt.build(model.trainable_variables)
    st = steps.Steps(model, opt, strategy, steps.StepConfig(5, 0.0, fast_paths=CPU))
    assert not st._plain_sgd() and not st._momentum_sgd()


def test_sgd_decays_a_weight_the_loss_does_not_use():
    # No gradient: 2 * (1 - 0.5 * 0.1) = 1.9
    np.testing.assert_allclose(_one_weight_update(None), [[1.9]], rtol=1e-6)


def test_a_parameter_server_controller_traces_the_standard_gpu_safe_step():
    """Its workers may compute on GPUs whatever the controller's own device kind: no CPU-only
    rewrite may reach them."""
    from tfbench.config.fast_paths import STANDARD
    from tfbench.engine.base import step_fast_paths
    controller = object.__new__(tf.distribute.experimental.ParameterServerStrategy)
    assert step_fast_paths(controller, "cpu") == STANDARD
    assert step_fast_paths(tf.distribute.OneDeviceStrategy("/cpu:0"), "cpu") == CPU
    assert step_fast_paths(None, "gpu") == STANDARD
