"""tfbench's LossScaleOptimizer over Keras': the global step advances in every Keras version."""

import keras
import numpy as np
import tensorflow as tf

from tfbench.engine import optimizers


def test_dynamic_loss_scaling_advances_the_global_step():
    """Keras 3.8 (the NVIDIA TF 2.17 container's) gives the wrapper a counter nothing advances:
    checkpoints, summaries and resume then saw step 0 forever (scripts/test_tf217.sh runs this
    on 3.8)."""
    weight = keras.Variable(np.ones(3, np.float32))
    opt = optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=8.0)
    opt.build([weight])
    for grad in ([8.0, 8.0, 8.0], [np.inf, 8.0, 8.0], [8.0, 8.0, 8.0]):
        opt.apply([tf.constant(grad)], [weight])
    assert int(opt.iterations.numpy()) == 2          # the overflowing step is skipped
    assert float(opt.dynamic_scale.numpy()) == 4.0
    np.testing.assert_allclose(weight.numpy(), [1 - 0.1 - 0.2] * 3, rtol=1e-6)
