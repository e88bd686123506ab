"""Input errors become one line naming the bad file."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tfbench import data
from tfbench.data import data_errors
from tfbench.data.fake_imagenet import write_fake_imagenet
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings


def _first_error(params, train=True, dataset_name="imagenet"):
    ds = data.make_dataset(params, dataset_name=dataset_name, image_size=16, batch_size=2,
                           train=train, seed=0)
    with pytest.raises((tf.errors.OpError, StopIteration)) as err:
        for _ in ds.take(20):
            pass
    return err.value


@pytest.mark.slow
def test_corrupt_record_names_the_file(tmp_path):
    paths = write_fake_imagenet(str(tmp_path), 12, 0, 3, seed=0, image_size=24)
    bad = paths[1]
    raw = bytearray(open(bad, "rb").read())
    raw[len(raw) // 2] ^= 0xFF  # inside some record's data: its CRC no longer matches
    open(bad, "wb").write(bytes(raw))
    params = make_settings({"data_dir": str(tmp_path)})
    exc = _first_error(params)
    assert isinstance(exc, tf.errors.DataLossError)
    assert data.is_data_error(exc)
    line = data.explain_data_error(exc, params, train=True)
    assert line.startswith("bad input data in %s: corrupted record" % bad), line
    assert "\n" not in line
    usage = data.data_error(exc, params)
    assert isinstance(usage, UsageError) and str(usage) == line


def _write_record(path, encoded, label=5):
    example = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }))
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(example.SerializeToString())


def test_record_without_a_jpeg_names_the_file_from_the_message(tmp_path):
    path = os.path.join(str(tmp_path), "validation-00000-of-00001")
    _write_record(path, b"this is not an image")
    params = make_settings({"data_dir": str(tmp_path)})
    exc = _first_error(params, train=False)
    assert path in str(exc)
    line = data.explain_data_error(exc, params, train=False)
    assert line == "bad input data: image/encoded is not a JPEG image in a record of %s" % path


def test_label_out_of_range_names_the_file(tmp_path):
    path = os.path.join(str(tmp_path), "validation-00000-of-00001")
    _write_record(path, tf.io.encode_jpeg(np.zeros((8, 8, 3), np.uint8)).numpy(), label=1001)
    params = make_settings({"data_dir": str(tmp_path)})
    line = data.explain_data_error(_first_error(params, train=False), params, train=False)
    assert "image/class/label is not in 1..1000" in line and "1001" in line and path in line


@pytest.mark.slow
def test_truncated_jpeg_in_folder_found_by_scanning(tmp_path):
    jpeg = tf.io.encode_jpeg(np.random.default_rng(0).integers(0, 255, (32, 32, 3))
                             .astype(np.uint8)).numpy()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "good.jpg").write_bytes(jpeg)
    bad = tmp_path / "b" / "broken.jpg"
    bad.write_bytes(jpeg[:len(jpeg) // 3])
    params = make_settings({"data_dir": str(tmp_path), "data_name": "folder"})
    exc = _first_error(params, train=False)
    assert data.is_data_error(exc)
    line = data.explain_data_error(exc, params, train=False)
    assert line.startswith("bad input data in %s:" % bad), line


def test_scan_budget_and_clean_files(tmp_path):
    write_fake_imagenet(str(tmp_path), 4, 0, 2, seed=0, image_size=16)
    params = make_settings({"data_dir": str(tmp_path)})
    assert data_errors.find_bad_file(params, True) == (None, "", 2, 2)
    assert data_errors.find_bad_file(params, True, budget_seconds=-1) == (None, "", 0, 2)
    line = data.explain_data_error(tf.errors.DataLossError(None, None, "corrupted record at 3"),
                                   params, budget_seconds=-1)
    assert "checked 0 of 2 files" in line and "corrupted record at 3" in line


def test_no_examples_at_all(tmp_path):
    params = make_settings({"data_dir": str(tmp_path), "data_name": "imagenet"})
    line = data.explain_data_error(StopIteration(), params)
    assert "no readable examples in %s" % os.path.join(str(tmp_path), "train-*-of-*") in line


def test_reason_strips_tf_noise():
    message = ("{{function_node __wrapped__IteratorGetNext_output_types_1_device_/job:localhost/"
               "replica:0/task:0/device:CPU:0}} Error in user-defined function passed to "
               "MapDataset:6 transformation with iterator: Iterator::Root::ParallelMapV2: "
               "jpeg::Uncompress failed. Invalid JPEG data or crop window.\n\t [[{{node "
               "DecodeJpeg}}]] [Op:IteratorGetNext] name: ")
    assert data_errors._reason(message) == \
        "jpeg::Uncompress failed. Invalid JPEG data or crop window"


def test_is_data_error():
    assert data.is_data_error(tf.errors.DataLossError(None, None, "x"))
    assert data.is_data_error(StopIteration())
    assert data.is_data_error(tf.errors.InvalidArgumentError(None, None, "[Op:IteratorGetNext]"))
    assert not data.is_data_error(tf.errors.InvalidArgumentError(None, None, "Incompatible "
                                                                             "shapes: [2] vs [3]"))
    assert not data.is_data_error(ValueError("x"))
