"""inception3 and inception4, with the legacy layer order.

Every conv has batch norm with the legacy defaults (decay 0.999, epsilon 1e-3, no gamma) and no
bias, then ReLU. inception3 is built without its auxiliary head (the legacy default). The final
8x8 VALID average pool of inception3 is a global average pool: the same at 299 pixels.
"""

from __future__ import annotations

import functools

import keras

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

# Both stems start 3x3/2 VALID, 3x3 VALID and end in a 3x3/2 VALID reduction, as Keras' own
# InceptionV3 (min 75).
MIN_IMAGE_SIZE = 75


def _ops(data_format: str):
    """conv(x, filters, (kh, kw) or k, strides=1, padding='same') and pools bound to the layout."""
    conv = functools.partial(L.conv, data_format=data_format, use_batch_norm=True)
    mpool = functools.partial(L.max_pool, data_format=data_format)
    apool = functools.partial(L.avg_pool, data_format=data_format)
    return conv, mpool, apool


# --- Inception v3 -----------------------------------------------------------------------------

def _v3_a(x, pool_filters, df):
    conv, _, apool = _ops(df)
    a = conv(x, 64, 1)
    b = conv(conv(x, 48, 1), 64, 5)
    c = conv(conv(conv(x, 64, 1), 96, 3), 96, 3)
    d = conv(apool(x, 3, 1, padding="same"), pool_filters, 1)
    return L.concat([a, b, c, d], df)


def _v3_b(x, df):
    conv, mpool, _ = _ops(df)
    a = conv(x, 384, 3, 2, padding="valid")
    b = conv(conv(conv(x, 64, 1), 96, 3), 96, 3, 2, padding="valid")
    c = mpool(x, 3, 2)
    return L.concat([a, b, c], df)


def _v3_c(x, n, df):
    conv, _, apool = _ops(df)
    a = conv(x, 192, 1)
    b = conv(conv(conv(x, n, 1), n, (1, 7)), 192, (7, 1))
    c = conv(x, n, 1)
    for filters, kernel in ((n, (7, 1)), (n, (1, 7)), (n, (7, 1)), (192, (1, 7))):
        c = conv(c, filters, kernel)
    d = conv(apool(x, 3, 1, padding="same"), 192, 1)
    return L.concat([a, b, c, d], df)


def _v3_d(x, df):
    conv, mpool, _ = _ops(df)
    a = conv(conv(x, 192, 1), 320, 3, 2, padding="valid")
    b = conv(conv(conv(x, 192, 1), 192, (1, 7)), 192, (7, 1))
    b = conv(b, 192, 3, 2, padding="valid")
    c = mpool(x, 3, 2)
    return L.concat([a, b, c], df)


def _v3_e(x, pool: str, df):
    conv, mpool, apool = _ops(df)
    a = conv(x, 320, 1)
    b = conv(x, 384, 1)
    b1, b2 = conv(b, 384, (1, 3)), conv(b, 384, (3, 1))
    c = conv(conv(x, 448, 1), 384, 3)
    c1, c2 = conv(c, 384, (1, 3)), conv(c, 384, (3, 1))
    pooled = (mpool if pool == "max" else apool)(x, 3, 1, padding="same")
    d = conv(pooled, 192, 1)
    return L.concat([a, b1, b2, c1, c2, d], df)


def build_inception3(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, "inception3")
    df = data_format
    conv, mpool, _ = _ops(df)
    inputs, x = L.image_input(image_size, df)
    x = conv(x, 32, 3, 2, padding="valid")
    x = conv(x, 32, 3, padding="valid")
    x = conv(x, 64, 3)
    x = mpool(x, 3, 2)
    x = conv(x, 80, 1, padding="valid")
    x = conv(x, 192, 3, padding="valid")
    x = mpool(x, 3, 2)
    for pool_filters in (32, 64, 64):
        x = _v3_a(x, pool_filters, df)
    x = _v3_b(x, df)
    for n in (128, 160, 160, 192):
        x = _v3_c(x, n, df)
    x = _v3_d(x, df)
    x = _v3_e(x, "avg", df)
    x = _v3_e(x, "max", df)
    x = L.global_avg_pool(x, df)
    return keras.Model(inputs, L.logits(x, num_classes), name="inception3")


