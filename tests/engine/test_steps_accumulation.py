"""--accum_steps=K: K micro-batches, one update equal to one step on the K-times larger batch."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.engine import steps

SIZE, CLASSES = 8, 10


def _model():
    return keras.Sequential([keras.Input((SIZE, SIZE, 3)), keras.layers.Conv2D(4, 3),
                             keras.layers.ReLU(), keras.layers.GlobalAveragePooling2D(),
                             keras.layers.Dense(CLASSES)])


def _one_update(init, images, labels, accum, weight_decay, momentum):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        model.set_weights(init)
        opt = keras.optimizers.SGD(0.5, momentum=momentum)
        opt.build(model.trainable_variables)
    config = steps.StepConfig(num_label_classes=CLASSES, weight_decay=weight_decay,
                              accum_steps=accum)
    fn = steps.Steps(model, opt, strategy, config).train_step(from_iterator=True)
    it = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors((images, labels)).repeat()))
    out = [fn(it).numpy() for _ in range(2)]   # two updates: momentum carries the first
    return model.get_weights(), out, int(opt.iterations.numpy())


@pytest.mark.parametrize("weight_decay,momentum", [(0.0, 0.0), (0.01, 0.0), (0.01, 0.9)])
def test_k_micro_batches_equal_one_large_batch(weight_decay, momentum):
    rng = np.random.default_rng(3)
    images = rng.normal(size=(16, SIZE, SIZE, 3)).astype("float32")
    labels = rng.integers(0, CLASSES, size=(16,)).astype("int32")
    init = _model().get_weights()
    big, big_out, big_iters = _one_update(init, images, labels, 1, weight_decay, momentum)
    acc, acc_out, acc_iters = _one_update(init, images, labels, 4, weight_decay, momentum)
    assert big_iters == acc_iters == 2          # one optimizer update per step, not per micro
    for a, b in zip(big, acc):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # The reported losses are the means over the micro-batches = the large batch's loss.
    np.testing.assert_allclose(big_out[0][:2], acc_out[0][:2], rtol=1e-5)
    assert not np.allclose(big[0], init[0])     # the update did happen


def test_synthetic_images_are_split_into_micro_batches():
    """Synthetic inputs hold K micro-batches per replica; each gradient sees one of them."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = _model()
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
    builder = steps.Steps(model, opt, strategy,
                          steps.StepConfig(num_label_classes=CLASSES, weight_decay=0.0,
                                           accum_steps=3))
    seen = []
    original = builder._gradients

    def recording(images, labels):
        seen.append((images.shape[0], labels.shape[0]))
        return original(images, labels)
    builder._gradients = recording
    fn = builder.train_step()
    images = steps.synthetic_images(strategy, 2 * 3, SIZE, "float32")
    out = fn(images).numpy()
    assert seen == [(2, 2)] * 3 and np.all(np.isfinite(out))
    assert int(opt.iterations.numpy()) == 1
