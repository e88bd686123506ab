"""Image folders: one sub-directory of JPEG/PNG images per class."""

import numpy as np
import pytest
import tensorflow as tf

from tfbench import data
from tfbench.config import data_source
from tfbench.data import folder
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings


def _write(path, value, png=False, shape=(20, 30, 3)):
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.full(shape, value, np.uint8)
    encoded = tf.io.encode_png(pixels) if png else tf.io.encode_jpeg(pixels, quality=100)
    path.write_bytes(encoded.numpy())


@pytest.fixture()
def flat(tmp_path):
    # Class "b" images are bright, class "a" dark; a PNG, a grey PNG and a nested image.
    _write(tmp_path / "b" / "1.jpg", 250)
    _write(tmp_path / "b" / "2.PNG", 250, png=True)
    _write(tmp_path / "a" / "1.jpeg", 5)
    _write(tmp_path / "a" / "sub" / "2.png", 5, png=True, shape=(16, 16, 1))
    (tmp_path / "a" / "notes.txt").write_text("ignored")
    return tmp_path


def test_list_images_labels_by_sorted_class(flat):
    paths, labels, classes = folder.list_images(str(flat), train=True)
    assert classes == ["a", "b"]
    assert labels == [0, 0, 1, 1]
    assert [p.rsplit("/", 1)[1] for p in paths] == ["1.jpeg", "2.png", "1.jpg", "2.PNG"]
    assert data.num_examples(make_settings({"data_dir": str(flat)}), "imagenet", True) == 4


@pytest.mark.parametrize("train", [True, False])
def test_batches_imagenet_recipe(flat, train):
    params = make_settings({"data_dir": str(flat), "data_name": "folder"})
    ds = data.make_dataset(params, dataset_name="imagenet", image_size=16, batch_size=4,
                           train=train, seed=3)
    images, labels = next(iter(ds))
    assert images.shape == (4, 16, 16, 3) and labels.dtype == tf.int32
    for image, label in zip(images.numpy(), labels.numpy()):
        # Flat images stay flat: dark class 0 near -1, bright class 1 near +1.
        assert abs(image.mean() - (5 if label == 0 else 250) / 127.5 + 1) < 0.05


def test_cifar_recipe_and_split_layout(tmp_path):
    for split in ("train", "val"):
        _write(tmp_path / split / "cat" / "x.png", 10, png=True, shape=(32, 32, 3))
        _write(tmp_path / split / "dog" / "y.png", 200, png=True, shape=(40, 40, 3))
    _write(tmp_path / "train" / "dog" / "z.png", 200, png=True, shape=(40, 40, 3))
    assert folder.num_examples(str(tmp_path), True) == 3
    assert folder.num_examples(str(tmp_path), False) == 2
    params = make_settings({"data_dir": str(tmp_path), "distortions": True})
    assert data_source.describe(params.data) == "folder"
    ds = data.make_dataset(params, dataset_name="cifar10", image_size=32, batch_size=2,
                           train=False, seed=0)
    images, labels = next(iter(ds))
    assert images.shape == (2, 32, 32, 3) and list(labels.numpy()) == [0, 1]
    np.testing.assert_allclose(images.numpy()[0], 10 / 127.5 - 1, atol=1e-5)


def test_train_split_without_validation(tmp_path):
    _write(tmp_path / "train" / "cat" / "x.png", 10, png=True)
    assert folder.list_images(str(tmp_path), True)[2] == ["cat"]
    with pytest.raises(UsageError, match="has a train/ split but no validation/"):
        folder.list_images(str(tmp_path), False)


def test_empty_and_missing(tmp_path):
    (tmp_path / "cls").mkdir()
    with pytest.raises(UsageError, match="no images in the class sub-directories"):
        folder.list_images(str(tmp_path), True)
    with pytest.raises(UsageError, match="does not exist"):
        folder.list_images(str(tmp_path / "missing"), True)


def test_too_many_classes_for_cifar_model(tmp_path):
    for i in range(12):
        _write(tmp_path / ("c%02d" % i) / "x.png", i, png=True, shape=(4, 4, 3))
    params = make_settings({"data_dir": str(tmp_path), "data_name": "folder"})
    with pytest.raises(UsageError, match="labels up to 11 but the model is a cifar10 model"):
        data.make_dataset(params, dataset_name="cifar10", image_size=8, batch_size=2, train=True)
