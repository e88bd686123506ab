"""A fully connected layer whose input gradient avoids oneDNN's slow transposed-weight matmul.

The input gradient of y = x @ W is dy @ W^T. On CPU, TensorFlow runs it as a MatMul with
transpose_b, and oneDNN then rearranges the whole weight matrix on every call. At batch 32 on the
2-core development machine (fp32, ms per call):

    weights (in x out)   dy @ W^T   (W @ dy^T)^T
    25088 x 4096 (VGG)     174.3        52.5
     4096 x 4096 (VGG)      28.6         7.8
     4096 x 1001             3.3         2.9
      512 x   10             0.30        0.36
   154587 x    1             1.81        4.84

The second form reads W in its stored layout and transposes only the small [in, batch] result, so
it wins when the layer is wider than the batch; narrow layers keep the usual form. The forward
pass and the weight gradient are TensorFlow's own, so outputs and gradients are the same up to
floating-point summation order. GPUs (cuBLAS transposes for free) keep the usual gradient: the
rewrite is one of the CPU fast paths (tfbench.config.fast_paths), taken only when a CPU step is traced.
"""

from __future__ import annotations

from typing import Optional

import keras
import tensorflow as tf

from tfbench.config import fast_paths

# The transposed form pays a transpose of [in, batch]; the usual one a pass over [in, out].
MIN_WIDTH = 256


def transposed_input_grad(width: Optional[int], batch: Optional[int]) -> bool:
    """Whether the input gradient of a layer `width` outputs wide, at this batch size, is
    computed as (W @ dy^T)^T."""
    if width is None or width < MIN_WIDTH or (batch is not None and width < batch):
        return False
    return fast_paths.active().dense_input_grad


@tf.custom_gradient
def _matmul_transposed_input_grad(x, kernel):
    def grad(dy):
        dx = tf.transpose(tf.matmul(kernel, dy, transpose_b=True))
        dkernel = tf.matmul(x, dy, transpose_a=True)
        return dx, dkernel
    return tf.matmul(x, kernel), grad


def matmul(x, kernel):
    """x @ kernel for a 2-D x, with the input gradient chosen for the layer's shape."""
    if x.shape.rank == 2 and transposed_input_grad(kernel.shape[-1], x.shape[0]):
        return _matmul_transposed_input_grad(x, kernel)
    return tf.matmul(x, kernel)


@keras.saving.register_keras_serializable(package="tfbench")
class Dense(keras.layers.Dense):
    """keras.layers.Dense with `matmul` above; same variables, config and checkpoints."""

    def call(self, inputs, training=None):
        if len(inputs.shape) != 2 or self.lora_enabled or self.quantization_mode:
            return super().call(inputs, training=training)
        x = matmul(inputs, tf.convert_to_tensor(self.kernel))
        if self.bias is not None:
            x = keras.ops.add(x, self.bias)
        if self.activation is not None:
            x = self.activation(x)
        return x
