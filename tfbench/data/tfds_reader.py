"""--data_name=tfds:NAME: a tensorflow-datasets image classification dataset already prepared
under --data_dir. Never downloads. tensorflow-datasets is optional (pip install
tensorflow-datasets).

NAME is anything tfds.builder accepts ("imagenette/320px", "cifar10:3.0.2"), including datasets
prepared from custom builders (read back from their files). The dataset must have supervised keys
(image, label); labels are used as they are (0..K-1). Splits: `train` for training, `validation`
(else `test`) for evaluation. Image features are read undecoded and decoded in tfbench's own
parallel map (see encoded_images).
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.data import encoded_images, pipeline, sharding
from tfbench.errors import UsageError

INSTALL = "pip install tensorflow-datasets"
EVAL_SPLITS = ("validation", "test")


def import_tfds():
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise UsageError("--data_name=tfds:NAME needs the tensorflow-datasets package, which is "
                         "not installed: %s" % INSTALL) from None
    return tfds


def prepare_command(name: str, data_dir: str) -> str:
    """The command that downloads and prepares NAME under data_dir."""
    return ("python -c \"import tensorflow_datasets as tfds; tfds.builder(%r, data_dir=%r)"
            ".download_and_prepare()\"" % (name, data_dir))


def load_builder(name: str, data_dir: str):
    """The builder of a prepared dataset; UsageError (with the prepare command) otherwise."""
    if not data_dir:
        raise UsageError("--data_name=tfds:%s needs --data_dir (where the dataset is prepared)"
                         % name)
    tfds = import_tfds()
    not_prepared = ("tfds dataset %s is not prepared under --data_dir=%s; prepare it (this "
                    "downloads it) with: %s" % (name, data_dir, prepare_command(name, data_dir)))
    if not os.path.isdir(data_dir):
        raise UsageError(not_prepared)
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        raise UsageError("tensorflow-datasets knows no dataset %r and none is prepared under "
                         "--data_dir=%s" % (name, data_dir)) from None
    except (ValueError, FileNotFoundError) as err:
        raise UsageError("cannot open tfds dataset %s under --data_dir=%s: %s"
                         % (name, data_dir, str(err).splitlines()[0] if str(err) else err)) \
            from None
    if not builder.is_prepared():
        raise UsageError(not_prepared)
    return builder


def split_name(builder, train: bool) -> str:
    splits = list(builder.info.splits.keys())
    wanted = ("train",) if train else EVAL_SPLITS
    for name in wanted:
        if name in splits:
            return name
    raise UsageError("tfds dataset %s has no %s split (it has: %s)"
                     % (builder.info.name, " or ".join(wanted), ", ".join(sorted(splits))))


def supervised_features(builder) -> tuple[str, str]:
    keys = builder.info.supervised_keys
    if not keys or len(keys) != 2 or not all(isinstance(k, str) for k in keys):
        raise UsageError("tfds dataset %s is not an (image, label) classification dataset: its "
                         "supervised keys are %r" % (builder.info.name, keys))
    return keys[0], keys[1]


def num_classes(builder) -> int:
    _, label_key = supervised_features(builder)
    feature = builder.info.features[label_key]
    count = getattr(feature, "num_classes", None)
    if not count:
        raise UsageError("tfds dataset %s: label feature %r is not a ClassLabel"
                         % (builder.info.name, label_key))
    return int(count)


def num_examples(name: str, data_dir: str, train: bool) -> int:
    return found(name, data_dir, train)[0]


def found(name: str, data_dir: str, train: bool) -> tuple[int, str]:
    """(examples, what was found) of one split: `60,000 examples in the train split of tfds
    mnist in DIR`."""
    builder = load_builder(name, data_dir)
    split = split_name(builder, train)
    count = int(builder.info.splits[split].num_examples)
    return count, "{:,} example{} in the {} split of tfds {} in {}".format(
        count, "" if count == 1 else "s", split, name, data_dir)


def source(params: Settings, *, name: str, image_size: int, train: bool, seed, dataset_name: str,
           shard: sharding.Shard = sharding.WHOLE) -> pipeline.Source:
    tfds = import_tfds()
    builder = load_builder(name, params.data.data_dir)
    split = split_name(builder, train)
    if not shard.whole and params.data.datasets_sloppy_parallel_interleave:
        # Pipelines split tfds' records by position, which needs the same order in each.
        raise UsageError("--datasets_sloppy_parallel_interleave cannot be used when %d workers "
                         "or processes share tfds data: their shares would overlap"
                         % shard.count)
    image_key, label_key = supervised_features(builder)
    encoded = isinstance(builder.info.features[image_key], tfds.features.Image)
    read_config = tfds.ReadConfig(shuffle_seed=seed if shard.whole else None,
                                  try_autocache=False)
    if params.data.datasets_parallel_interleave_cycle_length:
        read_config.interleave_cycle_length = params.data.datasets_parallel_interleave_cycle_length
    ds = builder.as_dataset(
        split=split, shuffle_files=train and shard.whole, as_supervised=True,
        read_config=read_config,
        decoders={image_key: tfds.decode.SkipDecoding()} if encoded else None)
    ds = sharding.by_index(ds, shard)   # records by position, before decoding
    origin = "a record of tfds %s (%s split) under %s" % (name, split, params.data.data_dir)

    def preprocess(element, elem_seed, position):
        image, label = element
        if encoded:
            out = encoded_images.preprocess(image, origin, elem_seed, position, params,
                                            size=image_size, train=train,
                                            dataset_name=dataset_name)
        else:
            out = encoded_images.preprocess_decoded(
                tf.cast(image, tf.uint8), elem_seed, position, params, size=image_size,
                train=train, dataset_name=dataset_name)
        return out, label

    return pipeline.Source(
        elements=ds, preprocess=preprocess,
        shuffle_buffer=pipeline.RECORD_SHUFFLE_BUFFER, num_labels=num_classes(builder),
        description="tfds %s (%s split) under %s" % (name, split, params.data.data_dir))
