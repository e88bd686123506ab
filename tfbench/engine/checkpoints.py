"""--train_dir: checkpoints (periodic, final, resumed) and summaries, written by the chief only.

open_train_dir() gives a training run its CheckpointManager, restores the latest checkpoint
and sends the restored state to every process; Checkpoints saves during and after the timed
loop (--save_model_steps, --save_model_secs), never the same step twice. latest_checkpoint()
finds what --eval restores.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
import uuid
from typing import Callable, Optional

import keras
import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.distribute import sync
from tfbench.errors import UsageError


def weight_layers(model: keras.Model) -> list:
    """The layers that hold the model's weights, in the model's order, nested models opened:
    what a checkpoint keys the weights by. Keras 3.8 (TF 2.17's) keys a functional model by its
    operations, which gain Cast operations under a mixed-precision policy, so a checkpoint
    written in fp32 did not fit the same model in fp16 or bf16; a list of its layers does, in
    every policy and Keras version."""
    out = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            out.extend(weight_layers(layer))
        elif layer.weights:
            out.append(layer)
    return out


def checkpoint(model: keras.Model, optimizer=None) -> tf.train.Checkpoint:
    """What --train_dir saves: the weights by layer, the model as before (so an older tfbench
    still reads it), the optimizer's state."""
    parts = {"layers": weight_layers(model), "model": model}
    if optimizer is not None:
        parts["optimizer"] = optimizer
    return tf.train.Checkpoint(**parts)


def restore(path: str, model: keras.Model, optimizer=None) -> None:
    """Restores `path` into `model` (and `optimizer`); refuses a checkpoint in which one of the
    model's weights finds nothing (another model, another dataset's head): never a run on
    weights it did not restore. Reads the layout of an earlier tfbench (the model alone) as that
    tfbench did."""
    names = [name for name, _ in tf.train.list_variables(path)]
    if not any(name.startswith("layers/") for name in names):
        # An earlier tfbench's: restored as it restored it (its keys follow Keras' own graph).
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
    else:
        _restore_weights(path, model)
    if optimizer is not None:
        tf.train.Checkpoint(optimizer=optimizer).restore(path).expect_partial()


def _restore_weights(path: str, model: keras.Model) -> None:
    try:
        # read, not restore: restore adds a save counter a written (not saved) checkpoint lacks.
        tf.train.Checkpoint(layers=weight_layers(model)).read(
            path).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError("the checkpoint %s does not hold this model's weights (%s); give the "
                         "--model, --data_name and --image_size it was trained with"
                         % (path, first[:160])) from None


def latest_checkpoint(path: str) -> Optional[str]:
    """A directory's latest checkpoint, or a `.../model.ckpt-N` prefix given directly."""
    if os.path.isdir(path):
        return tf.train.latest_checkpoint(path)
    if tf.io.gfile.exists(path + ".index"):
        return path
    return None


@dataclasses.dataclass
class TrainDir:
    """What --train_dir gives a training run (all None / 0 without --train_dir)."""
    manager: Optional[tf.train.CheckpointManager] = None
    init_global_step: int = 0    # the optimizer step restored from the latest checkpoint
    summary_writer: Optional[tf.summary.SummaryWriter] = None
    scratch_dir: Optional[str] = None   # a non-chief worker's checkpoints, removed after each


def open_train_dir(p: Settings, strategy: tf.distribute.Strategy, model: keras.Model,
                   optimizer: keras.optimizers.Optimizer,
                   record_notice: Callable[[str], None]) -> TrainDir:
    """--train_dir: checkpoints and summaries from the chief alone; every process resumes
    from the chief's state.

    Processes saving one step into one directory collide (TensorFlow writes
    <prefix>_temp/part-* and then merges and renames), as the legacy script warned of
    Horovod. So horovod ranks other than 0 save nothing, and the other
    MultiWorkerMirroredStrategy workers save into a scratch directory of their own that is
    removed after each save. Only the chief reads --train_dir: the others receive its
    variables, so the hosts need not share a file system. A process other than the chief
    says so in a notice (`record_notice`).
    """
    out = TrainDir()
    ckpt = checkpoint(model, optimizer)
    chief = sync.is_chief(strategy)
    if chief:
        out.manager = tf.train.CheckpointManager(
            ckpt, p.outputs.train_dir, max_to_keep=p.outputs.max_ckpts_to_keep,
            checkpoint_name="model.ckpt")
        if out.manager.latest_checkpoint:
            restore(out.manager.latest_checkpoint, model, optimizer)
    else:
        record_notice("--train_dir: %s writes the checkpoints and summaries; this process "
                      "writes none there and resumes from its state" % sync.chief_label(strategy))
        if sync.saves_beside_chief(strategy):
            out.scratch_dir = os.path.join(
                tempfile.gettempdir(), "tfbench-ckpt-%d-%s" % (os.getpid(), uuid.uuid4().hex))
            out.manager = tf.train.CheckpointManager(
                ckpt, out.scratch_dir, max_to_keep=1, checkpoint_name="model.ckpt")
    # Steps broadcast the initial state before the restore; this sends the restored one.
    sync.sync_restored_state(
        strategy, list(model.variables) + list(optimizer.variables))
    out.init_global_step = int(optimizer.iterations.numpy())
    if chief and p.measurement.summary_verbosity >= 1 and p.measurement.save_summaries_steps > 0:
        out.summary_writer = tf.summary.create_file_writer(p.outputs.train_dir)
    return out


class Checkpoints:
    """Periodic (--save_model_steps / --save_model_secs) and final checkpoints, never twice."""

    def __init__(self, p: Settings, manager: Optional[tf.train.CheckpointManager],
                 optimizer: Optional[keras.optimizers.Optimizer],
                 scratch_dir: Optional[str] = None):
        self.p = p
        self.manager = manager
        self.optimizer = optimizer
        self.scratch_dir = scratch_dir
        self.saved_step = -1
        self.saved_time = time.time()

    def global_step(self) -> int:
        return int(self.optimizer.iterations.numpy()) if self.optimizer is not None else 0

    def save(self, step: int) -> None:
        if self.manager is not None and step != self.saved_step:
            self.manager.save(checkpoint_number=step)
            if self.scratch_dir is not None:
                # A non-chief worker's copy, saved only because a save may need every worker.
                shutil.rmtree(self.scratch_dir, ignore_errors=True)
            self.saved_step, self.saved_time = step, time.time()

    def maybe_save(self) -> None:
        if self.manager is None:
            return
        step = self.global_step()
        if self.p.outputs.save_model_steps and step % self.p.outputs.save_model_steps == 0:
            self.save(step)
        elif self.p.outputs.save_model_secs \
                and time.time() - self.saved_time >= self.p.outputs.save_model_secs:
            self.save(step)
