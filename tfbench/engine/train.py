"""Training and forward-only runs: the model and its steps, warm-up, the timed loop (repeated
with --num_runs), Step lines, checkpoints and summaries (--train_dir), evaluations during
training (--eval_during_training_*) and --trace_file.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import keras
import numpy as np
import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.distribute import variables
from tfbench.engine import lr, optimizers, steps
from tfbench.engine.base import ModeRunner, StepFn, should_display
from tfbench.engine.checkpoints import Checkpoints, TrainDir, open_train_dir
from tfbench.engine.resolved import TRAINING, Resolved, eval_steps_during_training
from tfbench.engine.runlog import StepReport
from tfbench.errors import raise_if_stopped
from tfbench.results import RunResult


@dataclasses.dataclass
class Setup:
    """What the timed loop runs, built once before warm-up."""
    model: Optional[keras.Model]         # the model the steps run (folded for inference);
    #                                      None when they call a served SavedModel
    optimizer: Optional[keras.optimizers.Optimizer]   # None in forward-only mode
    step_fn: StepFn
    inputs: Any                          # per-replica images or a distributed iterator
    train_dir: TrainDir = dataclasses.field(default_factory=TrainDir)
    eval_fn: Optional[StepFn] = None     # with --eval_during_training_*
    eval_inputs: Any = None


def make_optimizer(p: Settings, plan: Resolved,
                   record_notice: Callable[[str], None]) -> keras.optimizers.Optimizer:
    """The optimizer with its learning-rate schedule (and dynamic loss scaling);
    `record_notice` records the notices of learning-rate flags that have no effect."""
    schedule, notices = lr.schedule_for(p, plan.spec, plan.images_per_iteration,
                                        plan.train_examples)
    for text in notices:
        record_notice(text)
    opt = optimizers.make_optimizer(p, lr.KerasSchedule(schedule))
    if plan.loss_scaling == "dynamic":
        opt = optimizers.LossScaleOptimizer(
            opt, initial_scale=plan.loss_scale,
            dynamic_growth_steps=p.numerics.fp16_inc_loss_scale_every_n)
    if plan.parameter_server:
        _count_every_update(opt)
    return opt


def _count_every_update(optimizer: keras.optimizers.Optimizer) -> None:
    """Each parameter-server worker's update adds one to `iterations`, the global step.

    Keras adds with assign(iterations + 1), a read and then a write, so two workers updating at
    once would count one update between them; TensorFlow's AssignAddVariableOp adds under the
    variable's lock on the ps.
    """
    counter = optimizer.iterations
    counter.assign_add = lambda value: counter.value.assign_add(tf.cast(value, counter.dtype))


class TrainRunner(ModeRunner):
    """--forward_only or training (the default), with or without evaluations."""

    def setup(self, res: RunResult) -> Setup:
        """Builds the model, the optimizer, the steps and their inputs; opens --train_dir."""
        p, plan, log = self.p, self.plan, self.log
        training = plan.mode == TRAINING
        log.generating_training_model()
        model = self.build_model(res)
        optimizer = None
        with variables.scope(self.strategy):
            if training:
                optimizer = make_optimizer(p, plan, lambda text: self.record_notice(res, text))
                optimizer.build(model.trainable_variables)
        folding = None if training else self.fold_batch_norm(model, res)
        if folding is not None:
            # Nothing restores into the source here: drop it, so the peak memory from now on
            # holds one copy of the weights, as an unfolded run does.
            model = folding.model
        self.model = model
        if p.asks.served:   # forward-only (config.params refuses training)
            inputs, from_iterator = self.inputs(plan.train_batch_size, train=True)
            log.initializing()
            step_fn = self.serve(model, res, plan.train_batch_size, from_iterator, True)
            return Setup(model=None, optimizer=None, step_fn=step_fn, inputs=inputs)
        builder = steps.Steps(model, optimizer, self.strategy, self.step_config(plan.mode))
        inputs, from_iterator = self.inputs(plan.train_batch_size * plan.accum_steps, train=True)
        setup = Setup(model=model, optimizer=optimizer,
                      step_fn=builder.train_step(from_iterator) if training
                      else builder.forward_step(from_iterator), inputs=inputs)
        if plan.train_and_eval:
            log.generating_evaluation_model()
            eval_builder = steps.Steps(model, None, self.strategy, self.step_config("eval"))
            setup.eval_inputs, eval_iter = self.inputs(plan.eval_batch_size, train=False)
            setup.eval_fn = eval_builder.eval_step(eval_iter)
        log.initializing()
        if training and p.outputs.train_dir:
            setup.train_dir = open_train_dir(
                p, self.strategy, model, optimizer,
                record_notice=lambda text: self.record_notice(res, text))
        return setup

    def run(self, res: RunResult) -> None:
        p, plan, log, now = self.p, self.plan, self.log, self.clock.perf_counter
        training = plan.mode == TRAINING
        s = self.setup(res)
        checkpoints = Checkpoints(p, s.train_dir.manager, s.optimizer, s.train_dir.scratch_dir)

        log.warmup_started()
        log.step_progress("warmup", 0, plan.num_warmup)
        warm_start = now()
        for i in range(plan.num_warmup):
            t0 = now()
            out = s.step_fn(s.inputs).numpy()
            res.warmup_times.append(now() - t0)
            raise_if_stopped()
            self._check_finite(out, "warm-up", res)
            checkpoints.maybe_save()
            log.step_progress("warmup", i + 1, plan.num_warmup)
        res.warmup_sec = now() - warm_start if plan.num_warmup else None
        res.first_step_sec = res.warmup_times[0] if res.warmup_times else None
        if p.measurement.trace_file:
            self._trace(s, res)
        log.warmup_done()
        self.meter.steady_state()

        # --num_batches is a global-step target when resuming (legacy: num_batches -
        # init_global_step // num_workers where every worker's update counts).
        num_timed = max(plan.num_batches - s.train_dir.init_global_step // plan.iterations_per_step,
                        0)
        for run in range(plan.num_runs):
            if run:
                if p.schedule.cooldown_secs:
                    self.clock.sleep(p.schedule.cooldown_secs)
                log.repeat_started(run + 1, plan.num_runs)
            self._timed_loop(s, res, num_timed, checkpoints, new_measurement=run == 0)
            # Each repeat's own wall time: its total images/sec is recomputable from the JSON.
            res.extra.setdefault("wall_time_runs", []).append(self.meter.repeats[-1].wall_time)
        if training and s.train_dir.manager is not None:
            checkpoints.save(checkpoints.global_step())
        if plan.train_and_eval:
            log.training_done()
            if not res.stopped_early:
                log.evaluation_started(checkpoints.global_step(), final=True)
                with self.meter.evaluation():
                    self._run_eval_batches(s.eval_fn, s.eval_inputs, plan.num_eval_batches, res)

    def _timed_loop(self, s: Setup, res: RunResult, num_timed: int, checkpoints: Checkpoints,
                    new_measurement: bool = True) -> None:
        """One repeat: num_timed steps with Step lines, recorded in the Meter (its total
        images/sec is meter.finish's).

        The monitors' window is open exactly while the repeat's wall time runs (evaluations
        excluded). What runs between two steps on the host (one clock reading, the loss, the
        Step line every --display_every steps) counts in total images/sec but not in the step
        times (latency, steady state); it is kept to a few statements, and its total is
        recorded (between_steps_sec) so the console can say how large it was."""
        p, plan, log, now = self.p, self.plan, self.log, self.clock.perf_counter
        training = plan.mode == TRAINING
        with_acc = plan.step_accuracy(plan.mode)
        log.steps_started(p.measurement.loss_type_to_report, with_acc)
        loss_index = plan.loss_index
        eval_due = eval_steps_during_training(p, plan) if plan.train_and_eval else set()
        times: list[float] = []
        out = None
        paused = 0.0
        self.meter.start_repeat()
        log.step_progress("timed", 0, num_timed)
        self.meter.open_window(new_measurement)
        loop_start = now()
        for i in range(num_timed):
            t0 = now()
            out = s.step_fn(s.inputs).numpy()
            done = now()
            elapsed = done - t0
            raise_if_stopped()
            times.append(elapsed)
            res.step_times.append(elapsed)
            # Covers every step timed so far: a NaN or an interrupt below leaves an
            # images/sec over exactly these steps.
            self.meter.timed(len(times), done - loop_start - paused)
            if res.first_step_sec is None:
                res.first_step_sec = elapsed
            loss = float(out[loss_index]) if training else 0.0
            res.losses.append(loss)
            res.final_loss = loss
            if with_acc:
                res.top_1_accuracy, res.top_5_accuracy = float(out[2]), float(out[3])
            if should_display(i, p.measurement.display_every):
                self._check_finite(out, "step %d" % (i + 1), res)
                mean, pm, jitter = self.step_stats(res, times, p.measurement.display_perf_ewma)
                accs = (float(out[2]), float(out[3])) if with_acc else (None, None)
                res.extra.setdefault("display_events", []).append(
                    {"step": i + 1, "images_per_sec": mean, "time": time.time(),
                     "top_1_accuracy": accs[0], "top_5_accuracy": accs[1]})
                log.step(StepReport(step=i + 1, images_per_sec=mean, plusminus=pm,
                                    jitter=jitter, loss=loss, top_1=accs[0], top_5=accs[1]))
            log.step_progress("timed", i + 1, num_timed)
            if training:
                checkpoints.maybe_save()
                if s.train_dir.summary_writer is not None:  # reading the step: a round trip
                    self._write_summaries(s, out, checkpoints.global_step())
            if (i + 1) in eval_due:
                pause = now()
                self.meter.close_window()
                log.evaluation_started(checkpoints.global_step(), final=False)
                with self.meter.evaluation():
                    top_1 = self._run_eval_batches(s.eval_fn, s.eval_inputs,
                                                   plan.num_eval_batches, res)
                self.meter.open_window(new_measurement=False)
                paused += now() - pause
                if p.mode.stop_at_top_1_accuracy and top_1 >= p.mode.stop_at_top_1_accuracy:
                    log.early_stop(p.mode.stop_at_top_1_accuracy)
                    res.stopped_early = True
                    break
                log.training_resumed()
        wall_time = now() - loop_start - paused
        self.meter.close_window()
        self.meter.end_repeat(len(times), wall_time)
        if not times:
            return
        res.between_steps_sec = (res.between_steps_sec or 0.0) + wall_time - sum(times)
        self._check_finite(out, "step %d" % len(times), res)
        self.step_stats(res, times, p.measurement.display_perf_ewma)

    def _write_summaries(self, s: Setup, out: np.ndarray, global_step: int) -> None:
        p, plan, writer = self.p, self.plan, s.train_dir.summary_writer
        if writer is None or global_step % p.measurement.save_summaries_steps:
            return
        with writer.as_default(step=global_step):
            opt = s.optimizer
            inner = getattr(opt, "inner_optimizer", opt)
            tf.summary.scalar("learning_rate", inner.learning_rate)
            tf.summary.scalar(p.measurement.loss_type_to_report, float(out[plan.loss_index]))
            if hasattr(opt, "dynamic_scale"):
                tf.summary.scalar("loss_scale", opt.dynamic_scale)
            if plan.step_accuracy(TRAINING):   # (summaries are training's)
                tf.summary.scalar("top_1_accuracy", float(out[2]))
                tf.summary.scalar("top_5_accuracy", float(out[3]))
            if p.measurement.summary_verbosity >= 2:
                for v in s.model.trainable_variables:
                    tf.summary.histogram(v.path, v)
        writer.flush()

    def _trace(self, s: Setup, res: RunResult) -> None:
        """A TensorFlow profiler trace of a few untimed steps after warm-up (TensorBoard)."""
        from tfbench.engine import tracing
        self.log.tracing(self.p.measurement.trace_file)
        tracing.trace_steps(lambda: s.step_fn(s.inputs).numpy(), self.p.measurement.trace_file,
                            record_notice=lambda text: self.record_notice(res, text),
                            chrome_json=self.p.measurement.use_chrome_trace_format)
