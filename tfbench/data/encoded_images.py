"""Preprocessing of encoded images (JPEG, PNG, BMP, GIF) from image folders and tfds.

The recipe follows the model's label space (`dataset_name`):
  imagenet: as the default ImageNet preprocessing (distorted crop sampled from the whole image,
    flip, resize with --resize_method, --distortions colour jitter; eval: aspect-preserving
    resize and central crop; x / 127.5 - 1 or --ml_perf mean subtraction). JPEGs take the fused
    decode-and-crop path (--fuse_decode_and_crop).
  cifar10: resize to S x S; training with --distortions pads by 4, crops S x S at random and
    flips; x / 127.5 - 1.
"""

from __future__ import annotations

import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.data import cifar10, image_ops
from tfbench.config.datasets import CIFAR10

_PNG_MAGIC = b"\x89PNG"
_GIF_MAGIC = b"GIF8"
_BMP_MAGIC = b"BM"


def check_image(data: tf.Tensor, origin: tf.Tensor) -> tf.Tensor:
    """`data` unchanged, after asserting it is a JPEG, PNG, GIF or BMP (message names origin)."""
    head = tf.strings.substr(data, 0, 4)
    known = tf.reduce_any([tf.io.is_jpeg(data), tf.equal(head, _PNG_MAGIC),
                           tf.equal(head, _GIF_MAGIC),
                           tf.equal(tf.strings.substr(data, 0, 2), _BMP_MAGIC)])
    check = tf.debugging.Assert(known, ["not a JPEG/PNG/GIF/BMP image:", origin])
    with tf.control_dependencies([check]):
        return tf.identity(data)


def decode(data: tf.Tensor) -> tf.Tensor:
    image = tf.io.decode_image(data, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return image


def _imagenet_style(data, seed, position, params: Settings, size: int, train: bool) -> tf.Tensor:
    if train:
        seeds = image_ops.split_seed(seed, 2)
        boxes = image_ops.no_boxes()
        crop = tf.cond(
            tf.io.is_jpeg(data),
            lambda: image_ops.distorted_crop_jpeg(data, boxes, seeds[0],
                                                  fused=params.data.fuse_decode_and_crop),
            lambda: image_ops.distorted_crop_image(decode(data), boxes, seeds[0]))
        image = image_ops.finish_train_image(crop, size, seeds[1], position,
                                             params.data.resize_method, params.data.distortions,
                                             params.data.distort_color_in_yiq)
    else:
        image = image_ops.eval_image(decode(data), size, params.data.resize_method, position)
    return image_ops.normalize(image, params.data.ml_perf)


def preprocess(data: tf.Tensor, origin: tf.Tensor, seed: tf.Tensor, position, params: Settings, *,
               size: int, train: bool, dataset_name: str) -> tf.Tensor:
    """Encoded image bytes -> float32 [size, size, 3], normalised."""
    data = check_image(data, origin)
    if dataset_name == CIFAR10:
        return cifar10.preprocess_image(decode(data), seed, size, train and params.data.distortions)
    return _imagenet_style(data, seed, position, params, size, train)


def preprocess_decoded(image: tf.Tensor, seed: tf.Tensor, position, params: Settings, *, size: int,
                       train: bool, dataset_name: str) -> tf.Tensor:
    """The same recipes for an already decoded uint8 image (tfds features that are not Image)."""
    image = image_ops.to_rgb(image)
    if dataset_name == CIFAR10:
        return cifar10.preprocess_image(image, seed, size, train and params.data.distortions)
    if train:
        seeds = image_ops.split_seed(seed, 2)
        crop = image_ops.distorted_crop_image(image, image_ops.no_boxes(), seeds[0])
        out = image_ops.finish_train_image(crop, size, seeds[1], position,
                                           params.data.resize_method, params.data.distortions,
                                           params.data.distort_color_in_yiq)
    else:
        out = image_ops.eval_image(image, size, params.data.resize_method, position)
    return image_ops.normalize(out, params.data.ml_perf)
