"""The shared base of the runners, one per mode: tfbench.engine.train (training, forward-only),
tfbench.engine.checkpoint_eval (--eval) and tfbench.engine.data_only (--data_only).

A runner is built by keyword with everything it runs on: the Settings, the Resolved plan, the
strategy, the RunLog it reports to, the Meter around its timed steps and the Clock that times
them. Its run(res) fills RunResult as it goes, so a failure keeps what was measured; the
model its timed steps run is `model` (tfbench.engine.meter counts its FLOPs). This base
holds what several modes share: building the model (and its batch-norm-folded clone for
inference), step configuration, inputs, the Step lines' figures, the NaN check and evaluation.

Per-step times are the duration of one compiled step including the single host round trip
that fetches its loss, as the legacy script times sess.run.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import keras
import numpy as np
import tensorflow as tf

from tfbench import figures
from tfbench.config import fast_paths
from tfbench.config.settings import Settings
from tfbench.distribute import pipelines, variables
from tfbench.engine import meter as meter_lib, optimizers, serving, steps
from tfbench.engine.meter import Meter
from tfbench.engine.resolved import TRAINING, Resolved
from tfbench.engine.runlog import RunLog, SilentLog, record_notice
from tfbench.errors import NanLoss, raise_if_stopped
from tfbench.measure import flops, stats
from tfbench.models import fold_bn
from tfbench.results import RunResult

# A compiled step: inputs (per-replica images or a distributed iterator) -> the float32 vector
# [base_loss, total_loss, top_1, top_5] (tfbench.engine.steps).
StepFn = Callable[[Any], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class Clock:
    """The runners' time sources, injectable: tests run a whole benchmark on a fake clock that
    a fake device advances. Step and loop times come from `perf_counter`; cooldowns and
    --eval_interval_secs wait with `sleep`. Timestamps (--save_model_secs, the Step-line
    events of the benchmark logs) are wall-clock time.time()."""
    perf_counter: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep


def should_display(step_index: int, display_every: int) -> bool:
    """Legacy rule on the 0-based timed step: step 0, then every display_every-th."""
    return step_index == 0 or (step_index + 1) % display_every == 0


def step_stats(res: RunResult, batch: int, times: list[float],
               ewma: Optional[float]) -> tuple[float, float, float]:
    """The Step line's (mean images/sec, +/-, jitter) over `times`, recorded in res; `batch`
    is the images one Step line counts (Resolved.step_line_batch)."""
    figures = stats.perf_stats(batch, times, ewma)
    res.step_images_per_sec, res.step_images_per_sec_plusminus, res.jitter = figures
    return figures


def step_fast_paths(plan: Resolved) -> fast_paths.FastPaths:
    """The CPU speed-ups for this process's device kind; none on a parameter-server controller,
    which traces steps its workers run on devices it cannot see (GPUs, whatever its own)."""
    if plan.parameter_server:
        return fast_paths.STANDARD
    return fast_paths.for_device(plan.device.kind)


class ModeRunner:
    """One mode's run over a strategy that exists already. Subclasses implement run(res)."""

    def __init__(self, *, p: Settings, plan: Resolved, strategy: tf.distribute.Strategy,
                 log: RunLog = SilentLog(), meter: Optional[Meter] = None,
                 clock: Clock = Clock()):
        self.p = p
        self.plan = plan
        self.strategy = strategy
        self.log = log
        self.meter = meter if meter is not None else Meter(plan.device.names)
        self.clock = clock
        self.model: Optional[keras.Model] = None   # what the timed steps run, once built
        self.serving: Optional[serving.Serving] = None   # --saved_model, --trt_mode
        self._nonfinite_said = False   # a non-finite loss on synthetic data is said once

    def run(self, res: RunResult) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """After the run, on success and on failure: removes what the run kept on disk only for
        itself (a served model's temporary directory)."""
        if self.serving is not None:
            self.serving.close()

    def record_notice(self, res: RunResult, text: str) -> None:
        """Records `text` in the run's notices and shows it (runlog.record_notice)."""
        record_notice(self.log, res, text)

    # --- model and steps ----------------------------------------------------------------------
    def build_model(self, res: Optional[RunResult] = None) -> keras.Model:
        """The run's model; with `res`, the result it is the model of: its trainable parameters
        are counted here, the figure's one writer (before any folding, whose clone has extra
        biases; the probes build theirs without)."""
        plan = self.plan
        optimizers.set_policy(plan.precision)
        with variables.scope(self.strategy):
            model = plan.spec.build(plan.image_size, plan.device.data_format)
        if res is not None:
            res.params = flops.count_params(model)
        return model

    def fold_batch_norm(self, model: keras.Model,
                        res: RunResult) -> Optional[fold_bn.FoldedModel]:
        """The folded clone that inference steps run (see models/fold_bn), or None: with
        --nofold_batch_norm, or when the model has no batch norm after a convolution."""
        if not self.p.mode.fold_batch_norm:
            return None
        with variables.scope(self.strategy):
            folding = fold_bn.fold_batch_norm(model)
        if folding is not None:
            # Shown with tfbench's own lines before the footer: the legacy block stays intact.
            res.extra["batch_norm_folded_convolutions"] = folding.num_folded
            res.notices.append(figures.sentence("batch_norm_folded_convolutions",
                                                folding.num_folded))
        return folding

    def step_config(self, mode: str) -> steps.StepConfig:
        p, plan = self.p, self.plan
        return steps.StepConfig(
            num_label_classes=plan.spec.num_classes - 1, weight_decay=p.learning.weight_decay,
            loss_scaling=plan.loss_scaling, loss_scale=plan.loss_scale,
            # The run's micro-batches; an evaluation step during training has none.
            accum_steps=plan.accum_steps if mode == TRAINING else 1,
            compute_accuracy=plan.step_accuracy(mode),
            jit_compile=plan.xla, fast_paths=step_fast_paths(plan))

    def serve(self, model: keras.Model, res: RunResult, batch: int, from_iterator: bool,
              train: bool) -> StepFn:
        """The served step of --saved_model (and --trt_mode): `model`, the one the in-process
        step would run, exported, converted, loaded and checked (tfbench.engine.serving). Its
        FLOPs are counted now; the runner then drops it (self.model = None), so that only the
        served copy of the weights stays in memory while the steps run."""
        self.serving = serving.Serving(self.p, self.plan, self.clock.perf_counter)
        calibration = (lambda: self.pipeline(batch, train)) if self.plan.real_data else None
        step = self.serving.step(model, res, self.strategy, batch, from_iterator, calibration)
        for text in self.serving.notices:
            self.record_notice(res, text)
        meter_lib.count_flops(model, self.plan.image_size, res, self.log)
        self.model = None
        return step

    # --- inputs -------------------------------------------------------------------------------
    def images(self, batch_size: int):
        """Synthetic per-replica images (and labels) of batch_size each."""
        return steps.synthetic_images(self.strategy, batch_size, self.plan.image_size,
                                      optimizers.compute_dtype(self.plan.precision))

    def dataset(self, batch_per_replica: int, train: bool) -> tf.data.Dataset:
        """This process's pipeline, read without tf.distribute (--data_only): one step's batch
        over all local replicas, from the part of the data its replicas would read."""
        index, count = pipelines.process_shard(self.strategy)
        return self.pipeline(batch_per_replica * self.plan.device.num_devices, train, index,
                             count)

    def pipeline(self, batch_size: int, train: bool, index: int = 0,
                 count: int = 1) -> tf.data.Dataset:
        """Input pipeline `index` of `count`: batches of batch_size from its part of the data."""
        from tfbench import data
        plan = self.plan
        # The private pool's size as resolved (the legacy default on GPUs; 0: shared threads).
        p = self.p.with_flags(datasets_num_private_threads=plan.input_threads or 0)
        return data.make_dataset(p, dataset_name=plan.spec.dataset, image_size=plan.image_size,
                                 batch_size=batch_size, train=train,
                                 dtype=optimizers.compute_dtype(plan.precision),
                                 shard=data.Shard(index, count))

    def inputs(self, batch_per_replica: int, train: bool) -> tuple[Any, bool]:
        """(step inputs, from_iterator): synthetic per-replica images or a distributed iterator
        that gives every replica batch_per_replica real images, as synthetic inputs do."""
        if not self.plan.real_data:
            return self.images(batch_per_replica), False
        return pipelines.distribute_inputs(
            self.strategy,
            lambda index, count: self.pipeline(batch_per_replica, train, index, count)), True

    # --- figures ------------------------------------------------------------------------------
    def step_stats(self, res: RunResult, times: list[float],
                   ewma: Optional[float]) -> tuple[float, float, float]:
        return step_stats(res, self.plan.step_line_batch, times, ewma)

    def _check_finite(self, out: np.ndarray, where: str, res: RunResult) -> None:
        """A non-finite loss stops a run on real data (exit 4). Synthetic images are noise with
        random labels, on which a model may diverge (AlexNet does at any batch size, in the
        legacy script too): there the loss means nothing, so the run goes on, timed as the
        legacy script times it, and says so once."""
        if np.all(np.isfinite(out[:2])):
            return
        plan = self.plan
        what = "Loss became %s at %s of %s (%s, batch %d)" % (
            "NaN" if np.isnan(out[:2]).any() else "Inf", where, plan.spec.name, plan.precision,
            plan.run_batch_size)
        if plan.real_data:
            raise NanLoss("%s: use loss scaling (--fp16_enable_auto_loss_scale) or a lower "
                          "learning rate (--init_learning_rate)" % what)
        if not self._nonfinite_said:
            self._nonfinite_said = True
            self.record_notice(res, "%s on synthetic images, which carry no signal: the steps "
                                    "go on and are timed as before; on real data this stops "
                                    "the run" % what)

    def _run_eval_batches(self, step_fn: StepFn, inputs: Any, num_batches: int, res: RunResult,
                          times: Optional[list[float]] = None, timed: bool = False) -> float:
        """Runs eval batches with progress lines and the Accuracy line; returns top-1.

        Each step's time (with its host fetch) goes to `times` when given. `timed`: these steps
        are the run's measurement (--eval): the Meter's repeat covers every step in `times`."""
        p, now = self.p, self.clock.perf_counter
        # Every worker evaluates its own part of the data (strategy.distribute_inputs) and the
        # accuracy is their mean (Steps.eval_step), so the count is all workers' images.
        global_eval = self.plan.eval_global_batch
        top1s, top5s = [], []
        times = times if times is not None else []
        loop_start = window_start = now()
        for i in range(num_batches):
            t0 = now()
            out = step_fn(inputs).numpy()
            times.append(now() - t0)
            if timed:
                self.meter.timed(len(times), now() - loop_start)
            raise_if_stopped()
            top1s.append(float(out[2]))
            top5s.append(float(out[3]))
            if (i + 1) % p.measurement.display_every == 0:
                end = now()
                self.log.evaluation_progress(
                    i + 1, p.measurement.display_every * global_eval / (end - window_start))
                window_start = end
        top_1 = float(np.mean(top1s)) if top1s else 0.0
        top_5 = float(np.mean(top5s)) if top5s else 0.0
        res.top_1_accuracy, res.top_5_accuracy = top_1, top_5
        res.eval_examples = num_batches * global_eval
        res.extra.setdefault("evaluations", []).append(
            {"top_1_accuracy": top_1, "top_5_accuracy": top_5, "examples": res.eval_examples})
        self.log.accuracy(top_1, top_5, res.eval_examples)
        return top_1
