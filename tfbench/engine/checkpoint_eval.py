"""--eval: evaluate the latest checkpoint of --train_dir (again whenever a new one appears, with
--eval_interval_secs). The first batch is an untimed cold call; the timed batches are the
measurement, each evaluation a new one. (`tfbench evaluate`, the GPU evaluation method, is
tfbench.sweep.evaluation.)
"""

from __future__ import annotations


from tfbench.engine import steps
from tfbench.engine.base import ModeRunner, StepFn
from tfbench.engine import checkpoints
from tfbench.engine.checkpoints import latest_checkpoint
from tfbench.errors import UsageError, raise_if_stopped
from tfbench.results import RunResult


class CheckpointEvalRunner(ModeRunner):
    """The eval step over the restored model (batch norm folded unless --nofold_batch_norm)."""

    def run(self, res: RunResult) -> None:
        p, plan, log, now = self.p, self.plan, self.log, self.clock.perf_counter
        log.generating_evaluation_model()
        model = self.model = self.build_model(res)
        images, from_iterator = self.inputs(plan.eval_batch_size, train=False)
        folding = self.fold_batch_norm(model, res)
        served = p.asks.served
        step_fn = None if served else steps.Steps(
            folding.model if folding else model, None, self.strategy,
            self.step_config("eval")).eval_step(from_iterator)
        evaluated = None
        while True:
            path = latest_checkpoint(p.outputs.train_dir)
            if path is None:
                raise UsageError("Checkpoint not found in %s" % p.outputs.train_dir)
            if path != evaluated:
                checkpoints.restore(path, model)
                if folding is not None:
                    folding.refresh(model)
                log.checkpoint_loaded(path)
                if served:   # one checkpoint (config.params refuses --eval_interval_secs)
                    step_fn = self.serve(folding.model if folding else model, res,
                                         plan.eval_batch_size, from_iterator, False)
                    model = folding = None   # the served copy is the one kept
                if not res.warmup_times:
                    self._cold_call(step_fn, images, res)
                # Each evaluation is a new measurement: its steps replace the last ones.
                res.step_times.clear()
                self.meter.start_repeat(replace=True)
                self.meter.open_window(new_measurement=True)
                loop_start = now()
                self._run_eval_batches(step_fn, images, plan.num_batches, res,
                                       times=res.step_times, timed=True)
                wall_time = now() - loop_start
                self.meter.close_window()
                self.meter.end_repeat(len(res.step_times), wall_time)
                if res.step_times:
                    res.between_steps_sec = wall_time - sum(res.step_times)
                    self.step_stats(res, res.step_times, None)
                evaluated = path
            if not p.mode.eval_interval_secs:
                break
            self.clock.sleep(p.mode.eval_interval_secs)

    def _cold_call(self, step_fn: StepFn, inputs, res: RunResult) -> None:
        """One untimed eval batch before the first timed one, as training's warm-up: the first
        call traces and compiles the step (XLA too) and, on a GPU, autotunes cuDNN, none of
        which belongs in steady-state images/sec or latency. The legacy script likewise builds
        its graph before its timer starts. With real data it reads the first batch, so the
        timed batches are the next num_batches (the eval input repeats). No line is printed:
        the legacy eval log has no warm-up lines; the cold call shows in `Cold start:`."""
        now = self.clock.perf_counter
        start = now()
        step_fn(inputs).numpy()
        res.warmup_times.append(now() - start)
        res.first_step_sec = res.warmup_sec = res.warmup_times[0]
        raise_if_stopped()
        self.meter.steady_state()
