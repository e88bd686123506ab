"""Batch normalisation as one fused kernel (FusedBatchNormV3), as the legacy script used.

Keras 3's BatchNormalization computes moments and the normalisation as separate ops; the fused
kernel does the forward pass (and the backward pass, through its registered gradient) in one
op, and lets the op update the moving statistics with `exponential_avg_factor`. On the CPU and
on GPUs (cuDNN) this is the fast path.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfbench.models import clone


@keras.saving.register_keras_serializable(package="tfbench")
class FusedBatchNorm(keras.layers.Layer):
    """BatchNormalization over the channel axis of a 4-D tensor with the fused kernel."""

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis
        self.momentum = momentum
        self.epsilon = epsilon
        self.center = center
        self.scale = scale

    def build(self, input_shape):
        if len(input_shape) != 4 or self.axis not in (1, 3, -1):
            raise ValueError("FusedBatchNorm needs NHWC or NCHW input, got shape %s axis %s"
                             % (input_shape, self.axis))
        self.data_format = "NCHW" if self.axis == 1 else "NHWC"
        channels = (int(input_shape[self.axis]),)
        # float32 parameters under any mixed-precision policy: the fused kernel takes them so.
        # Without scale/center there is no variable at all, as in Keras' own layer.
        self.gamma = self.add_weight(shape=channels, name="gamma", initializer="ones",
                                     autocast=False) if self.scale else None
        self.beta = self.add_weight(shape=channels, name="beta", initializer="zeros",
                                    autocast=False) if self.center else None
        self.channels = channels
        # Each replica writes its own batch's statistics and nothing reduces them, as in Keras'
        # BatchNormalization and the legacy script ("none"; tfbench.distribute.variables makes
        # that first-replica where a strategy keeps one copy for all replicas).
        self.moving_mean = self.add_weight(shape=channels, name="moving_mean",
                                           initializer="zeros", trainable=False,
                                           autocast=False, aggregation="none")
        self.moving_variance = self.add_weight(shape=channels, name="moving_variance",
                                               initializer="ones", trainable=False,
                                               autocast=False, aggregation="none")

    def call(self, inputs, training=None, mask=None):
        # `mask` is taken (and unused, as in Keras' layer) so that this layer can stand in for a
        # Keras BatchNormalization node, which records one, in a cloned graph.
        x = tf.convert_to_tensor(inputs)
        if x.dtype == tf.float64:
            x = tf.cast(x, tf.float32)
        gamma = tf.convert_to_tensor(self.gamma) if self.scale else tf.ones(self.channels)
        beta = tf.convert_to_tensor(self.beta) if self.center else tf.zeros(self.channels)
        mean = tf.convert_to_tensor(self.moving_mean)
        variance = tf.convert_to_tensor(self.moving_variance)
        if training:
            y, new_mean, new_variance, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=x, scale=gamma, offset=beta, mean=mean, variance=variance,
                epsilon=self.epsilon, exponential_avg_factor=1.0 - self.momentum,
                data_format=self.data_format, is_training=True)
            self.moving_mean.assign(new_mean)
            self.moving_variance.assign(new_variance)
        else:
            y, _, _, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=x, scale=gamma, offset=beta, mean=mean, variance=variance,
                epsilon=self.epsilon, data_format=self.data_format, is_training=False)
        return y

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(axis=self.axis, momentum=self.momentum, epsilon=self.epsilon,
                      center=self.center, scale=self.scale)
        return config


def _swappable(layer) -> bool:
    """A Keras BatchNormalization that FusedBatchNorm can stand for: over the channels of one
    4-D input, with no regulariser, constraint or cross-replica statistics, and an epsilon
    cuDNN accepts."""
    if type(layer) is not keras.layers.BatchNormalization or layer.synchronized:  # noqa: E721
        return False
    if layer.epsilon < 1.001e-5:
        return False
    if any(getattr(layer, name) is not None for name in (
            "gamma_regularizer", "beta_regularizer", "gamma_constraint", "beta_constraint")):
        return False
    if not isinstance(layer.axis, int) or len(layer._inbound_nodes) != 1:  # noqa: SLF001
        return False
    return len(layer.input.shape) == 4 and layer.axis % 4 in (1, 3)


def with_fused_batch_norm(model: keras.Model) -> keras.Model:
    """`model` with each Keras BatchNormalization over a 4-D tensor's channels computed by
    FusedBatchNorm, and the same weights; `model` itself when it has none.

    Keras' layer runs as separate moment and element-wise ops, which made MobileNet-V2 training
    1.7-1.8x slower on a 2-core CPU. The two differ only in the moving variance, which the fused
    kernel updates with the unbiased batch variance (a factor n / (n - 1) over n = batch x H x W
    values per channel).
    """
    if not any(_swappable(layer) for layer in model.layers):
        return model

    def replace(layer):
        if not _swappable(layer):
            return None
        return FusedBatchNorm(axis=layer.axis, momentum=layer.momentum, epsilon=layer.epsilon,
                              center=layer.center, scale=layer.scale, name=layer.name,
                              dtype=layer.dtype_policy)

    fused = clone.clone_with(model, replace)
    clone.copy_weights(model, fused)
    return fused
