"""CIFAR-10 from python pickle batches written by the test."""

import pickle

import numpy as np
import pytest

from tfbench import data
from tfbench.data import cifar10
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings

PER_FILE = 4


def _write_batches(directory, str_keys=False):
    rng = np.random.default_rng(0)
    written = {}
    for name in ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]:
        images = rng.integers(0, 256, (PER_FILE, 3, 32, 32)).astype(np.uint8)
        labels = list(rng.integers(0, 10, PER_FILE))
        key = (lambda k: k) if str_keys else (lambda k: k.encode())
        with open(directory / name, "wb") as f:
            pickle.dump({key("data"): images.reshape(PER_FILE, 3072), key("labels"): labels,
                         key("batch_label"): "x"}, f)
        written[name] = (images.transpose(0, 2, 3, 1), np.array(labels, np.int32))
    return written


@pytest.mark.parametrize("str_keys", [False, True])
def test_load_converts_chw_to_hwc(tmp_path, str_keys):
    written = _write_batches(tmp_path, str_keys)
    images, labels = cifar10.load(str(tmp_path), train=True)
    assert images.shape == (5 * PER_FILE, 32, 32, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(images[:PER_FILE], written["data_batch_1"][0])
    np.testing.assert_array_equal(labels[-PER_FILE:], written["data_batch_5"][1])
    test_images, _ = cifar10.load(str(tmp_path), train=False)
    np.testing.assert_array_equal(test_images, written["test_batch"][0])


def test_eval_batches_are_the_pixels_normalised(tmp_path):
    written = _write_batches(tmp_path)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "cifar10"})
    ds = data.make_dataset(params, dataset_name="cifar10", image_size=32, batch_size=PER_FILE,
                           train=False, seed=0)
    images, labels = next(iter(ds))
    np.testing.assert_allclose(images.numpy(), written["test_batch"][0] / 127.5 - 1.0,
                               atol=1e-6)
    np.testing.assert_array_equal(labels.numpy(), written["test_batch"][1])


def test_training_with_distortions(tmp_path):
    _write_batches(tmp_path)
    params = make_settings({"data_dir": str(tmp_path), "distortions": True})
    ds = data.make_dataset(params, dataset_name="cifar10", image_size=32, batch_size=8,
                           train=True, seed=0)
    for images, labels in ds.take(3):
        assert images.shape == (8, 32, 32, 3) and labels.shape == (8,)
        assert images.numpy().min() >= -1.0 and images.numpy().max() <= 1.0
        assert labels.numpy().min() >= 0 and labels.numpy().max() <= 9
    # Padding shows as zero pixels (-1 after normalisation) in some crops.
    assert any((images.numpy() == -1.0).all(axis=-1).any() for images, _ in ds.take(3))


def test_missing_and_corrupt_files(tmp_path):
    _write_batches(tmp_path)
    (tmp_path / "data_batch_3").unlink()
    with pytest.raises(UsageError, match="missing data_batch_3 in --data_dir=.*data_batch_1..5"):
        cifar10.load(str(tmp_path), train=True)
    (tmp_path / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(UsageError, match="test_batch is not a CIFAR-10 python batch"):
        cifar10.load(str(tmp_path), train=False)
    with pytest.raises(UsageError, match="does not exist"):
        cifar10.load(str(tmp_path / "nope"), train=True)
