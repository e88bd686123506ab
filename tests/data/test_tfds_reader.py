"""--data_name=tfds:NAME. tensorflow-datasets is optional: its absence and a missing dataset are
tested with a stand-in module; a real tiny prepared dataset when the package is installed."""

import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from tfbench import data
from tfbench.config import data_source
from tfbench.data import factory, tfds_reader
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings


def test_not_installed_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # import fails
    params = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:mnist"})
    with pytest.raises(UsageError, match="not installed: pip install tensorflow-datasets"):
        data.make_dataset(params, dataset_name="imagenet", image_size=8, batch_size=2,
                          train=True)


def test_prepare_command():
    assert tfds_reader.prepare_command("mnist", "/d") == (
        "python -c \"import tensorflow_datasets as tfds; tfds.builder('mnist', data_dir='/d')"
        ".download_and_prepare()\"")


class _Image:
    pass


def _fake_tfds(prepared=True, num_classes=3, splits=("train", "test")):
    """A stand-in for the few tensorflow_datasets names the reader uses."""
    images = [tf.io.encode_png(np.full((10, 12, 3), 40 * i, np.uint8)).numpy() for i in range(3)]
    labels = [0, 1, 2]
    info = types.SimpleNamespace(
        name="fake", supervised_keys=("image", "label"),
        splits={s: types.SimpleNamespace(num_examples=3) for s in splits},
        features={"image": _Image(), "label": types.SimpleNamespace(num_classes=num_classes)})
    calls = {}

    class Builder:
        def __init__(self, name, data_dir):
            self.info, self.data_dir = info, data_dir
            calls["builder"] = (name, data_dir)

        def is_prepared(self):
            return prepared

        def as_dataset(self, **kwargs):
            calls["as_dataset"] = kwargs
            return tf.data.Dataset.from_tensor_slices((images, labels))

    class NotFound(Exception):
        pass

    def builder(name, data_dir):
        if name == "unknown":
            raise NotFound(name)
        return Builder(name, data_dir)

    module = types.SimpleNamespace(
        builder=builder, ReadConfig=lambda **kw: types.SimpleNamespace(**kw),
        features=types.SimpleNamespace(Image=_Image),
        decode=types.SimpleNamespace(SkipDecoding=lambda: "skip"),
        core=types.SimpleNamespace(registered=types.SimpleNamespace(DatasetNotFoundError=NotFound)))
    return module, calls


def test_missing_dataset_gives_the_prepare_command(monkeypatch, tmp_path):
    module, _ = _fake_tfds(prepared=False)
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", module)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:mnist"})
    with pytest.raises(UsageError) as err:
        data.make_dataset(params, dataset_name="imagenet", image_size=8, batch_size=2, train=True)
    assert "tfds dataset mnist is not prepared under --data_dir=%s" % tmp_path in str(err.value)
    assert tfds_reader.prepare_command("mnist", str(tmp_path)) in str(err.value)
    unknown = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:unknown"})
    with pytest.raises(UsageError, match="knows no dataset 'unknown'"):
        data.num_examples(unknown, "imagenet", True)


def test_element_mapping_with_stand_in(monkeypatch, tmp_path):
    module, calls = _fake_tfds()
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", module)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:fake"})
    assert data.num_examples(params, "cifar10", False) == 3
    ds = data.make_dataset(params, dataset_name="cifar10", image_size=8, batch_size=3,
                           train=False, seed=4)
    images, labels = next(iter(ds))
    assert calls["as_dataset"]["split"] == "test" and calls["as_dataset"]["as_supervised"]
    assert calls["as_dataset"]["decoders"] == {"image": "skip"}
    assert images.shape == (3, 8, 8, 3) and list(labels.numpy()) == [0, 1, 2]
    np.testing.assert_allclose(images.numpy()[:, 0, 0, 0], [40 * i / 127.5 - 1 for i in range(3)],
                               atol=1e-5)


def test_split_and_label_checks(monkeypatch, tmp_path):
    module, _ = _fake_tfds(splits=("extra",))
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", module)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:fake"})
    with pytest.raises(UsageError, match="has no train split \\(it has: extra\\)"):
        data.num_examples(params, "imagenet", True)
    module, _ = _fake_tfds(num_classes=20)
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", module)
    with pytest.raises(UsageError, match="labels up to 19 but the model is a cifar10 model"):
        data.make_dataset(params, dataset_name="cifar10", image_size=8, batch_size=2, train=True)


def test_real_tiny_prepared_dataset(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")

    class TfbenchTinyImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict({
                    "image": tfds.features.Image(shape=(None, None, 3)),
                    "label": tfds.features.ClassLabel(num_classes=3)}),
                supervised_keys=("image", "label"))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(6), "test": self._generate_examples(3)}

        def _generate_examples(self, count):
            for i in range(count):
                yield i, {"image": np.full((12 + i, 10, 3), 20 * i, np.uint8), "label": i % 3}

    TfbenchTinyImages(data_dir=str(tmp_path)).download_and_prepare()
    params = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:tfbench_tiny_images"})
    assert data.num_examples(params, "imagenet", True) == 6
    assert data_source.describe(params.data) == "tfds:tfbench_tiny_images"
    ds = data.make_dataset(params, dataset_name="imagenet", image_size=8, batch_size=4,
                           train=True, seed=1)
    images, labels = next(iter(ds))
    assert images.shape == (4, 8, 8, 3) and set(labels.numpy()) <= {0, 1, 2}
    assert images.numpy().min() >= -1.0 and images.numpy().max() <= 1.0
    missing = make_settings({"data_dir": str(tmp_path / "empty"), "data_name": "tfds:mnist"})
    with pytest.raises(UsageError, match="not prepared.*download_and_prepare"):
        data.num_examples(missing, "imagenet", True)


def test_pipelines_sharing_tfds_data_split_its_records(monkeypatch, tmp_path):
    module, calls = _fake_tfds()
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", module)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:fake"})
    seen = []
    for i in range(2):
        source = factory.make_source(params, dataset_name="cifar10", image_size=8, train=True,
                                     seed=4, shard=data.Shard(i, 2))
        seen.append([int(label) for _, label in source.elements.as_numpy_iterator()])
        # Every pipeline reads the files in one order and keeps its records.
        assert calls["as_dataset"]["shuffle_files"] is False
    assert seen == [[0, 2], [1]]
    sloppy = make_settings({"data_dir": str(tmp_path), "data_name": "tfds:fake",
                          "datasets_sloppy_parallel_interleave": True})
    with pytest.raises(UsageError, match="--datasets_sloppy_parallel_interleave cannot be used "
                                         "when 2 workers or processes share tfds data"):
        data.make_dataset(sloppy, dataset_name="cifar10", image_size=8, batch_size=1,
                          train=True, shard=data.Shard(0, 2))
