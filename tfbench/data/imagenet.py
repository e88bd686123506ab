"""ImageNet TFRecords in the legacy layout (<data_dir>/train-*-of-*, validation-*-of-*).

Records are tf.train.Examples as written by the TF-slim/tf_cnn_benchmarks `build_imagenet_data`
script; only these keys are read: image/encoded (JPEG), image/class/label (int64, 1..1000, so a
1001-way model's class 0 stays "background"), image/class/text, image/object/bbox/{ymin, xmin,
ymax, xmax} (variable length, fractions of the image).

Preprocessing (--input_preprocessor):
  default (tf_cnn_benchmarks): train = distorted bounding-box crop of the JPEG (fused
    decode_and_crop_jpeg unless --nofuse_decode_and_crop), random left-right flip, resize to S x S
    with --resize_method, with --distortions colour jitter (see image_ops.distort_color);
    eval = decode, aspect-preserving resize to >= 1.145 S, central S x S crop. Then x / 127.5 - 1,
    or with --ml_perf the channel means subtracted (and the crop ignores the boxes, as MLPerf
    requires).
  official_models_imagenet (tensorflow/models official ResNet `imagenet_preprocessing`):
    train = the same distorted crop, always fused, random flip, bilinear resize to S x S;
    eval = decode, resize so the shorter side is 256 * S / 224 (256 at S = 224; the official code
    fixes 256, which cannot be cropped for S > 256), central crop. Then the channel means are
    subtracted (no scaling). --resize_method and --distortions do not apply, as in the legacy
    script.
"""

from __future__ import annotations

import glob
import os

import tensorflow as tf

from tfbench.config import data_source as sources
from tfbench.config.settings import Settings
from tfbench.data import image_ops, pipeline, sharding
from tfbench.errors import UsageError

NUM_LABELS = 1001  # labels 1..1000; 0 is the unused background class
OFFICIAL_RESIZE_MIN = 256  # shorter side before the central crop, for S = 224

_BOX_KEYS = ("image/object/bbox/ymin", "image/object/bbox/xmin",
             "image/object/bbox/ymax", "image/object/bbox/xmax")
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    "image/class/text": tf.io.FixedLenFeature([], tf.string, default_value=""),
    **{key: tf.io.VarLenFeature(tf.float32) for key in _BOX_KEYS},
}



def list_files(data_dir: str, train: bool) -> list[str]:
    """The shards of one split, sorted; UsageError naming what was expected when there are none."""
    pattern = sources.tfrecord_pattern(data_dir, train)
    sources.check_data_dir(data_dir, sources.IMAGENET)
    files = sorted(glob.glob(pattern))
    if not files:
        raise UsageError("no files matching %s (expected ImageNet TFRecords in the legacy "
                         "layout; %s)" % (pattern, sources.MAKE_FAKE_HINT))
    if all(os.path.getsize(f) == 0 for f in files):
        raise UsageError("all %d files matching %s are empty (expected ImageNet TFRecords; %s)"
                         % (len(files), pattern, sources.MAKE_FAKE_HINT))
    return files


def parse(record: tf.Tensor, filename: tf.Tensor):
    """(jpeg bytes, label int32, boxes [1, N, 4], text) of one serialized Example.

    A record whose image is not a JPEG fails with a message naming its file.
    """
    features = tf.io.parse_single_example(record, FEATURES)
    jpeg = features["image/encoded"]
    check = tf.debugging.Assert(tf.io.is_jpeg(jpeg),
                                ["image/encoded is not a JPEG image in a record of", filename])
    with tf.control_dependencies([check]):
        jpeg = tf.identity(jpeg)
    boxes = image_ops.boxes_from_features(
        *[tf.sparse.to_dense(features[key]) for key in _BOX_KEYS])
    label = tf.cast(features["image/class/label"], tf.int32)
    label_check = tf.debugging.Assert(
        tf.logical_and(label >= 0, label < NUM_LABELS),
        ["image/class/label is not in 1..1000: label", label, "in a record of", filename])
    with tf.control_dependencies([label_check]):
        label = tf.identity(label)
    return jpeg, label, boxes, features["image/class/text"]


def records(files: list[str], params: Settings, train: bool, seed,
            shard: sharding.Shard = sharding.WHOLE) -> tf.data.Dataset:
    """(serialized record, its file name) pairs of part `shard`; files shuffled for training,
    read interleaved.

    Several pipelines split the files between them; with fewer files than pipelines each reads
    every file in one fixed order and keeps its share of the records.
    """
    names = tf.data.Dataset.from_tensor_slices(files)

    def open_file(filename):
        return tf.data.TFRecordDataset(filename).map(lambda r: (r, filename))

    if len(files) < shard.count:
        return sharding.by_index(pipeline.interleave_files(names, open_file, params,
                                                           ordered=True), shard)
    names = sharding.by_index(names, shard)
    if train:
        # list_files(shuffle=True) on an already globbed list, without globbing names again.
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return pipeline.interleave_files(names, open_file, params)


def _default_preprocess(jpeg, boxes, seed, position, params: Settings, size: int, train: bool):
    if train:
        seeds = image_ops.split_seed(seed, 2)
        crop = image_ops.distorted_crop_jpeg(jpeg, boxes, seeds[0],
                                             fused=params.data.fuse_decode_and_crop)
        image = image_ops.finish_train_image(crop, size, seeds[1], position,
                                             params.data.resize_method, params.data.distortions,
                                             params.data.distort_color_in_yiq)
    else:
        image = tf.io.decode_jpeg(jpeg, channels=3, dct_method="INTEGER_FAST")
        image = image_ops.eval_image(image, size, params.data.resize_method, position)
    return image_ops.normalize(image, params.data.ml_perf)


def official_preprocess(jpeg, boxes, seed, size: int, train: bool) -> tf.Tensor:
    """The tensorflow/models official ResNet ImageNet preprocessing (see module docstring)."""
    if train:
        seeds = image_ops.split_seed(seed, 2)
        crop = image_ops.distorted_crop_jpeg(jpeg, boxes, seeds[0], fused=True)
        crop = tf.image.stateless_random_flip_left_right(crop, seeds[1])
        image = image_ops.resize(crop, [size, size], "bilinear", 0)
    else:
        image = tf.io.decode_jpeg(jpeg, channels=3)
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        resize_min = round(OFFICIAL_RESIZE_MIN * size / 224)
        new_size = tf.cast(shape * (resize_min / tf.reduce_min(shape)), tf.int32)
        image = image_ops.central_crop(image_ops.resize(image, new_size, "bilinear", 0),
                                       size, size)
    image.set_shape([size, size, 3])
    return image_ops.normalize(image, ml_perf=True)


def source(params: Settings, *, image_size: int, train: bool, seed,
           shard: sharding.Shard = sharding.WHOLE) -> pipeline.Source:
    files = list_files(params.data.data_dir, train)
    official = params.data.input_preprocessor == "official_models_imagenet"

    def preprocess(element, elem_seed, position):
        record, filename = element
        jpeg, label, boxes, _ = parse(record, filename)
        if params.data.ml_perf:
            boxes = image_ops.no_boxes()
        if official:
            image = official_preprocess(jpeg, boxes, elem_seed, image_size, train)
        else:
            image = _default_preprocess(jpeg, boxes, elem_seed, position, params, image_size,
                                        train)
        return image, label

    return pipeline.Source(
        elements=records(files, params, train, seed, shard), preprocess=preprocess,
        shuffle_buffer=pipeline.RECORD_SHUFFLE_BUFFER, num_labels=NUM_LABELS,
        description=sources.tfrecord_pattern(params.data.data_dir, train))
