"""A small ImageNet in the legacy TFRecord layout (`tfbench make_fake_imagenet` writes one).

Real JPEGs of structured pixels (a colour gradient per class, a rectangle "object" matching the
first bounding box, noise), labels 1..1000 with text and synset, 1-2 boxes per image, plus the
other keys build_imagenet_data writes (height, width, colorspace, channels, format, filename).
For tests, and for users to try their input pipeline before copying the real dataset.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from tfbench.errors import UsageError


def _bytes(value: bytes):
    import tensorflow as tf
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _ints(values):
    import tensorflow as tf
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _floats(values):
    import tensorflow as tf
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def _boxes(rng: np.random.Generator) -> np.ndarray:
    """1-2 boxes as rows [ymin, xmin, ymax, xmax], each side 20-90% of the image."""
    count = int(rng.integers(1, 3))
    sizes = rng.uniform(0.2, 0.9, size=(count, 2))
    starts = rng.uniform(0.0, 1.0, size=(count, 2)) * (1.0 - sizes)
    return np.concatenate([starts, starts + sizes], axis=1).astype(np.float32)


def _pixels(rng: np.random.Generator, height: int, width: int, label: int,
            box: np.ndarray) -> np.ndarray:
    hue = np.array([label % 10, (label // 10) % 10, (label // 100) % 10], np.float32) * 25.0
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    image = hue + 80.0 * ys + 60.0 * xs
    y0, x0, y1, x1 = (box * [height, width, height, width]).astype(int)
    image[y0:y1, x0:x1] = 255.0 - hue
    image += rng.normal(0.0, 12.0, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def _example(rng: np.random.Generator, index: int, image_size: int, split: str):
    import tensorflow as tf
    height, width = (int(v) for v in rng.integers(image_size * 3 // 4, image_size * 5 // 4 + 1,
                                                  size=2))
    label = int(rng.integers(1, 1001))
    boxes = _boxes(rng)
    jpeg = tf.io.encode_jpeg(_pixels(rng, height, width, label, boxes[0]), quality=90).numpy()
    feature = {
        "image/height": _ints([height]),
        "image/width": _ints([width]),
        "image/colorspace": _bytes(b"RGB"),
        "image/channels": _ints([3]),
        "image/class/label": _ints([label]),
        "image/class/synset": _bytes(b"n%08d" % label),
        "image/class/text": _bytes(b"fake class %d" % label),
        "image/object/bbox/ymin": _floats(boxes[:, 0]),
        "image/object/bbox/xmin": _floats(boxes[:, 1]),
        "image/object/bbox/ymax": _floats(boxes[:, 2]),
        "image/object/bbox/xmax": _floats(boxes[:, 3]),
        "image/object/bbox/label": _ints([label] * len(boxes)),
        "image/format": _bytes(b"JPEG"),
        "image/filename": _bytes(b"fake_%s_%08d.JPEG" % (split.encode(), index)),
        "image/encoded": _bytes(jpeg),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _write_split(out_dir: str, split: str, count: int, num_shards: int,
                 rng: np.random.Generator, image_size: int) -> list[str]:
    import tensorflow as tf
    shards = max(1, min(num_shards, count))
    paths = []
    for shard in range(shards):
        path = os.path.join(out_dir, "%s-%05d-of-%05d" % (split, shard, shards))
        with tf.io.TFRecordWriter(path) as writer:
            # Shard i holds images i, i + shards, ...: counts differ by at most one.
            for index in range(shard, count, shards):
                writer.write(_example(rng, index, image_size, split).SerializeToString())
        paths.append(path)
    return paths


def write_fake_imagenet(out_dir: str, num_train: int, num_validation: int, num_shards: int,
                        seed: int = 0, image_size: int = 128) -> list[str]:
    """Writes train-*-of-* and validation-*-of-* shards under out_dir; returns their paths.

    Images are about image_size x image_size (each side 75-125% of it). The same seed writes the
    same files.
    """
    if num_train < 1 or num_validation < 0 or num_shards < 1 or image_size < 8:
        raise UsageError("make_fake_imagenet needs --num_images >= 1, --validation_images >= 0, "
                         "--num_shards >= 1 and --image_size >= 8")
    os.makedirs(out_dir, exist_ok=True)
    existing = glob.glob(os.path.join(out_dir, "train-*-of-*")) + \
        glob.glob(os.path.join(out_dir, "validation-*-of-*"))
    if existing:
        raise UsageError("%s already holds ImageNet shards (%s ...); use an empty directory so "
                         "old and new shards do not mix" % (out_dir, sorted(existing)[0]))
    rng = np.random.default_rng(seed)
    paths = _write_split(out_dir, "train", num_train, num_shards, rng, image_size)
    if num_validation:
        paths += _write_split(out_dir, "validation", num_validation, num_shards, rng, image_size)
    return paths
