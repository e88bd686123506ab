"""Per-image preprocessing ops: values, shapes, determinism."""

import numpy as np
import pytest
import tensorflow as tf

from tfbench.data import image_ops


def _seed(i=0):
    return image_ops.element_seed(7, i)


def test_normalize_default_and_ml_perf():
    image = tf.constant([[[0.0, 127.5, 255.0]]])
    np.testing.assert_allclose(image_ops.normalize(image).numpy(), [[[-1.0, 0.0, 1.0]]])
    np.testing.assert_allclose(image_ops.normalize(image, ml_perf=True).numpy(),
                               [[[-123.68, 127.5 - 116.78, 255.0 - 103.94]]], rtol=1e-6)


@pytest.mark.parametrize("method", ["nearest", "bilinear", "bicubic", "area"])
def test_resize_gives_float_in_range(method):
    image = tf.constant(np.random.default_rng(0).integers(0, 256, (20, 30, 3)), tf.uint8)
    out = image_ops.resize(image, [8, 8], method, 0)
    assert out.shape == (8, 8, 3) and out.dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(out)) and float(tf.reduce_max(out)) <= 255.0


def test_round_robin_picks_method_by_position():
    image = tf.constant(np.random.default_rng(1).integers(0, 256, (9, 13, 3)), tf.uint8)
    for position, method in enumerate(image_ops.RESIZE_METHODS * 2):
        expected = image_ops.resize(image, [5, 5], method, 0)
        got = image_ops.resize(image, [5, 5], "round_robin", tf.constant(position, tf.int64))
        np.testing.assert_allclose(got.numpy(), expected.numpy(), err_msg=str(position))


def test_eval_image_preserves_aspect_then_crops_centre():
    # Left half black, right half white, 40 x 80: the central crop of a 1.145x resize keeps
    # both halves, split in the middle.
    image = np.zeros((40, 80, 3), np.uint8)
    image[:, 40:] = 255
    out = image_ops.eval_image(tf.constant(image), 16, "nearest", 0).numpy()
    assert out.shape == (16, 16, 3)
    assert (out[:, :7] == 0).all() and (out[:, 9:] == 255).all()


def test_distorted_crop_respects_area_and_box():
    image = tf.zeros([100, 100, 3], tf.uint8)
    boxes = image_ops.boxes_from_features(tf.constant([0.5]), tf.constant([0.5]),
                                          tf.constant([1.0]), tf.constant([1.0]))
    for i in range(10):
        crop = image_ops.distorted_crop_image(image, boxes, _seed(i))
        h, w = crop.shape[:2]
        assert 0.05 * 100 * 100 * 0.9 <= h * w <= 100 * 100
        assert 0.7 <= w / h <= 1.4


def test_fused_and_unfused_jpeg_crop_agree_in_shape():
    pixels = np.random.default_rng(2).integers(0, 256, (60, 50, 3)).astype(np.uint8)
    jpeg = tf.io.encode_jpeg(pixels)
    fused = image_ops.distorted_crop_jpeg(jpeg, image_ops.no_boxes(), _seed(3), fused=True)
    plain = image_ops.distorted_crop_jpeg(jpeg, image_ops.no_boxes(), _seed(3), fused=False)
    assert fused.shape == plain.shape and fused.shape[2] == 3


def test_hsv_in_yiq_identity_and_greyscale():
    image = tf.constant(np.random.default_rng(3).uniform(0, 1, (4, 4, 3)), tf.float32)
    same = image_ops.adjust_hsv_in_yiq(image, tf.constant(0.0), tf.constant(1.0))
    # TF's RGB<->YIQ matrices are rounded: round trip within 1e-3.
    np.testing.assert_allclose(same.numpy(), image.numpy(), atol=1e-3)
    grey = image_ops.adjust_hsv_in_yiq(image, tf.constant(0.5), tf.constant(0.0)).numpy()
    np.testing.assert_allclose(grey[..., 0], grey[..., 1], atol=1e-5)
    np.testing.assert_allclose(grey[..., 1], grey[..., 2], atol=1e-5)


@pytest.mark.parametrize("in_yiq", [True, False])
def test_distort_color_clips_and_is_seeded(in_yiq):
    image = tf.constant(np.random.default_rng(4).uniform(0, 1, (8, 8, 3)), tf.float32)
    for position in (0, 1):
        a = image_ops.distort_color(image, position, _seed(5), in_yiq).numpy()
        b = image_ops.distort_color(image, position, _seed(5), in_yiq).numpy()
        np.testing.assert_array_equal(a, b)
        assert a.min() >= 0.0 and a.max() <= 1.0
        assert not np.allclose(a, image.numpy())
    if not in_yiq:
        # Saturation and hue are not linear, so the two orders differ (the YIQ change is
        # linear and commutes with contrast).
        even = image_ops.distort_color(image, 0, _seed(5), in_yiq).numpy()
        odd = image_ops.distort_color(image, 1, _seed(5), in_yiq).numpy()
        assert not np.allclose(even, odd)


def test_to_rgb():
    assert image_ops.to_rgb(tf.zeros([2, 2, 1], tf.uint8)).shape == (2, 2, 3)
    assert image_ops.to_rgb(tf.zeros([2, 2, 4], tf.uint8)).shape == (2, 2, 3)
