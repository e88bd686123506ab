"""lenet (legacy internal name lenet5): the TF MNIST-tutorial LeNet-5 on 28x28 RGB, no BN."""

from __future__ import annotations

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

MIN_IMAGE_SIZE = 4  # two 2x2 VALID max-pools


def build_lenet(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, "lenet")
    inputs, x = L.image_input(image_size, data_format)
    for filters in (32, 64):
        x = L.conv(x, filters, 5, data_format=data_format)
        x = L.max_pool(x, 2, 2, data_format=data_format)
    x = L.affine(L.flatten(x), 512)
    return keras.Model(inputs, L.logits(x, num_classes), name="lenet")


register(ModelSpec("lenet", IMAGENET, build_lenet, 28, 32, 0.005, family="lenet",
                   display_name="lenet5", min_image_size=MIN_IMAGE_SIZE,
                   description="LeNet-5: 2x(conv5x5 + maxpool), FC512"))
