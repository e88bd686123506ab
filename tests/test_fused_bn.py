"""FusedBatchNorm matches Keras BatchNormalization: outputs, moving statistics, gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.models.fused_bn import FusedBatchNorm


@pytest.mark.parametrize("scale", [True, False])
def test_matches_keras_batch_norm(scale):
    x = tf.random.normal([4, 5, 5, 3], mean=2.0, stddev=3.0, seed=1)
    ref = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, scale=scale)
    fused = FusedBatchNorm(momentum=0.9, epsilon=1e-5, scale=scale)
    ref.build(x.shape)
    fused.build(x.shape)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y_ref = ref(x, training=True)
        y_fused = fused(x, training=True)
        loss_ref = tf.reduce_sum(y_ref * tf.range(3, dtype=tf.float32))
        loss_fused = tf.reduce_sum(y_fused * tf.range(3, dtype=tf.float32))
    np.testing.assert_allclose(y_fused, y_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tape.gradient(loss_fused, x), tape.gradient(loss_ref, x),
                               rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(fused.moving_mean, ref.moving_mean, rtol=1e-5)
    # The fused kernel keeps the unbiased variance in the moving average (as TF1 did).
    n = 4 * 5 * 5
    batch_var = np.var(x.numpy().reshape(-1, 3), axis=0) * n / (n - 1)
    np.testing.assert_allclose(fused.moving_variance, 0.9 + 0.1 * batch_var, rtol=1e-4)


def test_inference_uses_moving_statistics_and_nchw():
    x = tf.random.normal([2, 3, 4, 4], seed=2)
    layer = FusedBatchNorm(axis=1, epsilon=1e-3)
    layer.build(x.shape)
    layer.moving_mean.assign([1.0, 2.0, 3.0])
    layer.moving_variance.assign([4.0, 4.0, 4.0])
    y = layer(x, training=False).numpy()
    expected = (x.numpy() - np.array([1, 2, 3]).reshape(1, 3, 1, 1)) / np.sqrt(4.0 + 1e-3)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_mixed_precision_keeps_float32_parameters():
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        layer = FusedBatchNorm()
        y = layer(tf.random.normal([2, 4, 4, 8]), training=True)
        assert y.dtype == tf.bfloat16
        assert layer.gamma.dtype == "float32" and layer.moving_mean.dtype == "float32"
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
