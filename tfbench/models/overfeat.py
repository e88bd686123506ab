"""overfeat: the OverFeat 'fast' network at 231x231, no batch norm."""

from __future__ import annotations

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

# 11x11/4 VALID, 2x2 pool, 5x5 VALID, 2x2 pool, 2x2 pool leave at least 1x1 from 71 pixels.
MIN_IMAGE_SIZE = 71


def build_overfeat(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, "overfeat")
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = L.conv(x, 96, 11, 4, padding="valid", data_format=df)
    x = L.max_pool(x, 2, 2, data_format=df)
    x = L.conv(x, 256, 5, padding="valid", data_format=df)
    x = L.max_pool(x, 2, 2, data_format=df)
    for filters in (512, 1024, 1024):
        x = L.conv(x, filters, 3, data_format=df)
    x = L.max_pool(x, 2, 2, data_format=df)
    x = L.flatten(x)
    x = L.dropout(L.affine(x, 3072))
    x = L.dropout(L.affine(x, 4096))
    return keras.Model(inputs, L.logits(x, num_classes), name="overfeat")


register(ModelSpec("overfeat", IMAGENET, build_overfeat, 231, 32, 0.005, family="overfeat",
                   min_image_size=MIN_IMAGE_SIZE,
                   description="OverFeat fast: 5 convs, 3 max-pools, FC3072, FC4096 + dropout"))
