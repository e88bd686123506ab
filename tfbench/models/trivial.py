"""trivial: flatten -> FC(1) -> FC(4096) -> logits; measures framework overhead, not compute."""

from __future__ import annotations

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import CIFAR10, IMAGENET
from tfbench.models.registry import ModelSpec, register


def build_trivial(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    inputs, x = L.image_input(image_size, data_format)
    x = L.flatten(x)
    x = L.affine(x, 1)
    x = L.affine(x, 4096)
    return keras.Model(inputs, L.logits(x, num_classes), name="trivial")


register(ModelSpec("trivial", IMAGENET, build_trivial, 227, 32, 0.005, family="trivial"))
register(ModelSpec("trivial", CIFAR10, build_trivial, 32, 32, 0.005, family="trivial"))