# --- Inception v4 -----------------------------------------------------------------------------

def _v4_stem(x, df):
    conv, mpool, _ = _ops(df)
    x = conv(x, 32, 3, 2, padding="valid")
    x = conv(x, 32, 3, padding="valid")
    x = conv(x, 64, 3)
    x = L.concat([mpool(x, 3, 2), conv(x, 96, 3, 2, padding="valid")], df)
    a = conv(conv(x, 64, 1), 96, 3, padding="valid")
    b = conv(x, 64, 1)
    for filters, kernel in ((64, (7, 1)), (64, (1, 7))):
        b = conv(b, filters, kernel)
    b = conv(b, 96, 3, padding="valid")
    x = L.concat([a, b], df)
    return L.concat([conv(x, 192, 3, 2, padding="valid"), mpool(x, 3, 2)], df)


def _v4_a(x, df):
    conv, _, apool = _ops(df)
    a = conv(apool(x, 3, 1, padding="same"), 96, 1)
    b = conv(x, 96, 1)
    c = conv(conv(x, 64, 1), 96, 3)
    d = conv(conv(conv(x, 64, 1), 96, 3), 96, 3)
    return L.concat([a, b, c, d], df)


def _v4_reduction_a(x, df):
    conv, mpool, _ = _ops(df)
    a = mpool(x, 3, 2)
    b = conv(x, 384, 3, 2, padding="valid")
    c = conv(conv(conv(x, 192, 1), 224, 3), 256, 3, 2, padding="valid")
    return L.concat([a, b, c], df)


def _v4_b(x, df):
    conv, _, apool = _ops(df)
    a = conv(apool(x, 3, 1, padding="same"), 128, 1)
    b = conv(x, 384, 1)
    c = conv(conv(conv(x, 192, 1), 224, (1, 7)), 256, (7, 1))
    d = conv(x, 192, 1)
    for filters, kernel in ((192, (1, 7)), (224, (7, 1)), (224, (1, 7)), (256, (7, 1))):
        d = conv(d, filters, kernel)
    return L.concat([a, b, c, d], df)


def _v4_reduction_b(x, df):
    conv, mpool, _ = _ops(df)
    a = mpool(x, 3, 2)
    b = conv(conv(x, 192, 1), 192, 3, 2, padding="valid")
    c = conv(conv(conv(x, 256, 1), 256, (1, 7)), 320, (7, 1))
    c = conv(c, 320, 3, 2, padding="valid")
    return L.concat([a, b, c], df)


def _v4_c(x, df):
    conv, _, apool = _ops(df)
    a = conv(apool(x, 3, 1, padding="same"), 256, 1)
    b = conv(x, 256, 1)
    c = conv(x, 384, 1)
    c1, c2 = conv(c, 256, (1, 3)), conv(c, 256, (3, 1))
    d = conv(conv(conv(x, 384, 1), 448, (1, 3)), 512, (3, 1))
    d1, d2 = conv(d, 256, (3, 1)), conv(d, 256, (1, 3))
    return L.concat([a, b, c1, c2, d1, d2], df)


def build_inception4(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    L.require_image_size(image_size, MIN_IMAGE_SIZE, "inception4")
    df = data_format
    inputs, x = L.image_input(image_size, df)
    x = _v4_stem(x, df)
    for _ in range(4):
        x = _v4_a(x, df)
    x = _v4_reduction_a(x, df)
    for _ in range(7):
        x = _v4_b(x, df)
    x = _v4_reduction_b(x, df)
    for _ in range(3):
        x = _v4_c(x, df)
    x = L.dropout(L.global_avg_pool(x, df), 0.2)
    return keras.Model(inputs, L.logits(x, num_classes), name="inception4")


register(ModelSpec("inception3", IMAGENET, build_inception3, 299, 32, 0.005, family="inception",
                   min_image_size=MIN_IMAGE_SIZE,
                   description="Inception v3, batch norm, no auxiliary head"))
register(ModelSpec("inception4", IMAGENET, build_inception4, 299, 32, 0.005, family="inception",
                   min_image_size=MIN_IMAGE_SIZE,
                   description="Inception v4, batch norm, dropout 0.2 before the logits"))
