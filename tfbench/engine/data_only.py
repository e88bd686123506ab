"""--data_only: the input pipeline alone, timed batch by batch, in the classic log format (the
Step lines' loss is 0).

A batch's time runs from the previous batch's arrival to its own (data.diagnose.arrival_intervals):
the timed batches cover the loop's whole wall time, so the Step lines' images/sec, the footer's
total and the input diagnosis's "input pipeline alone" figure are one figure (images / seconds
of the loop), not a mean of next() calls that leaves out the time between them."""

from __future__ import annotations

from tfbench.data import diagnose
from tfbench.engine.base import ModeRunner, should_display
from tfbench.engine.runlog import StepReport
from tfbench.errors import raise_if_stopped
from tfbench.results import RunResult


class DataOnlyRunner(ModeRunner):
    """Batches read from this process's pipeline without tf.distribute and without a model."""

    def run(self, res: RunResult) -> None:
        p, plan, log, now = self.p, self.plan, self.log, self.clock.perf_counter
        log.generating_input_pipeline()
        iterator = iter(self.dataset(plan.train_batch_size, train=True))
        log.warmup_started()
        log.step_progress("warmup", 0, plan.num_warmup)
        warm_start = now()
        for i in range(plan.num_warmup):
            t0 = now()
            next(iterator)
            res.warmup_times.append(now() - t0)
            raise_if_stopped()
            log.step_progress("warmup", i + 1, plan.num_warmup)
        res.warmup_sec = now() - warm_start if plan.num_warmup else None
        log.warmup_done()
        self.meter.steady_state()
        log.steps_started(p.measurement.loss_type_to_report, False)
        log.step_progress("timed", 0, plan.num_batches)
        self.meter.start_repeat()
        self.meter.open_window(new_measurement=True)
        wall_time = 0.0
        for i, interval in enumerate(diagnose.arrival_intervals(iterator, plan.num_batches, now)):
            res.step_times.append(interval)
            wall_time += interval
            self.meter.timed(len(res.step_times), wall_time)
            raise_if_stopped()
            log.step_progress("timed", i + 1, plan.num_batches)
            if should_display(i, p.measurement.display_every):
                mean, pm, jitter = self.step_stats(res, res.step_times,
                                                   p.measurement.display_perf_ewma)
                log.step(StepReport(step=i + 1, images_per_sec=mean, plusminus=pm,
                                    jitter=jitter, loss=0.0))
        self.meter.close_window()
        self.meter.end_repeat(len(res.step_times), wall_time)
        res.first_step_sec = (res.warmup_times or res.step_times or [None])[0]
        self.step_stats(res, res.step_times, p.measurement.display_perf_ewma)
