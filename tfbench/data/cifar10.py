"""CIFAR-10 from the python pickle batches (cifar-10-python.tar.gz, extracted).

<data_dir>/data_batch_1..5 (training) and test_batch (evaluation), each a pickled dict with
'data' (N x 3072 uint8, channel-major: 1024 red, 1024 green, 1024 blue) and 'labels' (0..9).
The whole split is held in memory. Training with --distortions: zero-pad to 40 x 40, random
32 x 32 crop, random flip; then x / 127.5 - 1 (other images are used as they are).
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import tensorflow as tf

from tfbench.config import data_source as sources
from tfbench.config.settings import Settings
from tfbench.data import image_ops, pipeline, sharding
from tfbench.errors import UsageError

SIZE = 32
PAD = 4
NUM_LABELS = 10  # labels 0..9 (the legacy cifar10 models have 11 outputs)
EXPECTED = ("expected the CIFAR-10 python batches data_batch_1..5 and test_batch, from "
            "cifar-10-python.tar.gz extracted")


def _field(batch: dict, name: str):
    if name in batch:
        return batch[name]
    return batch.get(name.encode())


def _load_file(path: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        data, labels = _field(batch, "data"), _field(batch, "labels")
        data = np.asarray(data, dtype=np.uint8)
        labels = np.asarray(labels, dtype=np.int32)
        if data is None or data.ndim != 2 or data.shape[1] != 3 * SIZE * SIZE \
                or labels.shape != (data.shape[0],):
            raise ValueError("need 'data' N x 3072 and N 'labels'")
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            KeyError) as err:
        raise UsageError("%s is not a CIFAR-10 python batch (%s; %s)" % (path, err, EXPECTED)) \
            from None
    if labels.size and (labels.min() < 0 or labels.max() >= NUM_LABELS):
        raise UsageError("%s has labels outside 0..9 (%s)" % (path, EXPECTED))
    # CHW rows -> NHWC images
    return data.reshape(-1, 3, SIZE, SIZE).transpose(0, 2, 3, 1), labels


def load(data_dir: str, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, 32, 32, 3], labels int32 [N]) of one split."""
    if not os.path.isdir(data_dir):
        raise UsageError("--data_dir=%s does not exist or is not a directory (%s)"
                         % (data_dir, EXPECTED))
    names = sources.CIFAR10_TRAIN_FILES if train else sources.CIFAR10_EVAL_FILES
    missing = [n for n in names if not os.path.isfile(os.path.join(data_dir, n))]
    if missing:
        raise UsageError("missing %s in --data_dir=%s (%s)" % (", ".join(missing), data_dir,
                                                               EXPECTED))
    parts = [_load_file(os.path.join(data_dir, n)) for n in names]
    images = np.concatenate([p[0] for p in parts])
    if not len(images):
        raise UsageError("the CIFAR-10 batches in %s hold no images" % data_dir)
    return images, np.concatenate([p[1] for p in parts])


def preprocess_image(image: tf.Tensor, seed: tf.Tensor, size: int, distort: bool) -> tf.Tensor:
    """uint8 [h, w, 3] -> float32 [size, size, 3] in [-1, 1]."""
    image = tf.cast(image, tf.float32)
    if image.shape[0] != size or image.shape[1] != size:
        image = image_ops.resize(image, [size, size], "bilinear", 0)
    if distort:
        seeds = image_ops.split_seed(seed, 2)
        image = tf.image.resize_with_crop_or_pad(image, size + 2 * PAD, size + 2 * PAD)
        image = tf.image.stateless_random_crop(image, [size, size, 3], seeds[0])
        image = tf.image.stateless_random_flip_left_right(image, seeds[1])
    image.set_shape([size, size, 3])
    return image_ops.normalize(image)


def source(params: Settings, *, image_size: int, train: bool, seed,
           shard: sharding.Shard = sharding.WHOLE) -> pipeline.Source:
    images, labels = load(params.data.data_dir, train)
    description = os.path.join(params.data.data_dir, "data_batch_*" if train else "test_batch")
    sharding.check_enough(len(images), shard, description)
    distort = train and params.data.distortions

    def preprocess(element, elem_seed, position):
        image, label = element
        return preprocess_image(image, elem_seed, image_size, distort), label

    return pipeline.Source(
        elements=sharding.by_index(tf.data.Dataset.from_tensor_slices((images, labels)), shard),
        preprocess=preprocess, shuffle_buffer=len(images), num_labels=NUM_LABELS,
        description=description)
