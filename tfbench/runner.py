"""The runner: build, warm up, time the loop, return a RunResult.

It prints the classic log through `emit` (the CLI passes print) and knows nothing about CSV or
JSON. Per-step times are the duration of one compiled step including the single host round trip
that fetches its loss, as the legacy script times sess.run.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf

from tfbench import classic_log, devices, lr, optimizers, steps
from tfbench import params as params_lib
from tfbench import strategy as strategy_lib
from tfbench.errors import NanLoss, OutOfMemory, UsageError
from tfbench.models import registry
from tfbench.results import RunResult

Emit = Callable[[str], None]


@dataclasses.dataclass
class Resolved:
    """What will run, after defaults and device facts are applied."""
    spec: registry.ModelSpec
    device: devices.DevicePlan
    precision: str
    image_size: int
    batch_size: int              # per device (per micro-batch with accumulation)
    eval_batch_size: int
    global_batch: int            # images per step, all devices, all micro-batches
    num_batches: int
    num_epochs: float
    num_warmup: int
    mode: str                    # training | forward_only | eval
    xla: bool
    notices: list[str]


def resolve(p) -> Resolved:
    """Applies defaults, the device plan and the model registry to Params."""
    dataset = p.data_name if p.data_name in (registry.IMAGENET, registry.CIFAR10) else None
    spec = registry.get(p.model, dataset)
    notices: list[str] = []
    if dataset is None and spec.dataset != registry.IMAGENET:
        notices.append("Model %s exists only for %s: using --data_name=%s"
                       % (p.model, spec.dataset, spec.dataset))
    plan = devices.plan_devices(p)
    notices.extend(plan.notices)
    notices.extend("--%s has no effect under TF2 (TF1 graph-only flag); ignored" % name
                   for name in _graph_only_flags(p))
    precision = optimizers.resolve_precision(p)
    batch = p.batch_size or spec.batch_size
    eval_batch = p.eval_batch_size or batch
    mode = "eval" if p.eval else ("forward_only" if p.forward_only else "training")
    accum = p.accum_steps if mode == "training" else 1
    per_step_batch = (eval_batch if mode == "eval" else batch) * accum
    global_batch = per_step_batch * plan.num_devices
    counts = registry.NUM_EVAL_EXAMPLES if mode == "eval" else registry.NUM_TRAIN_EXAMPLES
    if mode == "eval" and (p.num_eval_batches is not None or p.num_eval_epochs is not None):
        eval_params = p.replace(num_batches=p.num_eval_batches, num_epochs=p.num_eval_epochs)
        num_batches, num_epochs = params_lib.num_batches_and_epochs(
            eval_params, global_batch, counts[spec.dataset])
    else:
        num_batches, num_epochs = params_lib.num_batches_and_epochs(
            p, global_batch, counts[spec.dataset])
    xla = bool(p.xla or p.xla_compile)
    return Resolved(spec, plan, precision, p.image_size or spec.image_size, batch, eval_batch,
                    global_batch, num_batches, num_epochs,
                    0 if mode == "eval" else params_lib.num_warmup_batches(p), mode, xla,
                    notices)


def _graph_only_flags(p) -> list[str]:
    from tfbench.flagdefs import ALL_FLAGS
    return [f.name for f in ALL_FLAGS
            if f.role == "G" and getattr(p, f.name) != f.default]


class Benchmark:
    def __init__(self, p, emit: Emit = print):
        self.p = p
        self.emit = emit
        self.r = resolve(p)

    # ------------------------------------------------------------------------------------
    def run(self, result: Optional[RunResult] = None) -> RunResult:
        """Runs the benchmark, filling `result` as it goes (partial results survive errors)."""
        p, r = self.p, self.r
        res = result or RunResult()
        self._describe(res)
        devices.set_environment(p)
        devices.configure_runtime(p, r.device)
        tf.random.set_seed(p.tf_random_seed)
        np.random.seed(4321)
        for notice in r.notices:
            self.emit(notice)
        res.notices.extend(r.notices)
        sp = strategy_lib.make_strategy(p, r.device)
        for notice in sp.notices:
            self.emit(notice)
        res.notices.extend(sp.notices)
        self.strategy = sp.strategy
        res.variable_update = sp.variables_label
        self._print_header(sp)
        try:
            if r.mode == "eval":
                self._run_eval(res)
            else:
                self._run_train_or_forward(res)
        except tf.errors.ResourceExhaustedError as exc:
            raise OutOfMemory(
                "Out of memory running %s at batch size %d per device in %s: reduce "
                "--batch_size, use --accum_steps to keep the effective batch, or use mixed "
                "precision (--precision=bf16 or fp16)" % (r.spec.name, r.batch_size,
                                                          r.precision)) from exc
        return res

    # ------------------------------------------------------------------------------------
    def _describe(self, res: RunResult) -> None:
        p, r = self.p, self.r
        res.model = r.spec.name
        res.dataset = r.spec.dataset
        res.mode = r.mode
        res.precision = r.precision
        res.xla = r.xla
        res.batch_size = r.eval_batch_size if r.mode == "eval" else r.batch_size
        res.global_batch_size = r.global_batch
        res.num_devices = r.device.num_devices
        res.device_kind = r.device.kind
        res.data_format = r.device.data_format
        res.image_size = r.image_size
        res.num_batches = r.num_batches
        res.num_warmup_batches = r.num_warmup
        res.accum_steps = p.accum_steps if r.mode == "training" else 1
        res.data_source = "synthetic"
        res.tf_version = tf.__version__
        res.keras_version = keras.__version__
        res.extra["device_name"] = devices.device_name(r.device)
        res.extra["devices"] = list(r.device.names)
        res.extra["num_epochs"] = r.num_epochs
        res.extra["tf_git_hash"] = tf.version.GIT_VERSION

    def _print_header(self, sp: strategy_lib.StrategyPlan) -> None:
        p, r = self.p, self.r
        mode = classic_log.mode_label(r.mode == "forward_only", r.mode == "eval")
        for line in classic_log.header_lines(
                tf_version=tf.__version__, model=r.spec.header_name,
                dataset="%s (synthetic)" % r.spec.dataset, mode=mode,
                batch_size=r.eval_batch_size if r.mode == "eval" else r.batch_size,
                global_batch_size=r.global_batch, num_batches=r.num_batches,
                num_epochs=r.num_epochs, devices=r.device.names,
                data_format=r.device.data_format, optimizer=p.optimizer,
                variable_update=sp.variables_label, all_reduce_spec=sp.all_reduce_label,
                show_all_reduce=sp.show_all_reduce, job_name=p.job_name):
            self.emit(line)

    def _build_model(self):
        r = self.r
        optimizers.set_policy(r.precision)
        with self.strategy.scope():
            model = r.spec.build(r.image_size, r.device.data_format)
        return model

    def _step_config(self) -> steps.StepConfig:
        p, r = self.p, self.r
        scaling, scale = optimizers.loss_scaling(p, r.precision)
        return steps.StepConfig(
            num_label_classes=r.spec.num_classes - 1, weight_decay=p.weight_decay,
            loss_scaling=scaling, loss_scale=scale,
            accum_steps=p.accum_steps if r.mode == "training" else 1,
            compute_accuracy=p.print_training_accuracy or r.mode != "training",
            jit_compile=r.xla)

    def _make_optimizer(self):
        p, r = self.p, self.r
        plan, notices = lr.plan_for(p, r.spec, r.global_batch,
                                    registry.NUM_TRAIN_EXAMPLES[r.spec.dataset])
        for notice in notices:
            self.emit(notice)
        opt = optimizers.make_optimizer(p, lr.Schedule(plan))
        scaling, scale = optimizers.loss_scaling(p, r.precision)
        if scaling == "dynamic":
            opt = keras.optimizers.LossScaleOptimizer(
                opt, initial_scale=scale, dynamic_growth_steps=p.fp16_inc_loss_scale_every_n)
        return opt

    def _checkpoint(self, model, optimizer=None):
        kwargs = {"model": model}
        if optimizer is not None:
            kwargs["optimizer"] = optimizer
        return tf.train.Checkpoint(**kwargs)

    # ------------------------------------------------------------------------------------
    def _run_train_or_forward(self, res: RunResult) -> None:
        p, r = self.p, self.r
        training = r.mode == "training"
        self.emit("Generating training model")
        model = self._build_model()
        res.params_count = int(model.count_params())
        optimizer = None
        with self.strategy.scope():
            if training:
                optimizer = self._make_optimizer()
                optimizer.build(model.trainable_variables)
        step_builder = steps.Steps(model, optimizer, self.strategy, self._step_config())
        step_fn = step_builder.train_step() if training else step_builder.forward_step()
        self.emit("Initializing graph")
        images = steps.synthetic_images(self.strategy, r.batch_size, r.image_size,
                                        optimizers.compute_dtype(r.precision))
        manager = None
        init_global_step = 0
        if training and p.train_dir:
            ckpt = self._checkpoint(model, optimizer)
            manager = tf.train.CheckpointManager(ckpt, p.train_dir,
                                                 max_to_keep=p.max_ckpts_to_keep,
                                                 checkpoint_name="model.ckpt")
            if manager.latest_checkpoint:
                ckpt.restore(manager.latest_checkpoint).expect_partial()
                init_global_step = int(optimizer.iterations.numpy())
        num_timed = max(r.num_batches - init_global_step, 0)

        def global_step() -> int:
            return int(optimizer.iterations.numpy()) if optimizer is not None else 0

        saved = {"step": -1, "time": time.time()}

        def save(gs: int) -> None:
            if gs != saved["step"]:
                manager.save(checkpoint_number=gs)
                saved["step"], saved["time"] = gs, time.time()

        def maybe_checkpoint() -> None:
            if manager is None:
                return
            gs = global_step()
            if p.save_model_steps and gs % p.save_model_steps == 0:
                save(gs)
            elif p.save_model_secs and time.time() - saved["time"] >= p.save_model_secs:
                save(gs)

        self.emit("Running warm up")
        warm_start = time.perf_counter()
        for _ in range(r.num_warmup):
            t0 = time.perf_counter()
            out = step_fn(images).numpy()
            res.warmup_times.append(time.perf_counter() - t0)
            self._check_finite(out, res, "warm-up")
            maybe_checkpoint()
        res.warmup_sec = time.perf_counter() - warm_start if r.num_warmup else None
        res.first_step_sec = res.warmup_times[0] if res.warmup_times else None
        self.emit("Done warm up")

        with_acc = p.print_training_accuracy or not training
        self.emit(classic_log.step_header(p.loss_type_to_report, with_acc))
        loss_index = 0 if p.loss_type_to_report == "base_loss" else 1
        loop_start = time.perf_counter()
        for i in range(num_timed):
            t0 = time.perf_counter()
            out = step_fn(images).numpy()
            elapsed = time.perf_counter() - t0
            res.step_times.append(elapsed)
            if res.first_step_sec is None:
                res.first_step_sec = elapsed
            loss = float(out[loss_index]) if training else 0.0
            res.losses.append(loss)
            res.final_loss = loss
            if with_acc:
                res.top_1_accuracy, res.top_5_accuracy = float(out[2]), float(out[3])
            if classic_log.should_display(i, p.display_every):
                self._check_finite(out, res, "step %d" % (i + 1))
                mean, pm, jitter = classic_log.perf_stats(r.global_batch, res.step_times,
                                                          p.display_perf_ewma)
                res.step_images_per_sec, res.step_images_per_sec_plusminus, res.jitter = \
                    mean, pm, jitter
                res.extra.setdefault("display_events", []).append(
                    {"step": i + 1, "images_per_sec": mean, "time": time.time(),
                     "top_1_accuracy": float(out[2]) if with_acc else None,
                     "top_5_accuracy": float(out[3]) if with_acc else None})
                self.emit(classic_log.step_line(
                    i + 1, mean, pm, jitter, loss,
                    *( (float(out[2]), float(out[3])) if with_acc else ())))
            if training:
                maybe_checkpoint()
            res.wall_time = time.perf_counter() - loop_start
        res.wall_time = time.perf_counter() - loop_start
        if res.step_times:
            self._check_finite(out, res, "step %d" % len(res.step_times))
            mean, pm, jitter = classic_log.perf_stats(r.global_batch, res.step_times,
                                                      p.display_perf_ewma)
            res.step_images_per_sec, res.step_images_per_sec_plusminus, res.jitter = \
                mean, pm, jitter
            res.images_per_sec = len(res.step_times) * r.global_batch / res.wall_time
        if manager is not None:
            save(global_step())

    def _check_finite(self, out: np.ndarray, res: RunResult, where: str) -> None:
        if not np.all(np.isfinite(out[:2])):
            raise NanLoss("Loss became %s at %s of %s (%s, batch %d): use loss scaling "
                          "(--fp16_enable_auto_loss_scale) or a lower learning rate "
                          "(--init_learning_rate)"
                          % ("NaN" if np.isnan(out[:2]).any() else "Inf", where,
                             self.r.spec.name, self.r.precision, self.r.batch_size))

    # ------------------------------------------------------------------------------------
    def _run_eval(self, res: RunResult) -> None:
        p, r = self.p, self.r
        self.emit("Generating evaluation model")
        model = self._build_model()
        res.params_count = int(model.count_params())
        ckpt = self._checkpoint(model)
        path = p.train_dir
        if os.path.isdir(path):
            path = tf.train.latest_checkpoint(path)
        elif not tf.io.gfile.exists(path + ".index"):
            path = None
        if not path:
            raise UsageError("Checkpoint not found in %s" % p.train_dir)
        ckpt.restore(path).expect_partial()
        self.emit("Successfully loaded model from %s." % path)
        step_fn = steps.Steps(model, None, self.strategy, self._step_config()).forward_step()
        images = steps.synthetic_images(self.strategy, r.eval_batch_size, r.image_size,
                                        optimizers.compute_dtype(r.precision))
        top1s, top5s = [], []
        loop_start = time.perf_counter()
        window_start = loop_start
        for i in range(r.num_batches):
            t0 = time.perf_counter()
            out = step_fn(images).numpy()
            res.step_times.append(time.perf_counter() - t0)
            top1s.append(float(out[2]))
            top5s.append(float(out[3]))
            if (i + 1) % p.display_every == 0:
                now = time.perf_counter()
                self.emit(classic_log.eval_progress_line(
                    i + 1, p.display_every * r.global_batch / (now - window_start)))
                window_start = now
        res.wall_time = time.perf_counter() - loop_start
        res.top_1_accuracy = float(np.mean(top1s)) if top1s else 0.0
        res.top_5_accuracy = float(np.mean(top5s)) if top5s else 0.0
        res.eval_examples = r.num_batches * r.global_batch
        self.emit(classic_log.accuracy_line(res.top_1_accuracy, res.top_5_accuracy,
                                            res.eval_examples))
        if res.step_times:
            res.images_per_sec = len(res.step_times) * r.global_batch / res.wall_time
            mean, pm, jitter = classic_log.perf_stats(r.global_batch, res.step_times)
            res.step_images_per_sec, res.step_images_per_sec_plusminus, res.jitter = \
                mean, pm, jitter
