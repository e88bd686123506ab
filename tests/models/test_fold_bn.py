"""Batch norm folded into convolutions: same outputs, fewer layers, only where it is exact."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.models import catalog, fold_bn
from tfbench.models.fused_bn import FusedBatchNorm

L = keras.layers


def randomise_statistics(model, seed=0):
    """Moving statistics, gammas and betas far from their initial values, so folding shows."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, fold_bn.BATCH_NORMS):
            n = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(0, 0.5, n).astype("float32"))
            layer.moving_variance.assign(rng.uniform(0.2, 3.0, n).astype("float32"))
            for var in (layer.gamma, layer.beta):
                if var is not None:
                    var.assign(rng.normal(0.5, 0.5, n).astype("float32"))


def small_model():
    """Every case: foldable pairs (fused and Keras BN, with and without conv bias / gamma), and
    batch norms that must stay (after an activation, a shared output, a non-conv layer)."""
    x = inputs = keras.Input((12, 12, 3))
    a = L.Conv2D(8, 3, padding="same", use_bias=False, name="conv_a")(x)
    a = FusedBatchNorm(axis=-1, scale=False, name="bn_a")(a)            # folds: no gamma
    a = L.ReLU()(a)
    b = L.Conv2D(8, 1, use_bias=True, name="conv_b")(a)
    b = L.BatchNormalization(name="bn_b")(b)                           # folds: conv has a bias
    y = L.Add()([a, b])
    c = L.Conv2D(8, 3, padding="same", activation="relu", name="conv_c")(y)
    c = FusedBatchNorm(axis=-1, scale=True, name="bn_c")(c)             # stays: conv activation
    d = L.Conv2D(8, 1, name="conv_d")(c)
    d1 = FusedBatchNorm(axis=-1, name="bn_d")(d)                        # stays: d has 2 consumers
    d = L.Add()([d1, d])
    d = FusedBatchNorm(axis=-1, name="bn_add")(d)                       # stays: after an Add
    z = L.GlobalAveragePooling2D()(d)
    z = L.Dense(5, name="dense")(z)
    return keras.Model(inputs, z)


def test_folds_exactly_the_foldable_pairs_and_keeps_the_outputs():
    model = small_model()
    randomise_statistics(model)
    assert [(c.name, b.name) for c, b in fold_bn.foldable_pairs(model)] == \
        [("conv_a", "bn_a"), ("conv_b", "bn_b")]
    folded = fold_bn.fold_batch_norm(model)
    assert folded.num_folded == 2
    kinds = {layer.name: type(layer) for layer in folded.model.layers}
    assert kinds["bn_a"] is fold_bn._PassThrough and kinds["bn_b"] is fold_bn._PassThrough
    assert kinds["bn_c"] is FusedBatchNorm and kinds["bn_d"] is FusedBatchNorm
    assert folded.model.get_layer("conv_a").use_bias
    x = tf.random.stateless_normal([4, 12, 12, 3], seed=[1, 2])
    want = model(x, training=False).numpy()
    got = folded.model(x, training=False).numpy()
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_folded_weights_are_the_closed_form():
    model = small_model()
    randomise_statistics(model, seed=3)
    conv, bn = model.get_layer("conv_b"), model.get_layer("bn_b")
    kernel, bias = fold_bn.fold(conv, bn)
    s = bn.gamma.numpy() / np.sqrt(bn.moving_variance.numpy() + bn.epsilon)
    np.testing.assert_allclose(kernel.numpy(), conv.kernel.numpy() * s, rtol=1e-6)
    np.testing.assert_allclose(
        bias.numpy(), (conv.bias.numpy() - bn.moving_mean.numpy()) * s + bn.beta.numpy(),
        rtol=1e-5, atol=1e-6)


def test_refresh_folds_the_source_weights_again():
    # What --eval does after each checkpoint restore.
    model = small_model()
    folded = fold_bn.fold_batch_norm(model)
    randomise_statistics(model, seed=7)
    model.get_layer("dense").kernel.assign(tf.ones_like(model.get_layer("dense").kernel))
    x = tf.random.stateless_normal([2, 12, 12, 3], seed=[3, 4])
    assert np.abs(folded.model(x, training=False) - model(x, training=False)).max() > 1e-2
    folded.refresh(model)
    np.testing.assert_allclose(folded.model(x, training=False), model(x, training=False),
                               rtol=1e-5, atol=1e-5)


def test_depthwise_and_separable_convolutions_fold():
    x = inputs = keras.Input((10, 10, 3))
    y = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="dw")(x)
    y = L.BatchNormalization(name="bn_dw")(y)
    y = L.ReLU()(y)
    y = L.SeparableConv2D(5, 3, depth_multiplier=2, use_bias=False, name="sep")(y)
    y = FusedBatchNorm(axis=-1, scale=True, name="bn_sep")(y)
    model = keras.Model(inputs, L.GlobalAveragePooling2D()(y))
    randomise_statistics(model, seed=11)
    folded = fold_bn.fold_batch_norm(model)
    assert folded.num_folded == 2
    assert not any(isinstance(l, fold_bn.BATCH_NORMS) for l in folded.model.layers)
    # Depthwise output channel c * multiplier + m takes the batch norm's channel c * 2 + m.
    conv, bn = model.get_layer("dw"), model.get_layer("bn_dw")
    s = bn.gamma.numpy() / np.sqrt(bn.moving_variance.numpy() + bn.epsilon)
    kernel, _ = fold_bn.fold(conv, bn)
    np.testing.assert_allclose(kernel.numpy(), conv.kernel.numpy() * s.reshape(3, 2), rtol=1e-6)
    x = tf.random.stateless_normal([3, 10, 10, 3], seed=[7, 8])
    want = model(x, training=False).numpy()
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(folded.model(x, training=False).numpy(), want,
                               rtol=1e-5, atol=1e-5)


def test_batch_norm_on_another_axis_than_the_channels_is_not_folded():
    x = inputs = keras.Input((6, 6, 4))
    y = L.Conv2D(6, 1, name="conv")(x)
    y = L.BatchNormalization(axis=1)(y)
    assert fold_bn.foldable_pairs(keras.Model(inputs, y)) == []


def test_a_model_without_batch_norm_is_left_alone():
    model = catalog.get("lenet").build(28, "NHWC")
    assert fold_bn.fold_batch_norm(model) is None


@pytest.mark.slow
@pytest.mark.parametrize("name,image_size,expected", [("resnet50", 64, 53),
                                                      ("resnet20", 32, 19)])
def test_registered_models_fold_and_agree(name, image_size, expected):
    model = catalog.get(name).build(image_size, "NHWC")
    randomise_statistics(model)
    folded = fold_bn.fold_batch_norm(model)
    assert folded.num_folded == expected
    assert not any(isinstance(l, fold_bn.BATCH_NORMS) for l in folded.model.layers)
    x = tf.random.stateless_normal([2, image_size, image_size, 3], seed=[5, 6])
    want = model(x, training=False).numpy()
    np.testing.assert_allclose(folded.model(x, training=False).numpy(), want,
                               rtol=1e-4, atol=1e-4 * np.abs(want).max())
