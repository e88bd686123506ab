"""official_resnet{18,34,50,101,152,200}[_v2]: the tensorflow/models official (r1) ImageNet ResNets,
rebuilt here so no tensorflow/models checkout is needed.

Differences from the tf_cnn_benchmarks ResNets (resnet.py): batch norm decay 0.997 (epsilon 1e-5,
gamma on) everywhere, fixed padding on every strided conv (the projection too), the stride on
the 3x3 conv of a bottleneck in both versions, basic two-3x3 blocks for 18 and 34 layers, a v2
stem of a bare conv (no BN/ReLU: the first block's pre-activation does it), and a Glorot-uniform
logits layer (tf.layers.dense's default).
"""

from __future__ import annotations

import functools

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

BLOCKS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3),
          152: (3, 8, 36, 3), 200: (3, 24, 36, 3)}
BN = dict(momentum=0.997, epsilon=1e-5, scale=True)
DEFAULT_BATCH = {50: 128, 101: 32, 152: 32}


def _conv(x, filters: int, kernel: int, stride: int, df: str):
    return L.conv(x, filters, kernel, stride, padding="fixed", data_format=df, activation=None,
                  bias=None)


def _bn(x, df: str):
    return L.batch_norm(x, df, **BN)


def _bn_relu(x, df: str):
    return L.relu(_bn(x, df))


def _block(x, filters: int, stride: int, project: bool, bottleneck: bool, v2: bool, df: str):
    """One residual block; filters is the block's inner width (x4 out for a bottleneck)."""
    out_filters = 4 * filters if bottleneck else filters
    if bottleneck:
        convs = ((filters, 1, 1), (filters, 3, stride), (out_filters, 1, 1))
    else:
        convs = ((filters, 3, stride), (filters, 3, 1))
    if v2:
        preact = _bn_relu(x, df)
        shortcut = _conv(preact, out_filters, 1, stride, df) if project else x
        y = preact
        for i, (f, k, s) in enumerate(convs):
            if i > 0:
                y = _bn_relu(y, df)
            y = _conv(y, f, k, s, df)
        return L.add([y, shortcut])
    shortcut = _bn(_conv(x, out_filters, 1, stride, df), df) if project else x
    y = x
    for i, (f, k, s) in enumerate(convs):
        y = _bn(_conv(y, f, k, s, df), df)
        if i < len(convs) - 1:
            y = L.relu(y)
    return L.relu(L.add([y, shortcut]))


def build_official_resnet(num_classes: int, image_size: int, data_format: str, depth: int,
                          v2: bool) -> keras.Model:
    df = data_format
    bottleneck = depth >= 50
    inputs, x = L.image_input(image_size, df)
    x = _conv(x, 64, 7, 2, df)
    if not v2:
        x = _bn_relu(x, df)
    x = L.max_pool(x, 3, 2, padding="same", data_format=df)
    for stage, blocks in enumerate(BLOCKS[depth]):
        for i in range(blocks):
            stride = (2 if stage > 0 else 1) if i == 0 else 1
            x = _block(x, 64 * 2 ** stage, stride, i == 0, bottleneck, v2, df)
    if v2:
        x = _bn_relu(x, df)
    x = L.global_avg_pool(x, df)
    out = L.logits(x, num_classes, kernel_initializer="glorot_uniform")
    return keras.Model(inputs, out, name="official_resnet%d_v%d" % (depth, 2 if v2 else 1))


for _depth in BLOCKS:
    for _v2 in (False, True):
        _batch = DEFAULT_BATCH.get(_depth, 32)
        register(ModelSpec(
            "official_resnet%d%s" % (_depth, "_v2" if _v2 else ""), IMAGENET,
            functools.partial(build_official_resnet, depth=_depth, v2=_v2),
            224, _batch, 0.0125 * _batch / 32, family="official_resnet",
            lr_schedule="official_resnet",
            display_name="official_resnet_%d_v%d" % (_depth, 2 if _v2 else 1),
            description="tensorflow/models official ResNet-%d v%d" % (_depth, 2 if _v2 else 1)))
