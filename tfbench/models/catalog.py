"""Every registered model: importing this module imports each model module, which registers
its ModelSpec entries (models/registry.py); look models up here.
"""

from __future__ import annotations

from typing import Optional

from tfbench.config.datasets import IMAGENET
from tfbench.errors import UsageError
from tfbench.models import (alexnet, applications, densenet_cifar, googlenet,  # noqa: F401
                            inception, lenet, official_resnet, overfeat, resnet, trivial, vgg,
                            vit)
from tfbench.models.registry import _REGISTRY, ModelSpec, unknown_model


def all_specs() -> list[ModelSpec]:
    return sorted(_REGISTRY.values(), key=lambda s: (s.name, s.dataset))


def names() -> list[str]:
    return sorted({name for name, _ in _REGISTRY})


def datasets_for(name: str) -> list[str]:
    return sorted(d for n, d in _REGISTRY if n == name)


def get(name: str, dataset: Optional[str] = None) -> ModelSpec:
    """The spec for a model name; dataset None picks imagenet, or the only dataset it has."""
    available = datasets_for(name)
    if not available:
        raise UsageError(unknown_model(name, names()))
    if dataset is None:
        dataset = IMAGENET if IMAGENET in available else available[0]
    if (name, dataset) not in _REGISTRY:
        raise UsageError("Invalid model name '%s' for dataset '%s': it exists for %s"
                         % (name, dataset, ", ".join(available)))
    return _REGISTRY[(name, dataset)]
