"""Step functions: one compiled function per training / forward / eval step.

Each step returns one small float32 vector [base_loss, total_loss, top_1, top_5] averaged over
replicas, so the timed loop needs exactly one host round trip per step (the one that the
per-step timing needs anyway).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import keras
import tensorflow as tf

from tfbench.models.fused_bn import FusedBatchNorm

NORM_LAYERS = (keras.layers.BatchNormalization, keras.layers.LayerNormalization,
               keras.layers.GroupNormalization, FusedBatchNorm)


def _all_layers(layer) -> list:
    found = []
    for child in getattr(layer, "layers", []) or []:
        found.append(child)
        found.extend(_all_layers(child))
    return found


def weight_decay_variables(model) -> list:
    """Trainable variables that weight decay applies to: all but normalisation parameters."""
    excluded = {id(v) for layer in _all_layers(model) if isinstance(layer, NORM_LAYERS)
                for v in layer.trainable_variables}
    return [v for v in model.trainable_variables if id(v) not in excluded]


def l2_loss(variables) -> tf.Tensor:
    if not variables:
        return tf.constant(0.0, tf.float32)
    return tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in variables])


def accuracy(logits, labels) -> tuple[tf.Tensor, tf.Tensor]:
    logits = tf.cast(logits, tf.float32)
    top_1 = tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, 1), tf.float32))
    top_5 = tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, 5), tf.float32))
    return top_1, top_5


def cross_entropy(logits, labels) -> tf.Tensor:
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)))


@dataclasses.dataclass
class StepConfig:
    num_label_classes: int        # synthetic labels are drawn from [0, num_label_classes)
    weight_decay: float
    loss_scaling: str = "none"    # none | static | dynamic
    loss_scale: float = 1.0
    accum_steps: int = 1
    compute_accuracy: bool = False
    jit_compile: bool = False


class Steps:
    """Builds the per-step tf.functions for a model, optimizer and strategy."""

    def __init__(self, model, optimizer, strategy: tf.distribute.Strategy, config: StepConfig):
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.config = config
        self.decay_vars = weight_decay_variables(model)
        self._accum = None

    # -- per replica -------------------------------------------------------------------
    def _labels(self, images):
        batch = tf.shape(images)[0]
        return tf.random.uniform([batch], 0, self.config.num_label_classes, dtype=tf.int32)

    def _losses(self, images, labels, training: bool):
        logits = self.model(images, training=training)
        base = cross_entropy(logits, labels)
        total = base + self.config.weight_decay * l2_loss(self.decay_vars) \
            if self.config.weight_decay else base
        return logits, base, total

    def _gradients(self, images, labels):
        cfg = self.config
        replicas = self.strategy.num_replicas_in_sync
        with tf.GradientTape() as tape:
            logits, base, total = self._losses(images, labels, training=True)
            # Gradients are summed across replicas, so each replica's loss is divided.
            objective = total / replicas
            if cfg.loss_scaling == "static":
                objective = objective * cfg.loss_scale
            elif cfg.loss_scaling == "dynamic":
                objective = self.optimizer.scale_loss(objective)
        variables = self.model.trainable_variables
        grads = tape.gradient(objective, variables)
        if cfg.loss_scaling == "static":
            grads = [g / cfg.loss_scale if g is not None else None for g in grads]
        return logits, base, total, grads

    def _metrics(self, logits, labels, base, total):
        if self.config.compute_accuracy:
            top_1, top_5 = accuracy(logits, labels)
        else:
            top_1 = top_5 = tf.constant(0.0)
        return tf.stack([base, total, top_1, top_5])

    def _train_replica(self, images, labels=None):
        cfg = self.config
        variables = self.model.trainable_variables
        if cfg.accum_steps == 1:
            if labels is None:
                labels = self._labels(images)
            logits, base, total, grads = self._gradients(images, labels)
            self.optimizer.apply(grads, variables)
            return self._metrics(logits, labels, base, total)
        # Gradient accumulation: K micro-batches, one update with the mean gradient, which
        # equals one step on the K-times larger batch.
        micro_images = tf.split(images, cfg.accum_steps) if labels is not None else \
            [images] * cfg.accum_steps
        micro_labels = tf.split(labels, cfg.accum_steps) if labels is not None else \
            [self._labels(images) for _ in range(cfg.accum_steps)]
        summed = None
        sums = tf.zeros([4])
        for k in range(cfg.accum_steps):
            logits, base, total, grads = self._gradients(micro_images[k], micro_labels[k])
            summed = grads if summed is None else [a + b for a, b in zip(summed, grads)]
            sums += self._metrics(logits, micro_labels[k], base, total)
        self.optimizer.apply([g / cfg.accum_steps for g in summed], variables)
        return sums / cfg.accum_steps

    def _forward_replica(self, images, labels=None):
        if labels is None:
            labels = self._labels(images)
        logits = self.model(images, training=False)
        top_1, top_5 = accuracy(logits, labels)
        zero = tf.constant(0.0)
        return tf.stack([zero, zero, top_1, top_5])

    # -- compiled steps ----------------------------------------------------------------
    def _compile(self, replica_fn: Callable, from_iterator: bool):
        strategy = self.strategy
        jit = self.config.jit_compile
        single = strategy.num_replicas_in_sync == 1
        inner = tf.function(replica_fn, jit_compile=True) if jit and not single else replica_fn

        def step(inputs):
            if from_iterator:
                images, labels = next(inputs)
                out = strategy.run(inner, args=(images, labels))
            else:
                out = strategy.run(inner, args=(inputs,))
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, out, axis=None)

        # On one device the whole step, optimizer update included, is one XLA cluster.
        return tf.function(step, jit_compile=bool(jit and single and not from_iterator))

    def train_step(self, from_iterator: bool = False):
        return self._compile(self._train_replica, from_iterator)

    def forward_step(self, from_iterator: bool = False):
        return self._compile(self._forward_replica, from_iterator)


def synthetic_images(strategy: tf.distribute.Strategy, batch_size: int, image_size: int,
                     dtype: str, seed: Optional[int] = None):
    """Per-replica images generated once on each compute device and reused every step.

    truncated_normal(mean 127, stddev 60), values in (7, 247), unnormalised, as the legacy
    script's synthetic inputs.
    """
    def make(_context):
        return tf.cast(tf.random.truncated_normal(
            [batch_size, image_size, image_size, 3], mean=127.0, stddev=60.0, seed=seed), dtype)
    return strategy.experimental_distribute_values_from_function(make)
