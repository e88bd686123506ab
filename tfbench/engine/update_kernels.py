"""Keras' optimizers with each variable's update as one TensorFlow training kernel.

Keras updates a variable with a chain of element-wise ops (plain SGD 2, Nesterov momentum 8,
RMSprop and Adam about a dozen), each a kernel launch per variable per step on a GPU; the legacy
script's TF1 optimizers launch one training kernel per variable. These subclasses keep
everything else of Keras' optimizers (slots, learning-rate schedule, clipping, the
LossScaleOptimizer around them, tf.distribute's update on each variable's device) and replace
only `update_step` by the kernel that computes Keras' own update:

  SGD               ResourceApplyGradientDescent   var -= lr * g
  SGD, momentum     ResourceApplyKerasMomentum     m = mu * m - lr * g; var += m
                                                   (Nesterov: var += mu * m - lr * g)
  RMSprop           ResourceApplyRMSProp           ms = rho * ms + (1 - rho) * g^2;
                                                   mom = mu * mom + lr * g / sqrt(ms + eps);
                                                   var -= mom
  Adam              ResourceApplyAdam              m += (g - m) * (1 - b1); v += (g^2 - v) * (1 - b2);
                                                   var -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m
                                                          / (sqrt(v) + eps), t = iterations + 1

(TensorFlow's training_ops.cc and training_ops_gpu.cu.cc functors;
tests/engine/test_update_kernels.py checks each against Keras' update over several steps.)
Constants enter each kernel as Keras'
update has them (a Python float in the variable's dtype, or cast as Keras casts it), so a float32
or float64 variable gets Keras' values up to the last bits of rounding. Every kernel has CPU and
GPU kernels for half, float and double in the registry of the full wheel (TF 2.17.1 and 2.21.0),
and none on the GPU for bfloat16: a variable of another dtype, or a sparse gradient, keeps
Keras' own update. Variables under mixed precision stay float32. The CPU's own update of plain SGD with the weight decay inside
(ResourceApplyProximalGradientDescent, CPU kernels only) is chosen by device kind in
tfbench.config.fast_paths and applied by tfbench.engine.steps.
"""

from __future__ import annotations

import keras
import tensorflow as tf

KERNELS = ("ResourceApplyGradientDescent", "ResourceApplyKerasMomentum", "ResourceApplyRMSProp",
           "ResourceApplyAdam")
# The dtypes every kernel above has on the GPU (and on the CPU).
FUSED_DTYPES = (tf.float16, tf.float32, tf.float64)


class ReducedByTheStep:
    """The step sums every gradient over the replicas before it calls apply
    (tfbench.distribute.sync.reduce_gradients), so that each pack's all-reduce starts while the
    backward pass runs and the update waits apart; Keras' own all-reduce inside apply
    (TFOptimizer._all_reduce_sum_gradients, Keras 3.8 to 3.15) would sum them a second time.
    Keras' clipping, weight decay and update then see the reduced gradients, as the legacy
    script's (it clips the aggregated gradient)."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)

    def _clip_gradients(self, grads):
        """Keras' clipping, each gradient where it lives: a parameter server's sum is on its
        variable's device (Keras clips in the replica's thread, on its device, and the update
        would copy the gradient there and back). A global norm needs them all together."""
        if self.global_clipnorm:
            return super()._clip_gradients(grads)
        out = []
        for grad in grads:
            if grad is None:
                out.append(None)
                continue
            with tf.device(grad.device):
                out.append(super()._clip_gradients([grad])[0])
        return out


def fused(gradient, variable) -> bool:
    """Whether one training kernel updates `variable` with `gradient`."""
    return (not isinstance(gradient, tf.IndexedSlices)
            and tf.as_dtype(variable.dtype) in FUSED_DTYPES)


def _as(value, dtype) -> tf.Tensor:
    """`value` in `dtype`: exact for a Python number (as Keras' arithmetic with one), a cast
    otherwise (no op when the dtype is already right)."""
    if isinstance(value, (int, float)):
        return tf.constant(value, dtype)
    return tf.cast(value, dtype)


class FusedSGD(ReducedByTheStep, keras.optimizers.SGD):
    """keras.optimizers.SGD, plain or with (Nesterov) momentum, one kernel per variable."""

    def update_step(self, gradient, variable, learning_rate):
        if not fused(gradient, variable):
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        lr, grad = tf.cast(learning_rate, dtype), tf.cast(gradient, dtype)
        if self.momentum == 0:
            tf.raw_ops.ResourceApplyGradientDescent(var=variable.handle, alpha=lr, delta=grad)
            return
        momentum = self.momentums[self._get_variable_index(variable)]
        # Keras casts its momentum (ops.cast), as here.
        tf.raw_ops.ResourceApplyKerasMomentum(
            var=variable.handle, accum=momentum.handle, lr=lr, grad=grad,
            momentum=tf.cast(self.momentum, dtype), use_nesterov=bool(self.nesterov))


class FusedRMSprop(ReducedByTheStep, keras.optimizers.RMSprop):
    """keras.optimizers.RMSprop (not centered), one kernel per variable.

    With momentum 0 Keras keeps no momentum slot, and the kernel needs one (mom = 0 * mom + the
    step): it gets one, as TF1's RMSPropOptimizer (the legacy script's) always had."""

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        if not self._momentums:
            self._momentums = [self.add_variable_from_reference(v, "momentum")
                               for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        if not fused(gradient, variable) or self.centered:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyRMSProp(
            var=variable.handle, ms=self._velocities[index].handle,
            mom=self._momentums[index].handle, lr=tf.cast(learning_rate, dtype),
            rho=_as(self.rho, dtype), momentum=_as(self.momentum, dtype),
            epsilon=_as(self.epsilon, dtype), grad=tf.cast(gradient, dtype))


class FusedAdam(ReducedByTheStep, keras.optimizers.Adam):
    """keras.optimizers.Adam (not AMSGrad), one kernel per variable.

    The bias corrections b1^t and b2^t are computed once per step and variable dtype (Keras
    computes them for each variable, in its dtype, as here) and reach update_step with the
    learning rate."""

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        powers = {}
        for variable in trainable_variables:
            dtype = tf.as_dtype(variable.dtype)
            if dtype in FUSED_DTYPES and dtype.name not in powers:
                step = tf.cast(self.iterations + 1, dtype)
                powers[dtype.name] = (tf.pow(tf.cast(self.beta_1, dtype), step),
                                      tf.pow(tf.cast(self.beta_2, dtype), step))
        super()._backend_update_step(grads, trainable_variables, (learning_rate, powers))

    def update_step(self, gradient, variable, learning_rate):
        learning_rate, powers = learning_rate
        if not fused(gradient, variable) or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        beta_1_power, beta_2_power = powers[tf.as_dtype(dtype).name]
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[index].handle,
            v=self._velocities[index].handle, beta1_power=beta_1_power,
            beta2_power=beta_2_power, lr=tf.cast(learning_rate, dtype),
            beta1=_as(self.beta_1, dtype), beta2=_as(self.beta_2, dtype),
            epsilon=_as(self.epsilon, dtype), grad=tf.cast(gradient, dtype))
