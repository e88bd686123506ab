"""tfbench.measure.model_table: the shipped parameters and FLOPs cover every registered model at
its default image size and match what tfbench.measure.flops computes now."""

import os

import pytest

from tfbench.measure import flops, model_table
from tfbench.models import catalog


def test_the_table_lists_every_registered_model_at_its_default_size():
    table, versions = model_table.load()
    registered = {(s.name, s.dataset): s.image_size for s in catalog.all_specs()}
    assert {key: row[0] for key, row in table.items()} == registered, (
        "a model was added or changed: run python -m tfbench.measure.model_table")
    assert versions.startswith("TensorFlow ") and ", Keras " in versions


# Cheap models of different families and builders: tfbench's own, Keras Applications, a
# transformer (its parameters depend on the image size too).
@pytest.mark.slow
@pytest.mark.parametrize("name, dataset", [("resnet20", "cifar10"), ("trivial", "imagenet"),
                                           ("mobilenet_v3_small", "imagenet"),
                                           ("vit_tiny", "imagenet")])
def test_a_sample_recomputes_to_the_shipped_figures(name, dataset):
    spec = catalog.get(name, dataset)
    shipped = model_table.load()[0][(name, dataset)]
    assert model_table.compute(spec) == {"name": name, "dataset": dataset,
                                         "image_size": shipped[0], "params": shipped[1],
                                         "flops": shipped[2]}


def test_another_image_size_is_computed(monkeypatch):
    spec = catalog.get("resnet20", "cifar10")
    assert model_table.stats(spec) == model_table.load()[0][("resnet20", "cifar10")][1:]
    assert model_table.stats(spec, 64) == flops.spec_stats(spec, 64)


class _Spec:
    def __init__(self, name, dataset="imagenet", image_size=32):
        self.name, self.dataset, self.image_size = name, dataset, image_size


def _fake_table(monkeypatch, tmp_path, names):
    import keras
    import tensorflow as tf


    computed = []
    monkeypatch.setattr(catalog, "all_specs", lambda: [_Spec(n) for n in names])
    monkeypatch.setattr(model_table, "compute", lambda spec: computed.append(spec.name) or {
        "name": spec.name, "dataset": spec.dataset, "image_size": spec.image_size,
        "params": len(spec.name), "flops": 7})
    versions = "TensorFlow %s, Keras %s" % (tf.__version__, keras.__version__)
    return tmp_path / "stats.csv", computed, versions


def test_adding_a_model_computes_its_row_only_and_a_removed_one_goes(monkeypatch, tmp_path):
    path, computed, versions = _fake_table(monkeypatch, tmp_path, ["a", "b", "new"])
    path.write_text("# computed with %s by x\nname,dataset,image_size,params,flops\n"
                    "a,imagenet,32,100,1\nb,imagenet,32,200,2\ngone,imagenet,32,5,5\n" % versions)
    assert model_table.write(str(path), names=[], log=open(os.devnull, "w")) == 1
    assert computed == ["new"]
    lines = path.read_text().splitlines()[1:]
    assert lines == ["name,dataset,image_size,params,flops", "a,imagenet,32,100,1",
                     "b,imagenet,32,200,2", "new,imagenet,32,3,7"]


def test_a_named_model_is_recomputed_and_all_recomputes_every_row(monkeypatch, tmp_path):
    path, computed, versions = _fake_table(monkeypatch, tmp_path, ["a", "b"])
    path.write_text("# computed with %s by x\nname,dataset,image_size,params,flops\n"
                    "a,imagenet,32,100,1\nb,imagenet,32,200,2\n" % versions)
    model_table.write(str(path), names=["b"], log=open(os.devnull, "w"))
    assert computed == ["b"]
    model_table.write(str(path), names=None, log=open(os.devnull, "w"))
    assert computed == ["b", "a", "b"]


def test_a_partial_update_refuses_a_table_of_another_tensorflow(monkeypatch, tmp_path):
    path, computed, _ = _fake_table(monkeypatch, tmp_path, ["a"])
    path.write_text("# computed with TensorFlow 1.15.5, Keras 2.3.1 by x\n"
                    "name,dataset,image_size,params,flops\na,imagenet,32,100,1\n")
    with pytest.raises(ValueError, match=r"computed with TensorFlow 1\.15\.5, Keras 2\.3\.1, "
                                         r"this is TensorFlow .*--all"):
        model_table.write(str(path), names=["a"], log=open(os.devnull, "w"))
    assert computed == []
