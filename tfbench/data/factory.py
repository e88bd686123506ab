"""make_dataset: the real-data input pipeline for one run (see tfbench.data for the contract)."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfbench.config import data_source as sources
from tfbench.config.settings import Settings
from tfbench.data import cifar10, folder, imagenet, pipeline, sharding, tfds_reader
from tfbench.errors import UsageError
from tfbench.config.datasets import (CIFAR10, IMAGENET, NUM_CLASSES, NUM_EVAL_EXAMPLES,
                                     NUM_TRAIN_EXAMPLES)


def make_source(params: Settings, *, dataset_name: str, image_size: int, train: bool, seed,
                shard: sharding.Shard = sharding.WHOLE) -> pipeline.Source:
    name = sources.resolve_data_name(params.data, default=dataset_name)
    if name == IMAGENET:
        return imagenet.source(params, image_size=image_size, train=train, seed=seed,
                               shard=shard)
    if name == CIFAR10:
        return cifar10.source(params, image_size=image_size, train=train, seed=seed, shard=shard)
    if name == sources.FOLDER:
        return folder.source(params, image_size=image_size, train=train, seed=seed,
                             dataset_name=dataset_name, shard=shard)
    return tfds_reader.source(params, name=sources.tfds_name(name), image_size=image_size,
                              train=train, seed=seed, dataset_name=dataset_name, shard=shard)


def make_dataset(params: Settings, *, dataset_name: str, image_size: int, batch_size: int,
                 train: bool, dtype=tf.float32, seed: int | None = None,
                 shard: sharding.Shard = sharding.WHOLE) -> tf.data.Dataset:
    """Batches (images [B, S, S, 3] NHWC in `dtype`, labels int32 [B]), repeating forever, of
    part `shard` of the data."""
    if not sources.is_real_data(params.data):
        raise ValueError("make_dataset reads --data_dir; synthetic inputs need no pipeline")
    if dataset_name not in NUM_CLASSES:
        raise ValueError("dataset_name must be one of %s, got %r" % (sorted(NUM_CLASSES),
                                                                     dataset_name))
    if batch_size < 1 or image_size < 1:
        raise ValueError("batch_size and image_size must be positive")
    seed = sharding.seed_for(params.workload.tf_random_seed if seed is None else seed, shard)
    source = make_source(params, dataset_name=dataset_name, image_size=image_size, train=train,
                         seed=seed, shard=shard)
    if source.num_labels > NUM_CLASSES[dataset_name]:
        raise UsageError(
            "%s has labels up to %d but the model is a %s model with %d outputs; choose a "
            "model for that label space" % (source.description, source.num_labels - 1,
                                            dataset_name, NUM_CLASSES[dataset_name]))
    return pipeline.build(source, params, batch_size=batch_size, train=train, dtype=dtype,
                          seed=seed)


@dataclasses.dataclass(frozen=True)
class SplitSize:
    """The examples per epoch of one split, and what the data's own count found."""
    num_examples: int
    # '' for the legacy constants; tfds and folders: `9 images in 1 class (plots) in DIR`.
    found: str = ""


def split_size(params: Settings, dataset_name: str, train: bool) -> SplitSize:
    """Examples per epoch of the train (or validation) split.

    ImageNet and cifar10 use the legacy constants (1,281,167 / 50,000 and 50,000 / 10,000)
    whatever the files hold, as the legacy script does; tfds and folders count their data, and
    say what they found.
    """
    name = sources.resolve_data_name(params.data, default=dataset_name)
    if not sources.is_real_data(params.data) and name not in (IMAGENET, CIFAR10):
        name = dataset_name
    if name in (IMAGENET, CIFAR10):
        return SplitSize((NUM_TRAIN_EXAMPLES if train else NUM_EVAL_EXAMPLES)[name])
    if name == sources.FOLDER:
        return SplitSize(*folder.found(params.data.data_dir, train))
    return SplitSize(*tfds_reader.found(sources.tfds_name(name), params.data.data_dir, train))


def num_examples(params: Settings, dataset_name: str, train: bool) -> int:
    """Examples per epoch of the train (or validation) split (split_size)."""
    return split_size(params, dataset_name, train).num_examples
