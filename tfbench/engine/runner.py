"""The runner: build, warm up, time the loop, return a RunResult.

It reports what happens through a RunLog (tfbench.engine.runlog; the CLI passes the classic
log) and knows nothing about output formats. Per-step times are the duration of one compiled step including the single host round trip
that fetches its loss, as the legacy script times sess.run.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf

from tfbench.distribute import devices
from tfbench.config import fast_paths
from tfbench.engine import lr, optimizers, steps
from tfbench.engine.plan import Resolved, eval_steps_during_training, resolve
from tfbench.engine.runlog import Header, RunLog, SilentLog, StepReport
from tfbench.measure import memory, peak, stats
from tfbench import monitors
from tfbench.distribute import strategy as strategy_lib
from tfbench.errors import NanLoss, OutOfMemory, UsageError, raise_if_stopped
from tfbench.results import RunResult

def should_display(step_index: int, display_every: int) -> bool:
    """Legacy rule on the 0-based timed step: step 0, then every display_every-th."""
    return step_index == 0 or (step_index + 1) % display_every == 0


@dataclasses.dataclass
class _Setup:
    model: object
    optimizer: object
    step_fn: Callable
    inputs: object
    manager: Optional[tf.train.CheckpointManager] = None
    init_global_step: int = 0
    eval_fn: Optional[Callable] = None
    eval_inputs: object = None
    summary_writer: object = None
    scratch_dir: Optional[str] = None   # a non-chief worker's checkpoints, removed after each


def _oom_evidence(exc: BaseException) -> Optional[str]:
    """'Class: line' showing that `exc` is a failed allocation, else None (errors.py lists the
    texts: near the limit cuDNN and cuBLAS fail with classes other than ResourceExhaustedError)."""
    from tfbench.errors import out_of_memory_evidence
    name = type(exc).__name__
    message = exc.message if isinstance(exc, tf.errors.OpError) else str(exc)
    evidence = out_of_memory_evidence(message or "", name)
    if evidence is None or evidence == name:
        return evidence
    return "%s: %s" % (name, evidence)


class Benchmark:
    def __init__(self, p, log: RunLog = SilentLog()):
        self.p = p
        self.log = log
        self.r = resolve(p)
        self.strategy: Optional[tf.distribute.Strategy] = None
        self.monitors: list = []
        self.model = None
        self._memory_reset_error: Optional[str] = None
        self._warmup_peaks: Optional[dict] = None
        self._steps_in_wall_time = 0   # the timed steps res.wall_time covers (this repeat)

    # ------------------------------------------------------------------------------------
    def run(self, result: Optional[RunResult] = None) -> RunResult:
        """Runs the benchmark, filling `result` as it goes (partial results survive errors)."""
        p, r = self.p, self.r
        res = result or RunResult()
        self._describe(res)
        devices.set_environment(p, r.device.kind, weights_change=r.mode != "forward_only")
        devices.configure_runtime(p, r.device, p.gpu_memory_limit_mb or None)
        # Keras 3 initializers without a seed draw from Python's `random`, which
        # tf.random.set_seed leaves alone: seeding all of them makes the weights repeatable.
        # Keras takes only numpy's seed range; TensorFlow keeps the full int64 seed, as before.
        keras.utils.set_random_seed(p.tf_random_seed % 2**32)
        tf.random.set_seed(p.tf_random_seed)
        np.random.seed(4321)
        env_before = self._capture_environment(res)
        for notice in r.notices:
            self.log.notice(notice)
        res.notices.extend(r.notices)
        sp = strategy_lib.make_strategy(p, r.device)
        for notice in sp.notices:
            self.log.notice(notice)
        res.notices.extend(sp.notices)
        self.strategy = sp.strategy
        if strategy_lib.is_parameter_server(sp.strategy):
            r = self._count_worker_replicas(res)
        res.variable_update = sp.variables_label
        res.num_workers, res.extra["reduction"] = sp.num_workers, sp.reduction
        self._print_header(sp)
        self.log.cluster_lines(sp.start_lines)
        if sp.serve is not None:   # a ps or worker task of a parameter-server cluster
            sp.serve()
            res.extra["server_task"], res.images_per_sec = sp.cluster.label, 0.0
            return res
        self._memory_reset_error = memory.reset_peak(r.device.names)
        self.monitors = monitors.create(r.device.kind, self._gpu_indices(),
                                        p.monitor_interval_ms / 1000.0)
        for m in self.monitors:
            m.start()
        try:
            if r.mode == "eval":
                self._run_eval(res)
            elif r.mode == "data_only":
                self._run_data_only(res)
            else:
                self._run_train_or_forward(res)
        except (tf.errors.OpError, StopIteration, MemoryError) as exc:
            from tfbench import data
            evidence = _oom_evidence(exc)
            if evidence is not None:
                raise OutOfMemory(
                    "Out of memory running %s at batch size %d per device in %s: reduce "
                    "--batch_size, use --accum_steps to keep the effective batch, or use mixed "
                    "precision (--precision=bf16 or fp16) [%s]" % (
                        r.spec.name, r.batch_size, r.precision, evidence)) from None
            if r.real_data and data.is_data_error(exc):
                raise data.data_error(exc, p, r.mode == "training") from None
            failure = strategy_lib.distributed_failure(exc, sp)
            if failure is not None:
                raise failure from None
            raise
        finally:
            # On a failure the FLOP count (a second trace of the model) is skipped.
            self._finish_measurements(res, env_before, failed=sys.exc_info()[0] is not None)
        return res

    def _count_worker_replicas(self, res: RunResult) -> Resolved:
        """A parameter-server controller runs no step: the workers do, one replica per worker
        GPU (TensorFlow counts them from the workers' devices, parameter_server_strategy_v2),
        so a step's images are counted from the strategy's replicas, not this host's devices."""
        replicas = self.strategy.num_replicas_in_sync
        own = self.r.device.num_devices
        self.r = resolve(self.p, replicas_per_worker=replicas)
        self._describe(res)
        if replicas != own:
            notice = ("Parameter-server workers run %d replica(s) each: a step counts %d images "
                      "per worker, not this controller's %d device(s)"
                      % (replicas, self.r.worker_batch, own))
            self.log.notice(notice)
            res.notices.append(notice)
        return self.r

    def _steady_state(self) -> None:
        """Warm-up is over: the device memory peak so far (autotuning scratch included) is kept
        apart before the peak is reset."""
        names = self.r.device.names
        self._warmup_peaks = memory.peak_device_bytes(names)[0]
        self._memory_reset_error = self._memory_reset_error or memory.reset_peak(names)

    def _open_window(self, new_measurement: bool) -> None:
        """Timed steps start: the monitors' figures cover them (tfbench.monitors.aggregate).
        A new measurement replaces the windows before it; otherwise the window adds to them."""
        for m in self.monitors:
            if new_measurement:
                m.mark_steady()
            else:
                m.resume()

    def _close_window(self) -> None:
        """Timed steps stop (end of a repeat, an evaluation): the monitors' window closes."""
        for m in self.monitors:
            m.pause()

    def _gpu_indices(self) -> Optional[list[int]]:
        if self.r.device.kind != "gpu":
            return None
        return list(self.r.device.gpu_indices or range(self.r.device.num_devices))

    def _capture_environment(self, res: RunResult) -> Optional[dict]:
        from tfbench.measure import environment
        env = environment.capture(res.command.split() if res.command else None)
        res.environment = {"before": env}
        self.log.environment(env)
        warning = environment.vm_warning(env, using_real_data=res.data_source != "synthetic")
        if warning:
            self.log.notice(warning)
            res.notices.append(warning)
        return env

    def _finish_measurements(self, res: RunResult, env_before: Optional[dict],
                             failed: bool = False) -> None:
        """Summaries of every measurement taken; runs on success and on failure alike."""
        from tfbench.measure import environment, estimate
        for m in self.monitors:
            m.stop()
        r = self.r
        if not res.images_per_sec and self._steps_in_wall_time and res.wall_time:
            # Stopped early (interrupt, NaN): the steps already timed still count, those the
            # wall time covers (this repeat's).
            res.images_per_sec = self._steps_in_wall_time * r.global_batch / res.wall_time
        ips = res.images_per_sec or None
        # This host's monitors and memory see this worker's images only.
        timed_images = len(res.step_times) * r.worker_batch
        local_ips = ips / r.num_workers if ips else None
        if self.model is not None and not failed:
            self._count_flops(self.model, res)
        self._flops_figures(res, ips)
        res.extra.update(stats.latency_summary(res.step_times))
        res.extra.update(stats.cold_start_summary(res.warmup_times, res.step_times))
        peaks, unavailable = memory.peak_device_bytes(r.device.names)
        if self._memory_reset_error:   # the peak would also cover the warm-up
            peaks, unavailable = dict.fromkeys(peaks), self._memory_reset_error
        res.extra.update(memory.memory_summary(r.device.kind, peaks,
                                               memory.host_peak_rss_bytes(), local_ips,
                                               unavailable, self._warmup_peaks))
        if self.monitors:
            res.extra.update(monitors.summary(self.monitors, timed_images, local_ips))
            res.extra["samples"] = monitors.samples(self.monitors)
        self._expected_range(res)
        if self.p.estimate_dataset_size and r.mode == "training":
            res.extra.update(estimate.estimate_summary(
                ips, self.p.estimate_dataset_size, self.p.estimate_epochs,
                self.p.estimate_utilization))
        if env_before is not None:
            after = environment.capture(res.command.split() if res.command else None)
            res.environment["after"] = after
            res.extra["environment_changes"] = environment.diff(env_before, after)

    def _flops_figures(self, res: RunResult, ips: Optional[float]) -> None:
        """Achieved TFLOP/s (training counted as 3x forward) and MFU where a peak is known."""
        r = self.r
        if not (res.gflops_per_image and ips):
            return
        # Training costs about 3x the forward pass (forward + two backward matmuls).
        factor = 3.0 if r.mode == "training" else 1.0
        res.tflops_per_sec = res.gflops_per_image * factor * ips / 1000.0
        name = res.extra.get("device_name", "")
        per_device = self.p.peak_tflops or (
            peak.gpu_peak_tflops(name, r.precision) if r.device.kind == "gpu" else None) \
            or peak.cached_peak(name, r.precision)
        if per_device:
            res.extra["peak_tflops"] = per_device
            res.extra["mfu_pct"] = peak.mfu_pct(res.tflops_per_sec, per_device,
                                                r.device.num_devices * r.num_workers)

    def _expected_range(self, res: RunResult) -> None:
        """Where the GPU is in the published table: the verdict (within / below / above its
        band) and the band with its sources (`expected_range_reference`)."""
        from tfbench.measure import expected_range
        if not res.images_per_sec or self.r.device.kind != "gpu":
            return
        judged = expected_range.judge(res.extra.get("device_name", ""), res.model, res.mode,
                                      res.precision, res.num_devices * res.num_workers,
                                      res.images_per_sec)
        res.extra["expected_range"] = (judged and judged.verdict) or ""
        if judged is not None:
            res.extra["expected_range_reference"] = dataclasses.asdict(judged)

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
        from tfbench import data
        res.data_source = data.data_source_label(p)
        res.tf_version = tf.__version__
        res.keras_version = keras.__version__
        res.extra["device_name"] = devices.device_name(r.device)
        res.extra["devices"] = list(r.device.names)
        res.extra["num_epochs"] = r.num_epochs
        res.extra["tf_git_hash"] = tf.version.GIT_VERSION
        res.extra["num_runs"] = p.num_runs if r.mode != "eval" else 1
        res.extra["train_and_eval"] = r.train_and_eval

    def _print_header(self, sp: strategy_lib.StrategyPlan) -> None:
        p, r = self.p, self.r
        from tfbench import data
        self.log.header(Header(
            tf_version=tf.__version__, model=r.spec.header_name,
            dataset=data.describe(p, r.spec.dataset), mode=r.mode,
            train_and_eval=r.train_and_eval, batch_size=r.run_batch_size,
            global_batch_size=r.global_batch, num_batches=r.num_batches,
            num_epochs=r.num_epochs, devices=tuple(r.device.names),
            data_format=r.device.data_format, optimizer=p.optimizer,
            variable_update=sp.variables_label, all_reduce_spec=sp.all_reduce_label,
            show_all_reduce=sp.show_all_reduce, job_name=sp.job_name,
            horovod_device=sp.horovod_device))

    def _build_model(self, res: RunResult):
        r = self.r
        optimizers.set_policy(r.precision)
        with self.strategy.scope():
            model = r.spec.build(r.image_size, r.device.data_format)
        # FLOPs are counted after the run: tracing the model again would delay the first step.
        self.model = model
        return model

    def _fold_batch_norm(self, model, res: RunResult):
        """The folded clone that inference steps run (see models/fold_bn), or None: with
        --nofold_batch_norm, or when the model has no batch norm after a convolution."""
        if not self.p.fold_batch_norm:
            return None
        from tfbench.measure import flops
        from tfbench.models import fold_bn
        # The published parameter count is the unfolded model's (the clone has extra biases).
        res.params_count = flops.count_params(model)
        with self.strategy.scope():
            folding = fold_bn.fold_batch_norm(model)
        if folding is not None:
            # Shown with tfbench's own lines before the footer: the legacy block stays intact.
            res.extra["batch_norm_folded_convolutions"] = folding.num_folded
            res.notices.append("Batch norm folded into %d convolutions for inference "
                               "(--nofold_batch_norm times the unfolded model)"
                               % folding.num_folded)
        return folding

    def _count_flops(self, model, res: RunResult) -> None:
        from tfbench.measure import flops
        if res.params_count is None:
            res.params_count = flops.count_params(model)
        try:
            res.gflops_per_image = flops.model_forward_flops(model, self.r.image_size) / 1e9
        except Exception as exc:  # noqa: BLE001 - FLOPs are a figure, not a reason to fail
            res.notices.append("FLOPs not counted: %s" % str(exc).splitlines()[0][:120])

    def _step_config(self, mode: str) -> steps.StepConfig:
        p, r = self.p, self.r
        scaling, scale = optimizers.loss_scaling(p, r.precision)
        return steps.StepConfig(
            num_label_classes=r.spec.num_classes - 1, weight_decay=p.weight_decay,
            loss_scaling=scaling, loss_scale=scale,
            accum_steps=p.accum_steps if mode == "training" else 1,
            compute_accuracy=p.print_training_accuracy or mode != "training",
            jit_compile=r.xla, fast_paths=fast_paths.for_device(r.device.kind))

    def _make_optimizer(self):
        p, r = self.p, self.r
        plan, notices = lr.plan_for(p, r.spec, r.images_per_iteration, r.train_examples)
        for notice in notices:
            self.log.notice(notice)
        opt = optimizers.make_optimizer(p, lr.Schedule(plan))
        scaling, scale = optimizers.loss_scaling(p, r.precision)
        if scaling == "dynamic":
            opt = optimizers.LossScaleOptimizer(
                opt, initial_scale=scale, dynamic_growth_steps=p.fp16_inc_loss_scale_every_n)
        if strategy_lib.is_parameter_server(self.strategy):
            _count_every_update(opt)
        return opt

    def _images(self, batch_size: int):
        return steps.synthetic_images(self.strategy, batch_size, self.r.image_size,
                                      optimizers.compute_dtype(self.r.precision))

    def _dataset(self, batch_per_replica: int, train: bool):
        """This process's pipeline, read without tf.distribute (--data_only): one step's batch
        over all local replicas, from the part of the data its replicas would read."""
        index, count = strategy_lib.process_shard(self.strategy)
        return self._pipeline(batch_per_replica * self.r.device.num_devices, train, index, count)

    def _pipeline(self, batch_size: int, train: bool, index=0, count: int = 1):
        """Input pipeline `index` of `count`: batches of batch_size from its part of the data."""
        from tfbench import data
        r = self.r
        return data.make_dataset(self.p, dataset_name=r.spec.dataset, image_size=r.image_size,
                                 batch_size=batch_size, train=train,
                                 dtype=optimizers.compute_dtype(r.precision),
                                 shard=data.Shard(index, count))

    def _inputs(self, batch_per_replica: int, train: bool):
        """(step inputs, from_iterator): synthetic per-replica images or a distributed iterator
        that gives every replica batch_per_replica real images, as synthetic inputs do."""
        if not self.r.real_data:
            return self._images(batch_per_replica), False
        return strategy_lib.distribute_inputs(
            self.strategy,
            lambda index, count: self._pipeline(batch_per_replica, train, index, count)), True

    # ------------------------------------------------------------------------------------
    def _setup_train_or_forward(self, res: RunResult) -> _Setup:
        p, r = self.p, self.r
        training = r.mode == "training"
        self.log.generating_training_model()
        model = self._build_model(res)
        optimizer = None
        with self.strategy.scope():
            if training:
                optimizer = self._make_optimizer()
                optimizer.build(model.trainable_variables)
        folding = None if training else self._fold_batch_norm(model, res)
        if folding is not None:
            # Nothing restores into the source here: drop it, so the peak memory from now on
            # holds one copy of the weights, as an unfolded run does.
            model = self.model = folding.model
        builder = steps.Steps(model, optimizer, self.strategy, self._step_config(r.mode))
        accum = p.accum_steps if training else 1
        inputs, from_iterator = self._inputs(r.batch_size * accum, train=True)
        setup = _Setup(model, optimizer,
                       builder.train_step(from_iterator) if training
                       else builder.forward_step(from_iterator), inputs)
        if r.train_and_eval:
            self.log.generating_evaluation_model()
            eval_builder = steps.Steps(model, None, self.strategy, self._step_config("eval"))
            setup.eval_inputs, eval_iter = self._inputs(r.eval_batch_size, train=False)
            setup.eval_fn = eval_builder.eval_step(eval_iter)
        self.log.initializing()
        if training and p.train_dir:
            self._setup_train_dir(setup, res)
        return setup

    def _setup_train_dir(self, setup: _Setup, res: RunResult) -> None:
        """--train_dir: checkpoints and summaries from the chief alone; every process resumes
        from the chief's state.

        Processes saving one step into one directory collide (TensorFlow writes
        <prefix>_temp/part-* and then merges and renames), as the legacy script warned of
        Horovod. So horovod ranks other than 0 save nothing, and the other
        MultiWorkerMirroredStrategy workers save into a scratch directory of their own that is
        removed after each save. Only the chief reads --train_dir: the others receive its
        variables, so the hosts need not share a file system.
        """
        p = self.p
        ckpt = tf.train.Checkpoint(model=setup.model, optimizer=setup.optimizer)
        chief = strategy_lib.is_chief(self.strategy)
        if chief:
            setup.manager = tf.train.CheckpointManager(
                ckpt, p.train_dir, max_to_keep=p.max_ckpts_to_keep, checkpoint_name="model.ckpt")
            if setup.manager.latest_checkpoint:
                ckpt.restore(setup.manager.latest_checkpoint).expect_partial()
        else:
            notice = ("--train_dir: %s writes the checkpoints and summaries; this process "
                      "writes none there and resumes from its state"
                      % strategy_lib.chief_label(self.strategy))
            self.log.notice(notice)
            res.notices.append(notice)
            if strategy_lib.saves_beside_chief(self.strategy):
                setup.scratch_dir = os.path.join(
                    tempfile.gettempdir(), "tfbench-ckpt-%d-%s" % (os.getpid(), uuid.uuid4().hex))
                setup.manager = tf.train.CheckpointManager(
                    ckpt, setup.scratch_dir, max_to_keep=1, checkpoint_name="model.ckpt")
        # Steps broadcast the initial state before the restore; this sends the restored one.
        strategy_lib.sync_restored_state(
            self.strategy, list(setup.model.variables) + list(setup.optimizer.variables))
        setup.init_global_step = int(setup.optimizer.iterations.numpy())
        if chief and p.summary_verbosity >= 1 and p.save_summaries_steps > 0:
            setup.summary_writer = tf.summary.create_file_writer(p.train_dir)

    def _run_train_or_forward(self, res: RunResult) -> None:
        p, r = self.p, self.r
        training = r.mode == "training"
        s = self._setup_train_or_forward(res)
        checkpoints = _Checkpoints(p, s.manager, s.optimizer, s.scratch_dir)

        self.log.warmup_started()
        warm_start = time.perf_counter()
        for _ in range(r.num_warmup):
            t0 = time.perf_counter()
            out = s.step_fn(s.inputs).numpy()
            res.warmup_times.append(time.perf_counter() - t0)
            raise_if_stopped()
            self._check_finite(out, "warm-up")
            checkpoints.maybe_save()
        res.warmup_sec = time.perf_counter() - warm_start if r.num_warmup else None
        res.first_step_sec = res.warmup_times[0] if res.warmup_times else None
        if p.trace_file:
            self._trace(s)
        self.log.warmup_done()
        self._steady_state()

        # --num_batches is a global-step target when resuming (legacy: num_batches -
        # init_global_step // num_workers where every worker's update counts).
        num_timed = max(r.num_batches - s.init_global_step // r.iterations_per_step, 0)
        totals = []
        for run in range(p.num_runs):
            if run:
                if p.cooldown_secs:
                    time.sleep(p.cooldown_secs)
                self.log.repeat_started(run + 1, p.num_runs)
            totals.append(self._timed_loop(s, res, num_timed, checkpoints,
                                           new_measurement=run == 0))
        if len(totals) > 1:
            summary = stats.repeat_summary(totals, p.unstable_threshold_pct)
            res.extra.update(summary)
            res.images_per_sec = summary["images_per_sec_median"]
        if training and s.manager is not None:
            checkpoints.save(checkpoints.global_step())
        if r.train_and_eval:
            self.log.training_done()
            if not res.extra.get("stopped_early"):
                self.log.evaluation_started(checkpoints.global_step(), final=True)
                self._evaluate(s.eval_fn, s.eval_inputs, r.num_eval_batches, res)

    def _timed_loop(self, s: _Setup, res: RunResult, num_timed: int,
                    checkpoints: "_Checkpoints", new_measurement: bool = True) -> float:
        """One measurement: num_timed steps with Step lines; returns total images/sec.

        The monitors' window is open exactly while res.wall_time runs (evaluations excluded)."""
        p, r = self.p, self.r
        training = r.mode == "training"
        with_acc = p.print_training_accuracy or not training
        self.log.steps_started(p.loss_type_to_report, with_acc)
        loss_index = 0 if p.loss_type_to_report == "base_loss" else 1
        eval_due = eval_steps_during_training(p, r) if r.train_and_eval else set()
        times: list[float] = []
        out = None
        paused = 0.0
        self._steps_in_wall_time = 0
        self._open_window(new_measurement)
        loop_start = time.perf_counter()
        for i in range(num_timed):
            t0 = time.perf_counter()
            out = s.step_fn(s.inputs).numpy()
            elapsed = time.perf_counter() - t0
            raise_if_stopped()
            times.append(elapsed)
            res.step_times.append(elapsed)
            # Covers every step timed so far: a NaN or an interrupt below leaves a fallback
            # images/sec over exactly these steps.
            res.wall_time = time.perf_counter() - loop_start - paused
            self._steps_in_wall_time = len(times)
            if res.first_step_sec is None:
                res.first_step_sec = elapsed
            loss = float(out[loss_index]) if training else 0.0
            res.losses.append(loss)
            res.final_loss = loss
            if with_acc:
                res.top_1_accuracy, res.top_5_accuracy = float(out[2]), float(out[3])
            if should_display(i, p.display_every):
                self._check_finite(out, "step %d" % (i + 1))
                mean, pm, jitter = self._step_stats(res, times, p.display_perf_ewma)
                accs = (float(out[2]), float(out[3])) if with_acc else (None, None)
                res.extra.setdefault("display_events", []).append(
                    {"step": i + 1, "images_per_sec": mean, "time": time.time(),
                     "top_1_accuracy": accs[0], "top_5_accuracy": accs[1]})
                self.log.step(StepReport(step=i + 1, images_per_sec=mean, plusminus=pm,
                                         jitter=jitter, loss=loss, top_1=accs[0],
                                         top_5=accs[1]))
            if training:
                checkpoints.maybe_save()
                if s.summary_writer is not None:  # reading the step is a host round trip
                    self._write_summaries(s, out, checkpoints.global_step())
            if (i + 1) in eval_due:
                pause = time.perf_counter()
                self._close_window()
                self.log.evaluation_started(checkpoints.global_step(), final=False)
                top_1 = self._evaluate(s.eval_fn, s.eval_inputs, r.num_eval_batches, res)
                self._open_window(new_measurement=False)
                paused += time.perf_counter() - pause
                if p.stop_at_top_1_accuracy and top_1 >= p.stop_at_top_1_accuracy:
                    self.log.early_stop(p.stop_at_top_1_accuracy)
                    res.extra["stopped_early"] = True
                    break
                self.log.training_resumed()
            res.wall_time = time.perf_counter() - loop_start - paused
        res.wall_time = time.perf_counter() - loop_start - paused
        self._close_window()
        if not times:
            return 0.0
        self._check_finite(out, "step %d" % len(times))
        self._step_stats(res, times, p.display_perf_ewma)
        res.images_per_sec = len(times) * r.global_batch / res.wall_time
        return res.images_per_sec

    def _step_stats(self, res: RunResult, times: list[float],
                    ewma: Optional[float]) -> tuple[float, float, float]:
        """The Step line's (mean images/sec, +/-, jitter) over `times`, recorded in res."""
        figures = stats.perf_stats(self.r.step_line_batch, times, ewma)
        res.step_images_per_sec, res.step_images_per_sec_plusminus, res.jitter = figures
        return figures

    def _write_summaries(self, s: _Setup, out: np.ndarray, global_step: int) -> None:
        p = self.p
        if s.summary_writer is None or global_step % p.save_summaries_steps:
            return
        with s.summary_writer.as_default(step=global_step):
            opt = s.optimizer
            inner = getattr(opt, "inner_optimizer", opt)
            tf.summary.scalar("learning_rate", inner.learning_rate)
            tf.summary.scalar(p.loss_type_to_report,
                              float(out[0 if p.loss_type_to_report == "base_loss" else 1]))
            if hasattr(opt, "dynamic_scale"):
                tf.summary.scalar("loss_scale", opt.dynamic_scale)
            if p.print_training_accuracy:
                tf.summary.scalar("top_1_accuracy", float(out[2]))
                tf.summary.scalar("top_5_accuracy", float(out[3]))
            if p.summary_verbosity >= 2:
                for v in s.model.trainable_variables:
                    tf.summary.histogram(v.path, v)
        s.summary_writer.flush()

    def _trace(self, s: _Setup) -> None:
        """A TensorFlow profiler trace of a few untimed steps after warm-up (TensorBoard)."""
        from tfbench.engine import tracing
        self.log.tracing(self.p.trace_file)
        tracing.trace_steps(lambda: s.step_fn(s.inputs).numpy(), self.p.trace_file,
                            chrome_json=self.p.use_chrome_trace_format)

    def _check_finite(self, out: np.ndarray, where: str) -> None:
        if not np.all(np.isfinite(out[:2])):
            raise NanLoss("Loss became %s at %s of %s (%s, batch %d): use loss scaling "
                          "(--fp16_enable_auto_loss_scale) or a lower learning rate "
                          "(--init_learning_rate)"
                          % ("NaN" if np.isnan(out[:2]).any() else "Inf", where,
                             self.r.spec.name, self.r.precision, self.r.batch_size))

    def _run_data_only(self, res: RunResult) -> None:
        """--data_only: the input pipeline alone, in the classic log format."""
        p, r = self.p, self.r
        self.log.generating_input_pipeline()
        iterator = iter(self._dataset(r.batch_size, train=True))
        self.log.warmup_started()
        warm_start = time.perf_counter()
        for _ in range(r.num_warmup):
            t0 = time.perf_counter()
            next(iterator)
            res.warmup_times.append(time.perf_counter() - t0)
            raise_if_stopped()
        res.warmup_sec = time.perf_counter() - warm_start if r.num_warmup else None
        self.log.warmup_done()
        self._steady_state()
        self.log.steps_started(p.loss_type_to_report, False)
        self._open_window(new_measurement=True)
        loop_start = time.perf_counter()
        for i in range(r.num_batches):
            t0 = time.perf_counter()
            next(iterator)
            res.step_times.append(time.perf_counter() - t0)
            res.wall_time = time.perf_counter() - loop_start
            self._steps_in_wall_time = len(res.step_times)
            raise_if_stopped()
            if should_display(i, p.display_every):
                mean, pm, jitter = self._step_stats(res, res.step_times, p.display_perf_ewma)
                self.log.step(StepReport(step=i + 1, images_per_sec=mean, plusminus=pm,
                                         jitter=jitter, loss=0.0))
        res.wall_time = time.perf_counter() - loop_start
        self._close_window()
        res.first_step_sec = (res.warmup_times or res.step_times or [None])[0]
        self._step_stats(res, res.step_times, p.display_perf_ewma)
        res.images_per_sec = len(res.step_times) * r.global_batch / res.wall_time

    # ------------------------------------------------------------------------------------
    def _evaluate(self, step_fn, inputs, num_batches: int, res: RunResult,
                  times: Optional[list[float]] = None, timed: bool = False) -> float:
        """Runs eval batches with progress lines and the Accuracy line; returns top-1.

        Each step's time (with its host fetch) goes to `times` when given. `timed`: these steps
        are the run's measurement (--eval), so res.wall_time covers every step in `times`."""
        p, r = self.p, self.r
        # Every worker evaluates its own part of the data (tfbench.distribute.strategy.distribute_inputs)
        # and the accuracy is their mean (Steps.eval_step), so the count is all workers' images.
        global_eval = r.eval_global_batch
        top1s, top5s = [], []
        times = times if times is not None else []
        loop_start = window_start = time.perf_counter()
        for i in range(num_batches):
            t0 = time.perf_counter()
            out = step_fn(inputs).numpy()
            times.append(time.perf_counter() - t0)
            if timed:
                res.wall_time = time.perf_counter() - loop_start
                self._steps_in_wall_time = len(times)
            raise_if_stopped()
            top1s.append(float(out[2]))
            top5s.append(float(out[3]))
            if (i + 1) % p.display_every == 0:
                now = time.perf_counter()
                self.log.evaluation_progress(
                    i + 1, p.display_every * global_eval / (now - window_start))
                window_start = now
        top_1 = float(np.mean(top1s)) if top1s else 0.0
        top_5 = float(np.mean(top5s)) if top5s else 0.0
        res.top_1_accuracy, res.top_5_accuracy = top_1, top_5
        res.eval_examples = num_batches * global_eval
        res.extra.setdefault("evaluations", []).append(
            {"top_1_accuracy": top_1, "top_5_accuracy": top_5, "examples": res.eval_examples})
        self.log.accuracy(top_1, top_5, res.eval_examples)
        return top_1

    def _run_eval(self, res: RunResult) -> None:
        p, r = self.p, self.r
        self.log.generating_evaluation_model()
        model = self._build_model(res)
        ckpt = tf.train.Checkpoint(model=model)
        images, from_iterator = self._inputs(r.eval_batch_size, train=False)
        folding = self._fold_batch_norm(model, res)
        step_fn = steps.Steps(folding.model if folding else model, None, self.strategy,
                              self._step_config("eval")).eval_step(from_iterator)
        evaluated = None
        while True:
            path = _latest_checkpoint(p.train_dir)
            if path is None:
                raise UsageError("Checkpoint not found in %s" % p.train_dir)
            if path != evaluated:
                ckpt.restore(path).expect_partial()
                if folding is not None:
                    folding.refresh(model)
                self.log.checkpoint_loaded(path)
                if not res.warmup_times:
                    self._eval_cold_call(step_fn, images, res)
                # Each evaluation is a new measurement: its steps replace the last ones.
                res.step_times.clear()
                res.wall_time, res.images_per_sec, self._steps_in_wall_time = 0.0, 0.0, 0
                self._open_window(new_measurement=True)
                loop_start = time.perf_counter()
                self._evaluate(step_fn, images, r.num_batches, res, times=res.step_times,
                               timed=True)
                res.wall_time = time.perf_counter() - loop_start
                self._close_window()
                if res.step_times:
                    res.images_per_sec = len(res.step_times) * r.global_batch / res.wall_time
                    self._step_stats(res, res.step_times, None)
                evaluated = path
            if not p.eval_interval_secs:
                break
            time.sleep(p.eval_interval_secs)

    def _eval_cold_call(self, step_fn, inputs, res: RunResult) -> None:
        """One untimed eval batch before the first timed one, as training's warm-up: the first
        call traces and compiles the step (XLA too) and, on a GPU, autotunes cuDNN, none of
        which belongs in steady-state images/sec or latency. The legacy script likewise builds
        its graph before its timer starts. With real data it reads the first batch, so the
        timed batches are the next num_batches (the eval input repeats). No line is printed:
        the legacy eval log has no warm-up lines; the cold call shows in `Cold start:`."""
        start = time.perf_counter()
        step_fn(inputs).numpy()
        res.warmup_times.append(time.perf_counter() - start)
        res.first_step_sec = res.warmup_sec = res.warmup_times[0]
        res.num_warmup_batches = len(res.warmup_times)
        raise_if_stopped()
        self._steady_state()


def _count_every_update(optimizer) -> None:
    """Each parameter-server worker's update adds one to `iterations`, the global step.

    Keras adds with assign(iterations + 1), a read and then a write, so two workers updating at
    once would count one update between them; TensorFlow's AssignAddVariableOp adds under the
    variable's lock on the ps.
    """
    counter = optimizer.iterations
    counter.assign_add = lambda value: counter.value.assign_add(tf.cast(value, counter.dtype))


def _latest_checkpoint(path: str) -> Optional[str]:
    """A directory's latest checkpoint, or a `.../model.ckpt-N` prefix given directly."""
    if os.path.isdir(path):
        return tf.train.latest_checkpoint(path)
    if tf.io.gfile.exists(path + ".index"):
        return path
    return None


class _Checkpoints:
    """Periodic (--save_model_steps / --save_model_secs) and final checkpoints, never twice."""

    def __init__(self, p, manager: Optional[tf.train.CheckpointManager], optimizer,
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
        if self.p.save_model_steps and step % self.p.save_model_steps == 0:
            self.save(step)
        elif self.p.save_model_secs and time.time() - self.saved_time >= self.p.save_model_secs:
            self.save(step)


def diagnose_input(p, log: RunLog, result: RunResult) -> RunResult:
    """--diagnose_input: the same configuration on the input pipeline alone, on synthetic data
    and on real data (last, so the log ends like a real-data run); the verdict's figures."""
    from tfbench import data
    resolve(p)  # validates the configuration before three runs start
    base = p.replace(diagnose_input=False)
    figures = {}
    for part, key, variant in (
            ("input_only", "input_only_images_per_sec", base.replace(data_only=True)),
            ("synthetic", "synthetic_images_per_sec", base.replace(use_synthetic_data=True))):
        log.diagnosis_started(part)
        figures[key] = Benchmark(variant, log).run(RunResult()).images_per_sec
    log.diagnosis_started("real")
    Benchmark(base, log).run(result)
    bound, _ = data.input_bound_verdict(figures["synthetic_images_per_sec"],
                                        result.images_per_sec,
                                        figures["input_only_images_per_sec"])
    result.extra.update(figures)
    result.extra["input_bound"] = bound
    return result
