"""Learning-rate schedules with the legacy precedence and step arithmetic.

Precedence: --piecewise_learning_rate_schedule, then --init_learning_rate (with optional
staircase decay and floor), then the model's default schedule. Linear warm-up applies to the first
two. Boundaries use the legacy integer arithmetic so step-exact values match.

Steps are optimizer iterations and `batch` is the images one iteration trains on (legacy
examples_per_step): the global batch, or one worker's on a parameter-server cluster, where
every worker's update is an iteration. An epoch is `num_examples` images, the size of the data
trained on (the legacy constants for imagenet and cifar10), in the model defaults too.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import keras
import tensorflow as tf

from tfbench.config.settings import parse_piecewise
from tfbench.config.settings import Settings


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A schedule as plain numbers: piecewise values, optional decay, floor and warm-up."""
    boundaries: tuple[int, ...] = ()
    values: tuple[float, ...] = (0.0,)
    decay_steps: int = 0            # staircase exponential decay of values[0] when > 0
    decay_factor: float = 1.0
    minimum: float = 0.0
    warmup_steps: int = 0
    warmup_target: float = 0.0


def schedule_for(p: Settings, spec, batch: int, num_examples: int) -> tuple[Schedule, list[str]]:
    """The schedule for the settings `p` and ModelSpec `spec`; also notices for ignored flags."""
    batches_per_epoch = num_examples / batch
    notices: list[str] = []
    if p.learning.piecewise_learning_rate_schedule:
        rates, epochs = parse_piecewise(p.learning.piecewise_learning_rate_schedule)
        schedule = Schedule(tuple(int(e * batches_per_epoch) - 1 for e in epochs), tuple(rates))
        warm_target = rates[0]
    elif p.learning.init_learning_rate is not None:
        schedule = Schedule(values=(p.learning.init_learning_rate,))
        if p.learning.num_epochs_per_decay > 0 and p.learning.learning_rate_decay_factor > 0:
            schedule = dataclasses.replace(
                schedule, decay_steps=int(batches_per_epoch * p.learning.num_epochs_per_decay),
                decay_factor=p.learning.learning_rate_decay_factor,
                minimum=p.learning.minimum_learning_rate)
        warm_target = p.learning.init_learning_rate
    else:
        if p.learning.num_learning_rate_warmup_epochs:
            notices.append("--num_learning_rate_warmup_epochs has no effect without "
                           "--init_learning_rate or --piecewise_learning_rate_schedule "
                           "(as in tf_cnn_benchmarks)")
        return model_default_schedule(spec, batch, p.learning.resnet_base_lr, num_examples), notices
    if p.learning.num_learning_rate_warmup_epochs > 0:
        schedule = dataclasses.replace(
            schedule,
            warmup_steps=int(batches_per_epoch * p.learning.num_learning_rate_warmup_epochs),
            warmup_target=warm_target)
    return schedule, notices


def model_default_schedule(spec, batch: int, resnet_base_lr: Optional[float],
                           num_examples: int) -> Schedule:
    """The model's own schedule (legacy models' get_learning_rate), its epochs of
    `num_examples` (the data's: for synthetic data the model dataset's legacy constant)."""
    kind = spec.lr_schedule
    if kind == "resnet":
        base = resnet_base_lr if resnet_base_lr is not None else 0.128
        rescaled = base * batch / 256
        per_epoch = num_examples / batch
        return Schedule(boundaries=tuple(int(per_epoch * e) for e in (30, 60, 80, 90)),
                        values=tuple(rescaled * v for v in (1, 0.1, 0.01, 0.001, 0.0001)),
                        warmup_steps=int(per_epoch * 5), warmup_target=rescaled)
    if kind == "official_resnet":
        adjusted = spec.learning_rate / spec.batch_size * batch
        per_epoch = num_examples / batch
        return Schedule(boundaries=tuple(int(per_epoch * e) for e in (30, 60, 80, 90)),
                        values=tuple(adjusted * v for v in (1, 0.1, 0.01, 0.001, 0.0001)))
    if kind == "cifar_resnet":
        per_epoch = num_examples // batch
        return Schedule(boundaries=tuple(per_epoch * e for e in (82, 123, 300)),
                        values=(0.1, 0.01, 0.001, 0.0002))
    if kind == "densenet_cifar":
        per_epoch = num_examples // batch
        return Schedule(boundaries=tuple(per_epoch * e for e in (150, 225, 300)),
                        values=(0.1, 0.01, 0.001, 0.0001))
    if kind == "alexnet_cifar":
        return Schedule(values=(spec.learning_rate,), decay_steps=100 * num_examples // batch,
                        decay_factor=0.1)
    if kind == "constant":
        return Schedule(values=(spec.learning_rate,))
    raise ValueError("unknown learning-rate schedule %r for model %s" % (kind, spec.name))


@keras.saving.register_keras_serializable(package="tfbench")
class KerasSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A Schedule evaluated in TensorFlow on the optimizer's iteration count."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule

    def __call__(self, step):
        p = self.schedule
        step = tf.cast(step, tf.int64)
        if p.decay_steps > 0:
            exponent = tf.cast(step // p.decay_steps, tf.float32)
            lr = p.values[0] * tf.pow(tf.constant(p.decay_factor, tf.float32), exponent)
            if p.minimum:
                lr = tf.maximum(lr, p.minimum)
        elif p.boundaries:
            lr = tf.constant(p.values[-1], tf.float32)
            # piecewise_constant semantics: values[i] while step <= boundaries[i].
            for boundary, value in reversed(list(zip(p.boundaries, p.values))):
                lr = tf.where(step <= boundary, tf.constant(value, tf.float32), lr)
        else:
            lr = tf.constant(p.values[0], tf.float32)
        if p.warmup_steps > 0:
            warm = p.warmup_target * tf.cast(step, tf.float32) / float(p.warmup_steps)
            lr = tf.where(step < p.warmup_steps, warm, lr)
        return lr

    def get_config(self):
        return {"schedule": dataclasses.asdict(self.schedule)}

    @classmethod
    def from_config(cls, config):
        fields = config["schedule"]
        return cls(Schedule(**{k: tuple(v) if isinstance(v, list) else v
                               for k, v in fields.items()}))
