"""densenet40_k12, densenet100_k12, densenet100_k24: the legacy cifar10 DenseNets (no bottleneck,
no compression), which crash in the legacy script on TF2 and work here.

A stem 3x3 conv (bias, no activation), three dense blocks of BN-ReLU-conv3x3 layers concatenated
onto their input, BN-ReLU-conv1x1(+ReLU)-avgpool2x2 transitions, final BN-ReLU and global mean.
Batch norm: decay 0.9, epsilon 1e-5, gamma on. Conv kernels: truncated normal with stddev
sqrt(2 / (9 * output channels)), as the legacy model.
"""

from __future__ import annotations

import functools
import math

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import CIFAR10
from tfbench.models.registry import ModelSpec, register

BN = dict(momentum=0.9, epsilon=1e-5, scale=True)
MIN_IMAGE_SIZE = 4  # two 2x2 VALID average pools
CONFIGS = {"densenet40_k12": (12, 12), "densenet100_k12": (32, 12), "densenet100_k24": (32, 24)}


def _bn_relu(x, df: str):
    return L.relu(L.batch_norm(x, df, **BN))


def build_densenet_cifar(num_classes: int, image_size: int, data_format: str, layers_per_block: int,
                         growth: int, name: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, name)
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = L.conv(x, 16, 3, data_format=df, activation=None)
    for block in range(3):
        for _ in range(layers_per_block):
            y = L.conv(_bn_relu(x, df), growth, 3, data_format=df, activation=None,
                       stddev=math.sqrt(2.0 / 9 / growth))
            x = L.concat([x, y], df)
        if block < 2:
            width = int(x.shape[L.channel_axis(df)])
            x = L.conv(_bn_relu(x, df), width, 1, data_format=df,
                       stddev=math.sqrt(2.0 / 9 / width))
            x = L.avg_pool(x, 2, 2, data_format=df)
    x = L.global_avg_pool(_bn_relu(x, df), df)
    return keras.Model(inputs, L.logits(x, num_classes), name=name)


for _name, (_layers, _growth) in CONFIGS.items():
    register(ModelSpec(
        _name, CIFAR10,
        functools.partial(build_densenet_cifar, layers_per_block=_layers, growth=_growth,
                          name=_name),
        32, 64, 0.1, family="densenet_cifar", lr_schedule="densenet_cifar",
        min_image_size=MIN_IMAGE_SIZE,
        description="CIFAR DenseNet, 3 blocks of %d layers, growth %d" % (_layers, _growth)))
