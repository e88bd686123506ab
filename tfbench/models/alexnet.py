"""alexnet: the one-tower AlexNet (imagenet, 227 input) and the TF cifar10-tutorial net (cifar10).

Neither uses batch norm. The legacy reshape to a fixed 256*6*6 is a Flatten here, so other input
sizes work; at the default size the two are the same.
"""

from __future__ import annotations

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import CIFAR10, IMAGENET
from tfbench.models.registry import ModelSpec, register

# 11x11/4 VALID conv then three 3x3/2 VALID max-pools leave at least 1x1 from 67 pixels.
MIN_IMAGE_SIZE = 67


def build_alexnet(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, "alexnet")
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = L.conv(x, 64, 11, 4, padding="valid", data_format=df)
    x = L.max_pool(x, 3, 2, data_format=df)
    x = L.conv(x, 192, 5, data_format=df)
    x = L.max_pool(x, 3, 2, data_format=df)
    for filters in (384, 384, 256):
        x = L.conv(x, filters, 3, data_format=df)
    x = L.max_pool(x, 3, 2, data_format=df)
    x = L.flatten(x)
    for _ in range(2):
        x = L.dropout(L.affine(x, 4096))
    return keras.Model(inputs, L.logits(x, num_classes), name="alexnet")


def build_alexnet_cifar(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = L.conv(x, 64, 5, data_format=df, stddev=5e-2)
    x = L.max_pool(x, 3, 2, padding="same", data_format=df)
    x = L.lrn(x, 4, 1.0, 0.001 / 9.0, 0.75, data_format=df)
    x = L.conv(x, 64, 5, data_format=df, stddev=5e-2, bias=0.1)
    x = L.lrn(x, 4, 1.0, 0.001 / 9.0, 0.75, data_format=df)
    x = L.max_pool(x, 3, 2, padding="same", data_format=df)
    x = L.flatten(x)
    x = L.affine(x, 384, stddev=0.04, bias=0.1)
    x = L.affine(x, 192, stddev=0.04, bias=0.1)
    return keras.Model(inputs, L.logits(x, num_classes), name="alexnet_cifar10")


register(ModelSpec("alexnet", IMAGENET, build_alexnet, 227, 512, 0.005, family="alexnet",
                   min_image_size=MIN_IMAGE_SIZE,
                   description="AlexNet (one tower): 5 convs, 3 max-pools, 2xFC4096 + dropout"))
register(ModelSpec("alexnet", CIFAR10, build_alexnet_cifar, 32, 128, 0.1, family="alexnet",
                   lr_schedule="alexnet_cifar",
                   description="TF cifar10 tutorial net: 2x(conv5x5, LRN, maxpool), FC384, FC192"))
