"""Building blocks with the legacy convnet_builder semantics, as Keras layers.

conv: variance-scaling (fan-in, truncated normal) kernels, bias 0 unless batch norm, ReLU.
affine: truncated-normal kernels with stddev sqrt(2 / fan_in) before ReLU, sqrt(1 / fan_in) for a
linear layer (the logits), bias 0.
Padding "fixed" is the legacy SAME_RESNET / official-models fixed padding: a strided conv pads
(k - 1) // 2 before and the rest after, independent of the input size, then runs VALID.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator, Optional

import keras
from keras import layers, ops

from tfbench.models import affine_grad


def channels(data_format: str) -> str:
    return "channels_first" if data_format == "NCHW" else "channels_last"


def channel_axis(data_format: str) -> int:
    return 1 if data_format == "NCHW" else -1


def image_input(image_size: int, data_format: str, name: str = "images"):
    """(keras Input in NHWC, tensor in the model's layout)."""
    inputs = keras.Input(shape=(image_size, image_size, 3), name=name)
    x = inputs
    if data_format == "NCHW":
        x = layers.Permute((3, 1, 2), name="to_nchw")(x)
    return inputs, x


def require_image_size(image_size: int, minimum: int, model: str) -> None:
    """UsageError when the input is too small for the architecture's strides and VALID pools."""
    from tfbench.errors import UsageError
    if image_size < minimum:
        raise UsageError("--image_size=%d is too small for model %s: it needs at least %d"
                         % (image_size, model, minimum))


@contextlib.contextmanager
def keras_image_data_format(data_format: str) -> Iterator[None]:
    """Temporarily sets Keras' global image data format (keras.applications read it)."""
    saved = keras.config.image_data_format()
    keras.config.set_image_data_format(channels(data_format))
    try:
        yield
    finally:
        keras.config.set_image_data_format(saved)


def float32_logits(x, name: str = "logits_float32"):
    """Casts to float32 (a no-op in fp32; under mixed precision the logits leave as float32)."""
    return layers.Activation("linear", dtype="float32", name=name)(x)


def affine(x, units: int, activation: Optional[str] = "relu", name: Optional[str] = None,
           stddev: Optional[float] = None, dtype=None, bias: float = 0.0,
           kernel_initializer=None):
    fan_in = int(x.shape[-1])
    if kernel_initializer is None:
        init_factor = 2.0 if activation == "relu" else 1.0
        stddev = stddev or math.sqrt(init_factor / fan_in)
        kernel_initializer = keras.initializers.TruncatedNormal(stddev=stddev)
    return affine_grad.Dense(units, activation=activation,
                             kernel_initializer=kernel_initializer,
                             bias_initializer=keras.initializers.Constant(bias), name=name,
                             dtype=dtype)(x)


def logits(x, num_classes: int, name: str = "logits", kernel_initializer=None):
    """The final linear layer; float32 output under any mixed-precision policy."""
    return affine(x, num_classes, activation=None, name=name, dtype="float32",
                  kernel_initializer=kernel_initializer)


def conv(x, filters: int, kernel: int | tuple[int, int], strides: int = 1, padding: str = "same",
         data_format: str = "NHWC", use_batch_norm: bool = False, activation: Optional[str] = "relu",
         stddev: Optional[float] = None, bn_momentum: float = 0.999, bn_epsilon: float = 1e-3,
         bn_scale: bool = False, name: Optional[str] = None, bias: Optional[float] = 0.0):
    """Conv2D [+ batch norm] [+ activation]; bias (initial value) only without batch norm.

    padding: "same", "valid" or "fixed" (see the module docstring). bias=None: no bias at all.
    """
    if stddev is not None:
        init = keras.initializers.TruncatedNormal(stddev=stddev)
    else:
        init = keras.initializers.VarianceScaling(1.0, "fan_in", "truncated_normal")
    if padding == "fixed":
        if strides > 1:
            x = fixed_pad(x, kernel, data_format)
            padding = "valid"
        else:
            padding = "same"
    use_bias = not use_batch_norm and bias is not None
    x = layers.Conv2D(filters, kernel, strides=strides, padding=padding,
                      data_format=channels(data_format), use_bias=use_bias,
                      kernel_initializer=init,
                      bias_initializer=keras.initializers.Constant(bias or 0.0), name=name)(x)
    if use_batch_norm:
        x = batch_norm(x, data_format, momentum=bn_momentum, epsilon=bn_epsilon, scale=bn_scale,
                       name=None if name is None else name + "_bn")
    if activation:
        x = layers.Activation(activation)(x)
    return x


def fixed_pad(x, kernel: int | tuple[int, int], data_format: str):
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    pads = tuple(((k - 1) // 2, k - 1 - (k - 1) // 2) for k in (kh, kw))
    if pads == ((0, 0), (0, 0)):
        return x
    return layers.ZeroPadding2D(pads, data_format=channels(data_format))(x)


def batch_norm(x, data_format: str, momentum: float = 0.999, epsilon: float = 1e-3,
               scale: bool = False, name: Optional[str] = None):
    if len(x.shape) == 4:
        # One fused kernel (as the legacy script): ~12% faster ResNet-50 training on CPU.
        from tfbench.models.fused_bn import FusedBatchNorm
        return FusedBatchNorm(axis=channel_axis(data_format), momentum=momentum,
                              epsilon=epsilon, scale=scale, name=name)(x)
    return layers.BatchNormalization(axis=channel_axis(data_format), momentum=momentum,
                                     epsilon=epsilon, scale=scale, name=name)(x)


def relu(x):
    return layers.ReLU()(x)


def add(tensors):
    return layers.Add()(list(tensors))


def concat(tensors, data_format: str):
    return layers.Concatenate(axis=channel_axis(data_format))(list(tensors))


def dropout(x, rate: float = 0.5):
    """Active only in training, as the legacy dropout (keep_prob = 1 - rate)."""
    return layers.Dropout(rate)(x)


def max_pool(x, size: int, strides: int, padding: str = "valid", data_format: str = "NHWC"):
    return layers.MaxPooling2D(size, strides, padding=padding,
                               data_format=channels(data_format))(x)


def avg_pool(x, size: int, strides: int, padding: str = "valid", data_format: str = "NHWC"):
    return layers.AveragePooling2D(size, strides, padding=padding,
                                   data_format=channels(data_format))(x)


def global_avg_pool(x, data_format: str = "NHWC"):
    return layers.GlobalAveragePooling2D(data_format=channels(data_format))(x)


def flatten(x):
    return layers.Flatten()(x)


class ChannelPad(layers.Layer):
    """Zero-pads the channel axis by `pad` on each side (CIFAR ResNet's parameter-free shortcut)."""

    def __init__(self, pad: int, axis: int, **kwargs):
        super().__init__(**kwargs)
        self.pad = pad
        self.axis = axis

    def call(self, x):
        widths = [[0, 0] for _ in range(len(x.shape))]
        widths[self.axis] = [self.pad, self.pad]
        return ops.pad(x, widths)

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        shape[self.axis] += 2 * self.pad
        return tuple(shape)

    def get_config(self):
        return {**super().get_config(), "pad": self.pad, "axis": self.axis}


def channel_pad(x, pad: int, data_format: str):
    return ChannelPad(pad, channel_axis(data_format))(x)


class LocalResponseNorm(layers.Layer):
    """tf.nn.local_response_normalization over channels (the legacy cifar10 AlexNet's LRN).

    Computed in float32 under any precision, the output cast back to the layer's input dtype:
    LRN and LRNGrad have GPU kernels for float32 only (tensorflow/core/kernels/lrn_op.cc, TF
    2.17 to 2.21) and no bfloat16 kernel on any device, so in float16 soft placement ran them on
    the host every step and in bfloat16 the step could not run at all.
    """

    def __init__(self, depth_radius: int, bias: float, alpha: float, beta: float,
                 data_format: str = "NHWC", **kwargs):
        super().__init__(**kwargs)
        self.depth_radius = depth_radius
        self.bias = bias
        self.alpha = alpha
        self.beta = beta
        self.data_format = data_format

    def call(self, x):
        import tensorflow as tf  # the op exists only in TensorFlow
        if self.data_format == "NCHW":  # the TF op wants channels last
            x = tf.transpose(x, [0, 2, 3, 1])
        y = tf.nn.local_response_normalization(tf.cast(x, tf.float32), self.depth_radius,
                                               self.bias, self.alpha, self.beta)
        y = tf.cast(y, x.dtype)
        if self.data_format == "NCHW":
            y = tf.transpose(y, [0, 3, 1, 2])
        return y

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "depth_radius": self.depth_radius, "bias": self.bias,
                "alpha": self.alpha, "beta": self.beta, "data_format": self.data_format}


def lrn(x, depth_radius: int, bias: float, alpha: float, beta: float, data_format: str = "NHWC"):
    return LocalResponseNorm(depth_radius, bias, alpha, beta, data_format)(x)
