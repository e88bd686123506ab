"""vit_tiny: a ViT-Ti/16 (DeiT-Tiny shape) from Keras layers.

16x16 patches embedded by a strided conv, a class token, learned position embeddings, 12
pre-norm encoder blocks (LayerNorm eps 1e-6, 3-head self-attention of width 192, MLP 768 with
GELU), final LayerNorm and a linear head on the class token: about 5.7M parameters.
With data_format="NCHW" the patch embedding runs channels_first; the encoder works on token
sequences and has no layout.
"""

from __future__ import annotations

import keras
from keras import layers, ops

from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

PATCH = 16
WIDTH = 192
DEPTH = 12
HEADS = 3
MLP = 768


class ClassTokenAndPosition(layers.Layer):
    """Prepends a learned class token and adds learned position embeddings."""

    def build(self, input_shape):
        tokens, width = input_shape[1], input_shape[2]
        init = keras.initializers.TruncatedNormal(stddev=0.02)
        self.cls = self.add_weight(shape=(1, 1, width), initializer="zeros", name="cls")
        self.position = self.add_weight(shape=(1, tokens + 1, width), initializer=init,
                                        name="position")

    def call(self, x):
        cls = ops.broadcast_to(ops.cast(self.cls, x.dtype), (ops.shape(x)[0], 1, x.shape[-1]))
        return ops.concatenate([cls, x], axis=1) + ops.cast(self.position, x.dtype)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1] + 1, input_shape[2])


class ClassTokenOutput(layers.Layer):
    """The class token's features: [B, T, C] -> [B, C]."""

    def call(self, x):
        return x[:, 0]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])


def _encoder_block(x):
    init = keras.initializers.TruncatedNormal(stddev=0.02)
    y = layers.LayerNormalization(epsilon=1e-6)(x)
    y = layers.MultiHeadAttention(HEADS, WIDTH // HEADS, kernel_initializer=init)(y, y)
    x = layers.Add()([x, y])
    y = layers.LayerNormalization(epsilon=1e-6)(x)
    y = layers.Dense(MLP, activation="gelu", kernel_initializer=init)(y)
    y = layers.Dense(WIDTH, kernel_initializer=init)(y)
    return layers.Add()([x, y])


def build_vit_tiny(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    L.require_image_size(image_size, PATCH, "vit_tiny")
    inputs, x = L.image_input(image_size, data_format)
    x = layers.Conv2D(WIDTH, PATCH, strides=PATCH, padding="valid",
                      data_format=L.channels(data_format), name="patch_embed")(x)
    if data_format == "NCHW":
        x = layers.Permute((2, 3, 1))(x)
    grid = image_size // PATCH
    x = layers.Reshape((grid * grid, WIDTH))(x)
    x = ClassTokenAndPosition(name="cls_pos")(x)
    for _ in range(DEPTH):
        x = _encoder_block(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    x = ClassTokenOutput(name="class_token")(x)
    return keras.Model(inputs, L.logits(x, num_classes), name="vit_tiny")


register(ModelSpec("vit_tiny", IMAGENET, build_vit_tiny, 224, 64, 0.005, family="vit",
                   min_image_size=PATCH,
                   description="ViT-Ti/16 (DeiT-Tiny): 12 blocks, width 192, 3 heads, MLP 768"))
