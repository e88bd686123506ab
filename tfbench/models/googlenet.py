"""googlenet: Inception v1 without batch norm or auxiliary heads.

The final 7x7 VALID average pool of the legacy model is a global average pool here: the same at
224 pixels, and it works at every other size.
"""

from __future__ import annotations

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

# (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection) per inception module; "pool" is a
# 3x3/2 max-pool between stages.
STAGES = (
    (64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64), "pool",
    (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
    (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128), "pool",
    (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128),
)


def inception_v1_module(x, widths, data_format: str):
    df = data_format
    one, three_reduce, three, five_reduce, five, pool_proj = widths
    a = L.conv(x, one, 1, data_format=df)
    b = L.conv(L.conv(x, three_reduce, 1, data_format=df), three, 3, data_format=df)
    c = L.conv(L.conv(x, five_reduce, 1, data_format=df), five, 5, data_format=df)
    d = L.conv(L.max_pool(x, 3, 1, padding="same", data_format=df), pool_proj, 1, data_format=df)
    return L.concat([a, b, c, d], df)


def build_googlenet(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = L.conv(x, 64, 7, 2, data_format=df)
    x = L.max_pool(x, 3, 2, padding="same", data_format=df)
    x = L.conv(x, 64, 1, data_format=df)
    x = L.conv(x, 192, 3, data_format=df)
    x = L.max_pool(x, 3, 2, padding="same", data_format=df)
    for stage in STAGES:
        if stage == "pool":
            x = L.max_pool(x, 3, 2, padding="same", data_format=df)
        else:
            x = inception_v1_module(x, stage, df)
    x = L.global_avg_pool(x, df)
    return keras.Model(inputs, L.logits(x, num_classes), name="googlenet")


register(ModelSpec("googlenet", IMAGENET, build_googlenet, 224, 32, 0.005, family="inception",
                   description="GoogLeNet (Inception v1), no batch norm, no auxiliary heads"))
