"""Image folders: one sub-directory of JPEG/PNG (also BMP, GIF) images per class.

  <data_dir>/<class>/**/<image>                 the same images for training and evaluation, or
  <data_dir>/train/<class>/..., <data_dir>/validation (or val)/<class>/...   separate splits
                                                (a train/ directory means this layout).

Labels are the classes' indices in sorted name order (0..K-1), taken from the training split so
both splits agree. Paths are listed once when the pipeline is built and shuffled for
training; files are read in a parallel map, decoded and preprocessed in another (see
encoded_images).
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfbench.config import data_source as sources
from tfbench.config.settings import Settings
from tfbench.data import encoded_images, pipeline, sharding
from tfbench.errors import UsageError

LAYOUT = ("expected one sub-directory of JPEG/PNG images per class: DIR/<class>/<image>.jpg, "
          "or DIR/train/<class>/... and DIR/validation/<class>/...")


def split_root(data_dir: str, train: bool) -> str:
    """The directory whose sub-directories are the classes of this split."""
    if not os.path.isdir(data_dir):
        raise UsageError("--data_dir=%s does not exist or is not a directory (%s)"
                         % (data_dir, LAYOUT))
    train_dir = os.path.join(data_dir, "train")
    if not os.path.isdir(train_dir):
        return data_dir
    if train:
        return train_dir
    for name in ("validation", "val"):
        if os.path.isdir(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    raise UsageError("%s has a train/ split but no validation/ (or val/) split to evaluate on "
                     "(%s)" % (data_dir, LAYOUT))


def class_names(data_dir: str) -> list[str]:
    root = split_root(data_dir, train=True)
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))


def list_images(data_dir: str, train: bool) -> tuple[list[str], list[int], list[str]]:
    """(image paths, labels, class names) of one split, in sorted order."""
    classes = class_names(data_dir)
    root = split_root(data_dir, train)
    paths, labels = [], []
    for label, name in enumerate(classes):
        class_dir = os.path.join(root, name)
        for dirpath, dirnames, filenames in os.walk(class_dir):
            dirnames.sort()
            for filename in sorted(filenames):
                if filename.lower().endswith(sources.IMAGE_EXTENSIONS):
                    paths.append(os.path.join(dirpath, filename))
                    labels.append(label)
    if not paths:
        raise UsageError("no images in the class sub-directories of %s (%s)" % (root, LAYOUT))
    return paths, labels, classes


def num_examples(data_dir: str, train: bool) -> int:
    return len(list_images(data_dir, train)[0])


def found(data_dir: str, train: bool) -> tuple[int, str]:
    """(images, what was found) of one split: `9 images in 1 class (plots) in DIR`, the
    classes named up to five."""
    paths, _, classes = list_images(data_dir, train)
    shown = ", ".join(classes[:5]) + (", ..." if len(classes) > 5 else "")
    return len(paths), "%s in %s (%s) in %s" % (
        _count(len(paths), "image"), _count(len(classes), "class"), shown,
        split_root(data_dir, train))


def _count(n: int, noun: str) -> str:
    """'1 image', '1,281,167 images', '2 classes'."""
    return "{:,} {}".format(n, noun if n == 1 else noun + ("es" if noun.endswith("s") else "s"))


def source(params: Settings, *, image_size: int, train: bool, seed, dataset_name: str,
           shard: sharding.Shard = sharding.WHOLE) -> pipeline.Source:
    paths, labels, classes = list_images(params.data.data_dir, train)
    sharding.check_enough(len(paths), shard, split_root(params.data.data_dir, train))

    names = tf.data.Dataset.from_tensor_slices((paths, tf.constant(labels, tf.int32)))
    names = sharding.by_index(names, shard)   # images by index in sorted order
    if train:
        # Shuffle the whole (tiny) path list, as list_files does for TFRecord shards.
        names = names.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    # Read in parallel before the shared tail, so --datasets_use_caching caches the bytes.
    files = names.map(lambda path, label: (tf.io.read_file(path), path, label),
                      num_parallel_calls=pipeline.AUTOTUNE)

    def preprocess(element, elem_seed, position):
        data, path, label = element
        image = encoded_images.preprocess(
            data, path, elem_seed, position, params, size=image_size, train=train,
            dataset_name=dataset_name)
        return image, label

    return pipeline.Source(
        elements=files, preprocess=preprocess,
        shuffle_buffer=min(len(paths), pipeline.RECORD_SHUFFLE_BUFFER), num_labels=len(classes),
        description=split_root(params.data.data_dir, train))
