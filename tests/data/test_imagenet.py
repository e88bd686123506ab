"""The ImageNet TFRecord pipeline on a tiny fake ImageNet."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tfbench import data
from tfbench.data import imagenet
from tfbench.data.fake_imagenet import write_fake_imagenet
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings

SIZE = 24
BATCH = 4


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("imagenet"))
    write_fake_imagenet(out, num_train=24, num_validation=8, num_shards=3, seed=3, image_size=40)
    return out


def _labels_in(files):
    labels = []
    for path in files:
        for record in tf.data.TFRecordDataset(path):
            example = tf.train.Example.FromString(record.numpy())
            labels.append(example.features.feature["image/class/label"].int64_list.value[0])
    return labels


def _batches(params, train, count=2, dtype=tf.float32, seed=5, size=SIZE, batch=BATCH):
    ds = data.make_dataset(params, dataset_name="imagenet", image_size=size, batch_size=batch,
                           train=train, dtype=dtype, seed=seed)
    return [(x.numpy(), y.numpy()) for x, y in ds.take(count)]


@pytest.mark.parametrize("train", [True, False])
def test_batches_shape_dtype_range_labels(fake_dir, train):
    params = make_settings({"data_dir": fake_dir})
    batches = _batches(params, train, count=3)
    split = "train" if train else "validation"
    known = set(_labels_in(sorted(tf.io.gfile.glob(os.path.join(fake_dir, split + "-*")))))
    for images, labels in batches:
        assert images.shape == (BATCH, SIZE, SIZE, 3) and images.dtype == np.float32
        assert labels.shape == (BATCH,) and labels.dtype == np.int32
        assert images.min() >= -1.0 and images.max() <= 1.0
        assert set(labels) <= known and labels.min() >= 1 and labels.max() <= 1000


def test_eval_reads_validation_in_file_order(fake_dir):
    params = make_settings({"data_dir": fake_dir})
    files = imagenet.list_files(fake_dir, train=False)
    # Interleaving 3 files of 3, 3, 2 records one record at a time.
    per_file = [_labels_in([f]) for f in files]
    expected = [lab for group in zip(*per_file) for lab in group] + [per_file[0][-1],
                                                                     per_file[1][-1]]
    got = np.concatenate([y for _, y in _batches(params, False, count=2)])
    assert list(got) == expected


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_dtype(fake_dir, dtype):
    ds = data.make_dataset(make_settings({"data_dir": fake_dir}), dataset_name="imagenet",
                           image_size=SIZE, batch_size=2, train=True, dtype=dtype, seed=1)
    assert ds.element_spec[0].dtype == dtype
    assert ds.element_spec[0].shape.as_list() == [2, SIZE, SIZE, 3]
    assert ds.element_spec[1].dtype == tf.int32


@pytest.mark.slow
def test_same_seed_same_batches_other_seed_differs(fake_dir):
    params = make_settings({"data_dir": fake_dir, "distortions": True,
                          "resize_method": "round_robin"})
    a = _batches(params, True, count=1, seed=11)
    b = _batches(params, True, count=1, seed=11)
    c = _batches(params, True, count=1, seed=12)
    for (xa, ya), (xb, yb) in zip(a, b):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert not all(np.array_equal(xa, xc) for (xa, _), (xc, _) in zip(a, c))


@pytest.mark.parametrize("flags", [
    {"fuse_decode_and_crop": False, "distortions": True, "distort_color_in_yiq": False},
    {"resize_method": "bicubic"},
])
def test_training_variants(fake_dir, flags):
    images, labels = _batches(make_settings({"data_dir": fake_dir, **flags}), True, count=1)[0]
    assert images.shape == (BATCH, SIZE, SIZE, 3)
    assert images.min() >= -1.0 and images.max() <= 1.0


def _write_flat_grey(directory, value, split="validation"):
    os.makedirs(directory, exist_ok=True)
    jpeg = tf.io.encode_jpeg(np.full((30, 50, 3), value, np.uint8), quality=100).numpy()
    example = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[7])),
    }))
    with tf.io.TFRecordWriter(os.path.join(directory, "%s-00000-of-00001" % split)) as w:
        w.write(example.SerializeToString())


def test_normalisation_values(tmp_path):
    _write_flat_grey(str(tmp_path), 100)
    images, labels = _batches(make_settings({"data_dir": str(tmp_path)}), False, count=1)[0]
    assert list(labels) == [7] * BATCH
    np.testing.assert_allclose(images, 100 / 127.5 - 1, atol=1.5 / 127.5)
    mlperf, _ = _batches(make_settings({"data_dir": str(tmp_path), "ml_perf": True}), False, 1)[0]
    np.testing.assert_allclose(mlperf[0, 0, 0], 100 - np.array([123.68, 116.78, 103.94]),
                               atol=1.5)
    official, _ = _batches(make_settings({"data_dir": str(tmp_path),
                                        "input_preprocessor": "official_models_imagenet"}),
                           False, 1)[0]
    np.testing.assert_allclose(official[0, 0, 0], 100 - np.array([123.68, 116.78, 103.94]),
                               atol=1.5)


def test_official_preprocessor_training(fake_dir):
    params = make_settings({"data_dir": fake_dir, "input_preprocessor": "official_models_imagenet"})
    images, _ = _batches(params, True, count=1)[0]
    assert images.shape == (BATCH, SIZE, SIZE, 3)
    assert images.min() >= -123.68 - 1e-3 and images.max() <= 255 - 103.94 + 1e-3


def test_repeat_cached_sample_repeats_one_record(fake_dir):
    params = make_settings({"data_dir": fake_dir, "datasets_repeat_cached_sample": True})
    (images, labels), = _batches(params, False, count=1, batch=6)
    assert len(set(labels)) == 1
    np.testing.assert_array_equal(images[0], images[-1])


def test_dataset_options_from_flags(fake_dir):
    params = make_settings({"data_dir": fake_dir, "datasets_num_private_threads": 3,
                          "datasets_sloppy_parallel_interleave": True,
                          "datasets_use_caching": True,
                          "datasets_parallel_interleave_cycle_length": 2,
                          "datasets_parallel_interleave_prefetch": 2})
    ds = data.make_dataset(params, dataset_name="imagenet", image_size=SIZE, batch_size=BATCH,
                           train=True, seed=1)
    assert ds.options().threading.private_threadpool_size == 3
    assert ds.options().deterministic is False
    images, _ = next(iter(ds))
    assert images.shape == (BATCH, SIZE, SIZE, 3)
    plain = data.make_dataset(make_settings({"data_dir": fake_dir}), dataset_name="imagenet",
                              image_size=SIZE, batch_size=BATCH, train=True, seed=1)
    assert plain.options().deterministic is True


def test_missing_and_empty_directories(tmp_path):
    def make(directory, train=True):
        data.make_dataset(make_settings({"data_dir": directory, "data_name": "imagenet"}),
                          dataset_name="imagenet", image_size=SIZE, batch_size=BATCH,
                          train=train)

    with pytest.raises(UsageError, match="does not exist.*make_fake_imagenet"):
        make(str(tmp_path / "missing"))
    with pytest.raises(UsageError) as err:
        make(str(tmp_path))
    assert "no files matching %s" % os.path.join(str(tmp_path), "train-*-of-*") in str(err.value)
    assert "tfbench make_fake_imagenet --out DIR" in str(err.value)
    (tmp_path / "train-00000-of-00001").write_bytes(b"")
    with pytest.raises(UsageError, match="all 1 files matching .*train-.* are empty"):
        make(str(tmp_path))
    with pytest.raises(UsageError, match="no files matching .*validation-\\*-of-\\*"):
        make(str(tmp_path), train=False)


def test_imagenet_data_needs_an_imagenet_model(fake_dir):
    with pytest.raises(UsageError, match="labels up to 1000 but the model is a cifar10 model"):
        data.make_dataset(make_settings({"data_dir": fake_dir}), dataset_name="cifar10",
                          image_size=SIZE, batch_size=BATCH, train=True)


def test_synthetic_params_rejected():
    with pytest.raises(ValueError):
        data.make_dataset(make_settings({}), dataset_name="imagenet", image_size=SIZE,
                          batch_size=BATCH, train=True)
