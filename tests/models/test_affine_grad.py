"""affine_grad: the transposed input gradient is chosen by shape and equals TensorFlow's."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from tfbench.config import fast_paths
from tfbench.models import affine_grad
from tfbench.models import layers as L


@pytest.fixture
def cpu_only():
    with fast_paths.using(fast_paths.for_device("cpu")):
        yield


@pytest.mark.parametrize("width,batch,expected", [
    (4096, 32, True), (1001, 32, True), (256, None, True), (512, 256, True),
    (255, 1, False), (10, 32, False), (1, 32, False), (None, 32, False), (512, 1024, False)])
def test_chosen_for_layers_wider_than_the_batch(cpu_only, width, batch, expected):
    assert affine_grad.transposed_input_grad(width, batch) is expected


def test_never_chosen_for_a_gpu_step():
    with fast_paths.using(fast_paths.for_device("gpu")):
        assert affine_grad.transposed_input_grad(4096, 32) is False
    # Outside any step the standard gradient is the one built.
    assert affine_grad.transposed_input_grad(4096, 32) is False


def _grads(fn, x, kernel):
    with tf.GradientTape() as tape:
        tape.watch([x, kernel])
        y = fn(x, kernel)
        loss = tf.reduce_sum(y * tf.cos(y))
    return (y,) + tuple(tape.gradient(loss, [x, kernel]))


@pytest.mark.parametrize("compiled", [False, True])
def test_outputs_and_gradients_equal_tensorflows(cpu_only, compiled):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(8, 300)), tf.float32)
    kernel = tf.constant(rng.normal(size=(300, 512)) / 20, tf.float32)
    ours = tf.function(_grads) if compiled else _grads
    got = ours(affine_grad.matmul, x, kernel)
    want = _grads(tf.matmul, x, kernel)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-4)


def _gradient_op_types(width, batch):
    x = tf.TensorSpec([batch, 64], tf.float32)
    kernel = tf.TensorSpec([64, width], tf.float32)
    graph = tf.function(_grads).get_concrete_function(affine_grad.matmul, x, kernel).graph
    return {op.type for op in graph.get_operations()}


def test_the_graph_transposes_only_for_wide_layers(cpu_only):
    assert "Transpose" in _gradient_op_types(width=1024, batch=16)
    assert "Transpose" not in _gradient_op_types(width=10, batch=16)


def test_dense_layer_matches_keras_dense(cpu_only):
    x = tf.random.stateless_normal([4, 40], seed=[1, 2])
    ours = affine_grad.Dense(300, activation="relu")
    theirs = keras.layers.Dense(300, activation="relu")
    ours.build((None, 40))
    theirs.build((None, 40))
    for v, w in zip(ours.weights, theirs.weights):
        v.assign(w)

    def run(layer):
        with tf.GradientTape() as tape:
            y = layer(x)
            loss = tf.reduce_sum(y * y)
        return [y] + tape.gradient(loss, layer.trainable_variables)

    for g, w in zip(run(ours), run(theirs)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
    assert ours.get_config()["units"] == 300


def test_three_dimensional_inputs_take_keras_own_path(cpu_only):
    layer = affine_grad.Dense(300)
    y = layer(tf.ones([2, 3, 40]))
    assert y.shape == (2, 3, 300)


def test_mixed_bfloat16_computes_in_bfloat16_with_float32_weights(cpu_only):
    layer = affine_grad.Dense(512, dtype="mixed_bfloat16")
    x = tf.ones([8, 64])
    with tf.GradientTape() as tape:
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32))
    grads = tape.gradient(loss, layer.trainable_variables)
    assert y.dtype == tf.bfloat16 and layer.kernel.dtype == "float32"
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    np.testing.assert_allclose(grads[0].numpy(), np.full((64, 512), 8.0), rtol=1e-2)


def test_legacy_affine_builds_this_layer():
    inputs = keras.Input((12,))
    out = L.affine(inputs, 300)
    assert isinstance(out._keras_history.operation, affine_grad.Dense)
