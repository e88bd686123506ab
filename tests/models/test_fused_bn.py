"""FusedBatchNorm matches Keras BatchNormalization: outputs, moving statistics, gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.models.fused_bn import FusedBatchNorm, with_fused_batch_norm


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


def swap_candidate():
    """Keras batch norms that must become fused (channels last, no gamma) and ones that must
    stay: after a Dense layer (2-D), with a regulariser."""
    x = inputs = keras.Input((6, 6, 3))
    x = keras.layers.Conv2D(4, 3, name="conv")(x)
    x = keras.layers.BatchNormalization(momentum=0.9, scale=False, name="bn_conv")(x)
    x = keras.layers.Conv2D(4, 1, name="conv2")(x)
    x = keras.layers.BatchNormalization(gamma_regularizer="l2", name="bn_regularised")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(5, name="dense")(x)
    x = keras.layers.BatchNormalization(name="bn_dense")(x)
    return keras.Model(inputs, x)


def test_keras_batch_norm_of_a_feature_map_becomes_fused_with_the_same_weights():
    model = swap_candidate()
    model.get_layer("bn_conv").moving_mean.assign([0.5, -1.0, 2.0, 0.0])
    fused = with_fused_batch_norm(model)
    kinds = {layer.name: type(layer) for layer in fused.layers}
    assert kinds["bn_conv"] is FusedBatchNorm
    assert kinds["bn_regularised"] is keras.layers.BatchNormalization
    assert kinds["bn_dense"] is keras.layers.BatchNormalization
    np.testing.assert_array_equal(fused.get_layer("bn_conv").moving_mean, [0.5, -1.0, 2.0, 0.0])
    np.testing.assert_array_equal(fused.get_layer("conv").kernel, model.get_layer("conv").kernel)
    x = tf.random.stateless_normal([8, 6, 6, 3], seed=[1, 2])
    np.testing.assert_allclose(fused(x, training=False), model(x, training=False),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused(x, training=True), model(x, training=True),
                               rtol=1e-4, atol=1e-4)
    # One training call: the same moving mean; the variance differs by the unbiased n / (n - 1).
    ref, got = model.get_layer("bn_conv"), fused.get_layer("bn_conv")
    np.testing.assert_allclose(got.moving_mean, ref.moving_mean, rtol=1e-5, atol=1e-6)
    n = 8 * 4 * 4
    np.testing.assert_allclose(np.asarray(got.moving_variance) - 0.9,
                               (np.asarray(ref.moving_variance) - 0.9) * n / (n - 1), rtol=1e-4)


def test_a_model_without_keras_batch_norm_is_returned_as_is():
    x = inputs = keras.Input((6, 6, 3))
    model = keras.Model(inputs, FusedBatchNorm()(keras.layers.Conv2D(4, 3)(x)))
    assert with_fused_batch_norm(model) is model


@pytest.mark.slow
def test_application_models_run_the_fused_kernel():
    from tfbench.models import catalog
    model = catalog.get("mobilenet_v2").build(32, "NHWC")
    assert model.name == "mobilenet_v2"
    assert sum(isinstance(l, FusedBatchNorm) for l in model.layers) == 52
    assert not any(type(l) is keras.layers.BatchNormalization for l in model.layers)
