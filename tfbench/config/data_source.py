"""Which data a run reads: the --data_name / --data_dir rules and its names for the header and
the CSV (data_source), from the run's data settings (config.settings_groups.Data). No
TensorFlow here: a study names a point's data, even one whose run wrote no row, as the run
itself does."""

from __future__ import annotations

import glob
import os

from tfbench.errors import UsageError
from tfbench.config.datasets import CIFAR10, IMAGENET
from tfbench.config.settings_groups import Data

FOLDER = "folder"
TFDS_PREFIX = "tfds:"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")

# --data_name value -> the data_source CSV label.
_SOURCE_LABELS = {IMAGENET: "imagenet_tfrecord", CIFAR10: "cifar10_pickle", FOLDER: "folder"}

CIFAR10_TRAIN_FILES = tuple("data_batch_%d" % i for i in range(1, 6))
CIFAR10_EVAL_FILES = ("test_batch",)


def is_real_data(data: Data) -> bool:
    """True when the run reads --data_dir (not synthetic inputs)."""
    return bool(data.data_dir) and not data.use_synthetic_data


def tfrecord_pattern(data_dir: str, train: bool) -> str:
    """The legacy ImageNet shard pattern: <data_dir>/train-*-of-* or validation-*-of-*."""
    return os.path.join(data_dir, "%s-*-of-*" % ("train" if train else "validation"))


def tfds_name(data_name: str) -> str:
    return data_name[len(TFDS_PREFIX):]


def _check_name(name: str) -> str:
    if name in (IMAGENET, CIFAR10, FOLDER):
        return name
    if name.startswith(TFDS_PREFIX) and tfds_name(name):
        return name
    raise UsageError("--data_name=%s is not one of imagenet, cifar10, tfds:NAME, folder" % name)


def _has_images(directory: str) -> bool:
    with os.scandir(directory) as entries:
        return any(e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS) for e in entries)


def _looks_like_folder(data_dir: str) -> bool:
    with os.scandir(data_dir) as entries:
        subdirs = [e.path for e in entries if e.is_dir()]
    return any(_has_images(d) or _looks_like_folder_split(d) for d in subdirs)


def _looks_like_folder_split(directory: str) -> bool:
    # <data_dir>/train/<class>/*.jpg
    if os.path.basename(directory) not in ("train", "validation", "val"):
        return False
    with os.scandir(directory) as entries:
        return any(e.is_dir() and _has_images(e.path) for e in entries)


MAKE_FAKE_HINT = "create a small one with `tfbench make_fake_imagenet --out DIR`"


def check_data_dir(data_dir: str, name: str = "") -> None:
    """UsageError when --data_dir is no directory: refused before the run says anything of
    it (its header), whether --data_name is given or guessed; for ImageNet, with what it
    expects there and how to make a small one (as its reader says)."""
    if not os.path.isdir(data_dir):
        raise UsageError("--data_dir=%s does not exist or is not a directory%s" % (
            data_dir, " (expected ImageNet TFRecords in the legacy layout; %s)" % MAKE_FAKE_HINT
            if name == IMAGENET else ""))


def guess_data_name(data_dir: str) -> str:
    """The dataset in `data_dir` from its contents, else (legacy rule) from its name."""
    check_data_dir(data_dir)
    if glob.glob(tfrecord_pattern(data_dir, True)) or glob.glob(tfrecord_pattern(data_dir, False)):
        return IMAGENET
    if any(os.path.exists(os.path.join(data_dir, f))
           for f in CIFAR10_TRAIN_FILES + CIFAR10_EVAL_FILES):
        return CIFAR10
    for name in (IMAGENET, CIFAR10):
        if name in data_dir:
            return name
    if _looks_like_folder(data_dir):
        return FOLDER
    raise UsageError(
        "cannot tell which dataset is in --data_dir=%s: expected ImageNet TFRecords "
        "(train-*-of-*, validation-*-of-*), the CIFAR-10 python batches (data_batch_1..5, "
        "test_batch) or one sub-directory of JPEG/PNG images per class; set --data_name="
        "imagenet|cifar10|tfds:NAME|folder (create a small ImageNet with "
        "`tfbench make_fake_imagenet --out DIR`)" % data_dir)


def resolve_data_name(data: Data, default: str = IMAGENET) -> str:
    """imagenet, cifar10, folder or tfds:NAME: --data_name, else guessed from --data_dir, else
    `default` (synthetic data: the model's dataset). A --data_dir that is no directory is
    refused either way (tfds says how to prepare its dataset there itself)."""
    if data.data_name:
        name = _check_name(data.data_name)
        if is_real_data(data) and not name.startswith(TFDS_PREFIX):
            check_data_dir(data.data_dir, name)
        return name
    if not is_real_data(data):
        return default
    return guess_data_name(data.data_dir)


def describe(data: Data, dataset_name: str | None = None) -> str:
    """The header's Dataset value: `imagenet (synthetic)` without data, `imagenet` with it."""
    if not is_real_data(data):
        return "%s (synthetic)" % (data.data_name or dataset_name or IMAGENET)
    return resolve_data_name(data)


def data_source_label(data: Data) -> str:
    """The CSV data_source value: synthetic, imagenet_tfrecord, cifar10_pickle, tfds:NAME or
    folder; `+cached_sample` with --datasets_repeat_cached_sample."""
    if not is_real_data(data):
        return "synthetic"
    name = resolve_data_name(data)
    label = _SOURCE_LABELS.get(name, name)
    if data.datasets_repeat_cached_sample:
        label += "+cached_sample"
    return label
