"""Turning TensorFlow input errors into one line that names the bad file.

The tf.data iterator reports a corrupt TFRecord as "corrupted record at N" and a broken JPEG as
"jpeg::Uncompress failed", without the file. Records whose bytes are not an image at all fail an
in-graph assertion that carries the file name (see imagenet.parse, encoded_images.check_image);
for the rest, `explain_data_error` re-reads the files one by one (within a time budget) to find
the first one that fails.
"""

from __future__ import annotations

import glob
import os
import re
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

from tfbench.config import data_source as sources
from tfbench.config.settings import Settings
from tfbench.data import encoded_images, image_ops, imagenet
from tfbench.errors import TfbenchError, UsageError
from tfbench.config.datasets import CIFAR10, IMAGENET

SCAN_BUDGET_SECONDS = 60.0
_DATA_HINTS = ("IteratorGetNext", "Dataset", "Iterator::", "corrupted record", "jpeg", "JPEG",
               "Decode", "decode", "image/", "TFRecord", "not a JPEG/PNG")


def is_data_error(exc: BaseException) -> bool:
    """Whether an exception raised while stepping comes from the input pipeline."""
    if isinstance(exc, (StopIteration, tf.errors.OutOfRangeError, tf.errors.DataLossError)):
        return True
    return isinstance(exc, tf.errors.OpError) and any(h in str(exc) for h in _DATA_HINTS)


def _reason(message: str) -> str:
    """The useful part of a TF error message, on one line."""
    text = re.sub(r"\{\{function_node [^}]*\}\}", "", message)
    text = re.sub(r"\[\[\{\{node [^}]*\}\}\]\]", "", text)
    text = re.sub(r"\[Op:\w+\]( name:\s*\S*)?", "", text)
    text = re.sub(r"Error in user-defined function passed to \S+ transformation with "
                  r"iterator: \S+: ", "", text)
    asserted = re.search(r"assertion failed: ((?:\[[^\]]*\]\s*)+)", text)
    if asserted:
        text = " ".join(re.findall(r"\[([^\]]*)\]", asserted.group(1)))
    text = " ".join(text.split())
    return text.rstrip(" :.") or type(message).__name__


def _decode_check(record: tf.Tensor, filename: tf.Tensor) -> tf.Tensor:
    jpeg, label, boxes, _ = imagenet.parse(record, filename)
    image = tf.io.decode_jpeg(jpeg, channels=3)
    # Also the op the training crop runs, so malformed boxes show up here too.
    begin, _, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image), bounding_boxes=boxes, seed=[0, 0],
        min_object_covered=image_ops.MIN_OBJECT_COVERED, use_image_if_no_bounding_boxes=True)
    return tf.reduce_sum(begin) + label


def check_tfrecord_file(path: str, decode: bool = True) -> None:
    """Reads every record of one file (CRC-checked); with decode, parses and decodes each
    ImageNet example too. Raises tf.errors.OpError on the first bad record."""
    ds = tf.data.TFRecordDataset(path)
    if decode:
        name = tf.constant(path)
        ds = ds.map(lambda r: _decode_check(r, name), num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(lambda r: tf.constant(0))
    ds.reduce(tf.constant(0), lambda total, _: total)


def check_image_file(path: str) -> None:
    encoded_images.decode(encoded_images.check_image(tf.io.read_file(path), tf.constant(path)))


def _files_and_check(params: Settings, train: bool) -> tuple[Sequence[str], Callable[[str], None]]:
    name = sources.resolve_data_name(params.data)
    if name == IMAGENET:
        return imagenet.list_files(params.data.data_dir, train), check_tfrecord_file
    if name == sources.FOLDER:
        from tfbench.data import folder
        return folder.list_images(params.data.data_dir, train)[0], check_image_file
    if name == CIFAR10:
        return [], check_image_file  # read whole in Python: its errors already name the file
    from tfbench.data import tfds_reader
    builder = tfds_reader.load_builder(sources.tfds_name(name), params.data.data_dir)
    files = sorted(glob.glob(os.path.join(builder.data_dir, "*.tfrecord*")))
    return files, lambda path: check_tfrecord_file(path, decode=False)


def find_bad_file(params: Settings, train: bool = True, budget_seconds: float = SCAN_BUDGET_SECONDS
                  ) -> tuple[Optional[str], str, int, int]:
    """(first bad file or None, its error reason, files checked, files in all)."""
    files, check = _files_and_check(params, train)
    deadline = time.monotonic() + budget_seconds
    for checked, path in enumerate(files):
        if time.monotonic() > deadline:
            return None, "", checked, len(files)
        try:
            check(path)
        except tf.errors.OpError as err:
            return path, _reason(str(err)), checked + 1, len(files)
    return None, "", len(files), len(files)


def _named_file(message: str, params: Settings, train: bool) -> Optional[str]:
    try:
        files, _ = _files_and_check(params, train)
    except TfbenchError:
        return None
    # Longest first: train-00001-of-00010 must not match inside train-00001-of-000100.
    for path in sorted(files, key=len, reverse=True):
        if path in message:
            return path
    return None


def explain_data_error(exc: BaseException, params: Settings, train: bool = True,
                       budget_seconds: float = SCAN_BUDGET_SECONDS) -> str:
    """One line naming the file behind an input-pipeline error (see is_data_error)."""
    if isinstance(exc, TfbenchError):
        return str(exc)
    try:
        name = sources.resolve_data_name(params.data)
    except UsageError as err:
        return str(err)
    if isinstance(exc, (StopIteration, tf.errors.OutOfRangeError)):
        where = (sources.tfrecord_pattern(params.data.data_dir, train) if name == IMAGENET
                 else params.data.data_dir)
        return ("the input pipeline produced no batch: no readable examples in %s (empty "
                "files?)" % where)
    message = str(exc)
    reason = _reason(message)
    if _named_file(message, params, train):
        return "bad input data: %s" % reason
    try:
        bad, bad_reason, checked, total = find_bad_file(params, train, budget_seconds)
    except TfbenchError as err:
        return "bad input data under --data_dir=%s: %s (%s)" % (params.data.data_dir, reason, err)
    if bad:
        return "bad input data in %s: %s" % (bad, bad_reason or reason)
    if checked < total:
        return ("bad input data under --data_dir=%s: %s (checked %d of %d files in %.0f s "
                "without finding the bad one)" % (params.data.data_dir, reason, checked, total,
                                                  budget_seconds))
    return "bad input data under --data_dir=%s: %s" % (params.data.data_dir, reason)


def data_error(exc: BaseException, params: Settings, train: bool = True) -> UsageError:
    """The UsageError to raise (exit code 2) for an input-pipeline error."""
    return UsageError(explain_data_error(exc, params, train))
