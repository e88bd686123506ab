"""vgg11, vgg16, vgg19: 3x3 convs with bias and ReLU (no batch norm), 5 max-pools, 2xFC4096."""

from __future__ import annotations

import functools

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

MIN_IMAGE_SIZE = 32  # five 2x2 VALID max-pools
STAGE_FILTERS = (64, 128, 256, 512, 512)
CONVS_PER_STAGE = {"vgg11": (1, 1, 2, 2, 2), "vgg16": (2, 2, 3, 3, 3), "vgg19": (2, 2, 4, 4, 4)}


def build_vgg(num_classes: int, image_size: int, data_format: str, name: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, name)
    inputs, x = L.image_input(image_size, data_format)
    for filters, count in zip(STAGE_FILTERS, CONVS_PER_STAGE[name]):
        for _ in range(count):
            x = L.conv(x, filters, 3, data_format=data_format)
        x = L.max_pool(x, 2, 2, data_format=data_format)
    x = L.flatten(x)
    for _ in range(2):
        x = L.dropout(L.affine(x, 4096))
    return keras.Model(inputs, L.logits(x, num_classes), name=name)


for _name, _counts in CONVS_PER_STAGE.items():
    register(ModelSpec(_name, IMAGENET, functools.partial(build_vgg, name=_name), 224, 64, 0.005,
                       family="vgg", min_image_size=MIN_IMAGE_SIZE,
                       description="VGG, %d weight layers, no batch norm" % (sum(_counts) + 3)))
