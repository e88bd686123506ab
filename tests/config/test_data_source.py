"""Which data a run reads, its names for the header and CSV, and dataset sizes."""

import os

import pytest

from tfbench.config import data_source as sources
from tfbench.data import factory
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").close()


def test_synthetic_describe_and_label():
    p = make_settings({})
    assert not sources.is_real_data(p.data)
    assert sources.describe(p.data) == "imagenet (synthetic)"
    assert sources.describe(p.data, "cifar10") == "cifar10 (synthetic)"
    assert sources.describe(make_settings({"data_name": "cifar10"}).data) == "cifar10 (synthetic)"
    assert sources.data_source_label(p.data) == "synthetic"
    with_dir = make_settings({"data_dir": "/x/imagenet", "use_synthetic_data": True})
    assert sources.data_source_label(with_dir.data) == "synthetic"


def test_guess_from_contents(tmp_path):
    _touch(str(tmp_path / "a" / "train-00000-of-00001"))
    _touch(str(tmp_path / "b" / "data_batch_1"))
    _touch(str(tmp_path / "c" / "dogs" / "x.JPG"))
    _touch(str(tmp_path / "d" / "train" / "dogs" / "x.png"))
    assert sources.guess_data_name(str(tmp_path / "a")) == "imagenet"
    assert sources.guess_data_name(str(tmp_path / "b")) == "cifar10"
    assert sources.guess_data_name(str(tmp_path / "c")) == "folder"
    assert sources.guess_data_name(str(tmp_path / "d")) == "folder"


def test_guess_from_name_legacy_rule(tmp_path):
    (tmp_path / "my_cifar10_copy").mkdir()
    assert sources.guess_data_name(str(tmp_path / "my_cifar10_copy")) == "cifar10"


def test_guess_fails_clearly(tmp_path):
    with pytest.raises(UsageError, match="cannot tell which dataset.*--data_name"):
        sources.guess_data_name(str(tmp_path))
    with pytest.raises(UsageError, match="does not exist"):
        sources.guess_data_name(str(tmp_path / "nope"))


def test_real_describe_label_and_sizes(tmp_path):
    _touch(str(tmp_path / "train-00000-of-00001"))
    p = make_settings({"data_dir": str(tmp_path)})
    assert sources.describe(p.data) == "imagenet"
    assert sources.data_source_label(p.data) == "imagenet_tfrecord"
    assert factory.num_examples(p, "imagenet", True) == 1281167
    assert factory.num_examples(p, "imagenet", False) == 50000
    cached = make_settings({"data_dir": str(tmp_path), "datasets_repeat_cached_sample": True})
    assert sources.data_source_label(cached.data) == "imagenet_tfrecord+cached_sample"
    c = make_settings({"data_dir": str(tmp_path), "data_name": "cifar10"})
    assert sources.describe(c.data) == "cifar10"
    assert sources.data_source_label(c.data) == "cifar10_pickle"
    assert factory.num_examples(c, "cifar10", True) == 50000
    assert factory.num_examples(c, "cifar10", False) == 10000
    t = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:mnist"})
    assert sources.describe(t.data) == "tfds:mnist" \
        and sources.data_source_label(t.data) == "tfds:mnist"


def test_synthetic_sizes_follow_model_dataset():
    assert factory.num_examples(make_settings({}), "cifar10", True) == 50000
    assert factory.num_examples(make_settings({"data_name": "folder"}), "imagenet", False) == 50000


def test_bad_data_name():
    with pytest.raises(UsageError, match="not one of imagenet, cifar10, tfds:NAME, folder"):
        sources.resolve_data_name(make_settings({"data_name": "coco", "data_dir": "/x"}).data)
    with pytest.raises(UsageError):
        sources.resolve_data_name(make_settings({"data_name": "tfds:", "data_dir": "/x"}).data)
