"""The legacy tf_cnn_benchmarks ResNets: imagenet resnet50/101/152 (v1, v1.5, v2) and the cifar10
resnet20/32/44/56/110 (v1, v2).

Convs with batch norm use decay 0.9, epsilon 1e-5 and gamma, and no bias. Differences by version:
  v1    stride 2 on the bottleneck's first 1x1 conv; projection shortcut = 1x1 conv + BN; the block
        ends relu(shortcut + residual).
  v1.5  as v1, with the stride on the 3x3 conv instead.
  v2    pre-activation: BN + ReLU at the block start (legacy BN defaults: decay 0.999, eps 1e-3,
        no gamma), stride on the first 1x1 as v1, plain 1x1 conv projection from the
        pre-activation, no BN or ReLU after the last conv, final BN + ReLU before the pool.
The imagenet stem (7x7/2 conv + BN + ReLU, 3x3/2 max-pool) is the same for all versions. The
cifar10 nets shortcut a channel increase with a strided 1x1 average pool plus zero channel
padding (no parameters).
"""

from __future__ import annotations

import functools

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import CIFAR10, IMAGENET
from tfbench.models.registry import ModelSpec, register

BN = dict(use_batch_norm=True, bn_momentum=0.9, bn_epsilon=1e-5, bn_scale=True, bias=None)

IMAGENET_LAYER_COUNTS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
CIFAR_LAYER_COUNTS = {20: 3, 32: 5, 44: 7, 56: 9, 110: 18}


def _shortcut_pool(x, stride: int, df: str):
    return x if stride == 1 else L.avg_pool(x, 1, stride, data_format=df)


def bottleneck_block(x, depth: int, bottleneck: int, stride: int, version: str, df: str):
    in_depth = int(x.shape[L.channel_axis(df)])
    conv = functools.partial(L.conv, data_format=df)
    if version == "v2":
        preact = L.relu(L.batch_norm(x, df))
        if depth == in_depth:
            shortcut = _shortcut_pool(x, stride, df)
        else:
            shortcut = conv(preact, depth, 1, stride, activation=None, bias=None)
        y = conv(preact, bottleneck, 1, stride, **BN)
        y = conv(y, bottleneck, 3, padding="fixed", **BN)
        y = conv(y, depth, 1, activation=None, bias=None)
        return L.add([shortcut, y])
    if depth == in_depth:
        shortcut = _shortcut_pool(x, stride, df)
    else:
        shortcut = conv(x, depth, 1, stride, activation=None, **BN)
    first_stride, middle_stride = (1, stride) if version == "v1.5" else (stride, 1)
    y = conv(x, bottleneck, 1, first_stride, **BN)
    y = conv(y, bottleneck, 3, middle_stride, padding="fixed", **BN)
    y = conv(y, depth, 1, activation=None, **BN)
    return L.relu(L.add([shortcut, y]))


def build_imagenet_resnet(num_classes: int, image_size: int, data_format: str, depth: int,
                          version: str) -> keras.Model:
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = L.conv(x, 64, 7, 2, padding="fixed", data_format=df, **BN)
    x = L.max_pool(x, 3, 2, padding="same", data_format=df)
    for stage, blocks in enumerate(IMAGENET_LAYER_COUNTS[depth]):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            x = bottleneck_block(x, 256 * 2 ** stage, 64 * 2 ** stage, stride, version, df)
    if version == "v2":
        x = L.relu(L.batch_norm(x, df))
    x = L.global_avg_pool(x, df)
    name = "resnet%d%s" % (depth, "" if version == "v1" else "_" + version)
    return keras.Model(inputs, L.logits(x, num_classes), name=name.replace(".", "_"))


def residual_block(x, depth: int, stride: int, version: str, df: str):
    in_depth = int(x.shape[L.channel_axis(df)])
    conv = functools.partial(L.conv, data_format=df)
    shortcut = x
    if in_depth != depth:
        shortcut = L.avg_pool(x, 1, stride, data_format=df)
        shortcut = L.channel_pad(shortcut, (depth - in_depth) // 2, df)
    if version == "v2":
        y = L.relu(L.batch_norm(x, df))
        y = conv(y, depth, 3, stride, **BN)
        y = conv(y, depth, 3, activation=None, bias=None)
        return L.add([shortcut, y])
    y = conv(x, depth, 3, stride, **BN)
    y = conv(y, depth, 3, activation=None, **BN)
    return L.relu(L.add([shortcut, y]))


def build_cifar_resnet(num_classes: int, image_size: int, data_format: str, depth: int,
                       version: str) -> keras.Model:
    df = data_format
    inputs, x = L.image_input(image_size, df)
    # The legacy v1 stem has no ReLU after its batch norm; v2's has.
    x = L.conv(x, 16, 3, data_format=df, activation="relu" if version == "v2" else None, **BN)
    blocks = CIFAR_LAYER_COUNTS[depth]
    for stage, filters in enumerate((16, 32, 64)):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            x = residual_block(x, filters, stride, version, df)
    if version == "v2":
        x = L.relu(L.batch_norm(x, df))
    x = L.global_avg_pool(x, df)
    name = "resnet%d%s" % (depth, "_v2" if version == "v2" else "")
    return keras.Model(inputs, L.logits(x, num_classes), name=name)


for _depth in IMAGENET_LAYER_COUNTS:
    for _version in ("v1", "v1.5", "v2"):
        if _version == "v1.5" and _depth != 50:
            continue  # the legacy script only has resnet50_v1.5
        _name = "resnet%d%s" % (_depth, "" if _version == "v1" else "_" + _version)
        register(ModelSpec(
            _name, IMAGENET,
            functools.partial(build_imagenet_resnet, depth=_depth, version=_version),
            224, 64 if _depth == 50 else 32, 0.128, family="resnet", lr_schedule="resnet",
            description="ResNet-%d %s (tf_cnn_benchmarks layout)" % (_depth, _version)))

for _depth in CIFAR_LAYER_COUNTS:
    for _version in ("v1", "v2"):
        _name = "resnet%d%s" % (_depth, "_v2" if _version == "v2" else "")
        register(ModelSpec(
            _name, CIFAR10,
            functools.partial(build_cifar_resnet, depth=_depth, version=_version),
            32, 128, 0.1, family="resnet_cifar", lr_schedule="cifar_resnet",
            description="CIFAR ResNet-%d %s" % (_depth, _version)))
