"""Optimizers and precision policies with the legacy flag meanings."""

from __future__ import annotations

import keras
import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.errors import UsageError
from tfbench.distribute import sync
from tfbench.engine import update_kernels

POLICIES = {"fp32": "float32", "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


def set_policy(precision: str) -> None:
    keras.mixed_precision.set_dtype_policy(POLICIES[precision])


def compute_dtype(precision: str) -> str:
    return {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[precision]


def make_optimizer(p: Settings, learning_rate) -> keras.optimizers.Optimizer:
    """The optimizer for --optimizer; `momentum` is Nesterov momentum, as in the legacy script.
    Each updates a variable with one TensorFlow training kernel (tfbench.engine.update_kernels),
    as the legacy script's TF1 optimizers do."""
    kwargs = {}
    if p.learning.gradient_clip is not None:
        if p.learning.gradient_clip <= 0:
            raise UsageError("--gradient_clip must be positive, got %s" % p.learning.gradient_clip)
        kwargs["clipvalue"] = p.learning.gradient_clip
    if p.learning.optimizer == "sgd":
        return update_kernels.FusedSGD(learning_rate, **kwargs)
    if p.learning.optimizer == "momentum":
        return update_kernels.FusedSGD(learning_rate, momentum=p.learning.momentum, nesterov=True,
                                       **kwargs)
    if p.learning.optimizer == "rmsprop":
        return update_kernels.FusedRMSprop(learning_rate, rho=p.learning.rmsprop_decay,
                                           momentum=p.learning.rmsprop_momentum,
                                           epsilon=p.learning.rmsprop_epsilon, **kwargs)
    if p.learning.optimizer == "adam":
        return update_kernels.FusedAdam(learning_rate, beta_1=p.learning.adam_beta1,
                                        beta_2=p.learning.adam_beta2,
                                        epsilon=p.learning.adam_epsilon, **kwargs)
    raise UsageError("--optimizer=%s is not one of momentum, sgd, rmsprop, adam"
                     % p.learning.optimizer)


class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' dynamic loss scaling, correct on several replicas.

    - "Finite or not" is decided on the reduced gradients: the step sums them over the replicas
      before apply (sync.reduce_gradients), so every replica decides on the same values, as
      Keras assumes when it takes the first replica's answer under a merge call, and each pack's
      all-reduce runs while the backward pass does. Keras 3 would check each replica's own
      gradients, then all-reduce them inside the cond on that answer: every pack waited for the
      whole backward pass, and another replica's overflow reached the weights. Independent
      replicas (no exchange) sum their overflow counts instead (one scalar reduction per step).
    - The scale and its counter are written without a cond. Keras writes them in a cond inside
      the replica context; a strategy that keeps one copy of each variable (CentralStorageStrategy,
      the legacy default --variable_update=parameter_server on several GPUs) can only take that
      write through a merge call, which a cond branch cannot hold, so the step failed there.
    """

    @property
    def iterations(self):
        # Keras 3.8 (TF 2.17's) gives the wrapper a counter of its own that nothing advances,
        # so the global step, checkpoints and summaries stood still; 3.15 returns the inner one.
        return self.inner_optimizer.iterations

    def _stateful_handle_finite_grads(self, grads, trainable_variables):
        variables = trainable_variables or self._trainable_variables
        overwritten = getattr(self, "_overwrite_variable_with_gradient", lambda v: False)
        scale = tf.convert_to_tensor(self.dynamic_scale)
        self.inner_optimizer.apply(
            [g if g is None or overwritten(v) else _unscaled(g, scale)
             for g, v in zip(grads, variables)],
            trainable_variables=trainable_variables)
        grow = tf.equal(self.step_counter, self.dynamic_growth_steps - 1)
        counter = tf.convert_to_tensor(self.step_counter)
        self.step_counter.assign(tf.where(grow, tf.zeros_like(counter), counter + 1))
        self.dynamic_scale.assign(tf.where(grow, scale * 2.0, scale))

    def check_finite(self, grads):
        # Each gradient checked where it lives (a parameter server's sum on its variable's
        # device: Keras checks in replica 0's thread, which would copy every gradient there);
        # only the answers travel.
        answers = []
        for grad in grads:
            if grad is None:
                continue
            values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
            with tf.device(values.device):
                answers.append(tf.reduce_all(tf.math.is_finite(values)))
        finite = tf.reduce_all(tf.stack(answers)) if answers else tf.constant(True)
        context = tf.distribute.get_replica_context()
        strategy = tf.distribute.get_strategy()
        if context is None or context.num_replicas_in_sync == 1 \
                or sync.reduces_gradients(strategy):
            return finite
        # Each replica holds its own gradients: any replica's overflow skips the step for all
        # (Keras applies one replica's answer to every replica).
        overflow = 1.0 - tf.cast(finite, tf.float32)
        overflows = context.merge_call(
            lambda strategy, value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None),
            args=(overflow,))
        return tf.equal(overflows, 0.0)


def _unscaled(grad, scale):
    # Where the reduced gradient is: a parameter server's sum lives on its variable's device,
    # which the update reads; on the replica's device it would be copied there and back.
    with tf.device(grad.device):
        return grad / scale

