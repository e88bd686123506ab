"""The fused plain-SGD update equals Keras' SGD update and advances the schedule step."""

import keras
import numpy as np
import tensorflow as tf

from tfbench import lr, steps


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
    results = []
    for fused in (True, False):
        with strategy.scope():
            model = _model()
            opt = keras.optimizers.SGD(schedule)
            opt.build(model.trainable_variables)
        st = steps.Steps(model, opt, strategy, steps.StepConfig(5, 1e-3))
        assert st._plain_sgd()
        if not fused:
            st._plain_sgd = lambda: False
        step = tf.function(lambda: strategy.run(st._train_replica, args=(images, labels)))
        for _ in range(2):
            step()
        results.append(([v.numpy() for v in model.trainable_variables],
                        int(opt.iterations.numpy())))
    (fused_vars, fused_it), (keras_vars, keras_it) = results
    assert fused_it == keras_it == 2
    for a, b in zip(fused_vars, keras_vars):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_momentum_keeps_the_keras_path():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        opt = keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)
    assert not steps.Steps(model, opt, strategy, steps.StepConfig(5, 0.0))._plain_sgd()
