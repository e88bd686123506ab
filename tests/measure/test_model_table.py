"""tfbench.measure.model_table: the shipped parameters and FLOPs cover every registered model at
its default image size and match what tfbench.measure.flops computes now."""

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
