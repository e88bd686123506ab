"""Every figure beside the timed steps: what the timed steps covered, the monitors' windows and
device-memory peaks while a run goes on (Meter), and the figures computed when it ends
(finish), on success and on failure.

finish() writes figures only into RunResult: total images/sec and the wall time it divides
(from the repeats the Meter recorded: set once, here), FLOPs and MFU, latency, cold start,
memory, the monitors' summaries and time series, the expected range, the training-time estimate
and the environment fields that changed. tfbench.output.console prints them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Optional, Sequence

from tfbench import monitors
from tfbench.config.settings import Settings
from tfbench.engine.resolved import TRAINING, Resolved
from tfbench.engine.runlog import RunLog, record_notice
from tfbench.measure import environment, estimate, expected_range, flops, memory, peak, stats
from tfbench.results import RunResult


@dataclasses.dataclass
class Repeat:
    """One repeat of the timed steps, as far as it went: the steps timed, the wall time they
    cover (evaluations between them excluded) and whether it ran to its end."""
    steps: int = 0
    wall_time: float = 0.0
    complete: bool = False


class Meter:
    """The monitors and device-memory peaks around the timed steps of one run.

    Runners call steady_state() when warm-up ends (the warm-up's memory peak is kept apart),
    open_window() / close_window() exactly around timed steps (the monitors' figures cover
    those only: tfbench.monitors.aggregate; the memory peaks are read as each window closes,
    so what runs after the timed steps, a final checkpoint or evaluation, is not in them), run
    an evaluation inside `evaluation()` (its peak is its own figure), and record each repeat
    of the timed steps (start_repeat, timed after every step, end_repeat): finish() computes
    total images/sec from the repeats, once, a failed run's from the steps timed until then.
    """

    def __init__(self, device_names: Sequence[str], mons: Sequence[monitors.Monitor] = ()):
        self.device_names = tuple(device_names)
        self.monitors = list(mons)
        self.reset_error: Optional[str] = None   # why a device peak could not be reset
        self.warmup_peaks: Optional[dict[str, Optional[int]]] = None
        # The device peaks of the timed steps (None until a window closed), why one could not
        # be read, and the host's peak RSS by then.
        self.timed_peaks: Optional[dict[str, Optional[int]]] = None
        self.timed_unavailable: Optional[str] = None
        self.timed_host_rss: Optional[int] = None
        self.eval_peaks: Optional[dict[str, Optional[int]]] = None   # evaluations' own
        self.repeats: list[Repeat] = []
        self.elsewhere: Optional[str] = None   # why this process measures no step

    @classmethod
    def start(cls, plan: Resolved, interval_sec: float) -> "Meter":
        """Resets the device peaks and starts the monitors, before the model is built.

        On a parameter-server run the steps run in other processes (the workers), so this
        one's devices and host, idle, are not measured; `elsewhere` says why."""
        if plan.parameter_server:
            meter = cls(())
            meter.elsewhere = "the parameter-server workers run the steps, not this controller"
            return meter
        meter = cls(plan.device.names)
        meter.reset_error = memory.reset_peak(meter.device_names)
        gpus = None
        if plan.device.kind == "gpu":
            gpus = list(plan.device.gpu_indices or range(plan.device.num_devices))
        meter.monitors = monitors.create(plan.device.kind, gpus, interval_sec)
        for m in meter.monitors:
            m.start()
        return meter

    def start_repeat(self, replace: bool = False) -> None:
        """A repeat of the timed steps starts (--num_runs repeats them); `replace`: it replaces
        the repeats before it (each evaluation of --eval is a new measurement)."""
        if replace:
            self.repeats.clear()
        self.repeats.append(Repeat())

    def timed(self, steps: int, wall_time: float) -> None:
        """The current repeat so far: `steps` timed steps in `wall_time` seconds (evaluations
        between them excluded). Said after every step, so that a failure leaves them; two
        assignments, as it runs between timed steps."""
        repeat = self.repeats[-1]
        repeat.steps, repeat.wall_time = steps, wall_time

    def end_repeat(self, steps: int, wall_time: float) -> None:
        """The current repeat ran to its end: `steps` timed steps in `wall_time` seconds."""
        self.timed(steps, wall_time)
        self.repeats[-1].complete = True

    def steady_state(self) -> None:
        """Warm-up is over: the device memory peak so far (autotuning scratch included) is kept
        apart before the peak is reset."""
        self.warmup_peaks = memory.peak_device_bytes(self.device_names)[0]
        self.reset_error = self.reset_error or memory.reset_peak(self.device_names)

    def open_window(self, new_measurement: bool) -> None:
        """Timed steps start: the monitors' figures cover them (tfbench.monitors.aggregate).
        A new measurement replaces the windows before it; otherwise the window adds to them."""
        for m in self.monitors:
            if new_measurement:
                m.mark_steady()
            else:
                m.resume()

    def close_window(self) -> None:
        """Timed steps stop (end of a repeat, an evaluation): the monitors' window closes and
        the memory peaks so far count as the timed steps'."""
        for m in self.monitors:
            m.pause()
        if self.elsewhere:
            return
        peaks, reason = memory.peak_device_bytes(self.device_names)
        self.timed_peaks = _larger(self.timed_peaks, peaks)
        self.timed_unavailable = self.timed_unavailable or reason
        self.timed_host_rss = memory.host_peak_rss_bytes()

    @contextlib.contextmanager
    def evaluation(self) -> Iterator[None]:
        """An evaluation between or after timed steps, outside their window: the device peak
        is reset before it and read after it (eval_peak_mem_gb), then reset again so the
        timed steps that follow start from the memory in use."""
        self.reset_error = self.reset_error or memory.reset_peak(self.device_names)
        yield
        self.eval_peaks = _larger(self.eval_peaks, memory.peak_device_bytes(self.device_names)[0])
        self.reset_error = self.reset_error or memory.reset_peak(self.device_names)

    def stop(self) -> None:
        for m in self.monitors:
            m.stop()


def finish(res: RunResult, p: Settings, plan: Resolved, meter: Meter, model: Any,
           env_before: Optional[dict], log: RunLog, failed: bool = False) -> None:
    """Summaries of every measurement taken; runs on success and on failure alike.

    model: the model the timed steps ran, whose FLOPs are counted (None if none was built);
    on a failure the FLOP count (a second trace of the model) is skipped."""
    meter.stop()
    if meter.repeats:
        total_images_per_sec(res, p, plan, meter.repeats)
    ips = res.images_per_sec or None
    # This host's monitors and memory see this worker's images only.
    timed_images = len(res.step_times) * plan.worker_batch
    local_ips = ips / plan.num_workers if ips else None
    if model is not None and not failed:
        count_flops(model, plan.image_size, res, log)
    if meter.elsewhere:
        # The controller's own devices are not the workers': no peak, MFU or published range
        # judged from them (runner.describe named no device).
        record_notice(log, res, "MFU and the published range are not judged on a "
                      "parameter-server controller: %s" % meter.elsewhere)
    flops_figures(res, p, plan, ips, judge_peak=not meter.elsewhere)
    res.extra.update(stats.latency_summary(res.step_times))
    res.extra.update(stats.cold_start_summary(res.warmup_times, res.step_times))
    res.extra.update(stats.between_steps_summary(res.between_steps_sec, len(res.step_times)))
    # The peaks as the last timed window closed; read now when none closed (a failure).
    peaks, unavailable = (meter.timed_peaks, meter.timed_unavailable)
    if peaks is None:
        peaks, unavailable = memory.peak_device_bytes(meter.device_names)
    eval_peaks = meter.eval_peaks
    if meter.reset_error:   # the peak would also cover the warm-up
        peaks, unavailable = dict.fromkeys(peaks), meter.reset_error
        eval_peaks = None
    host_rss = None if meter.elsewhere else (meter.timed_host_rss
                                             or memory.host_peak_rss_bytes())
    res.extra.update(memory.memory_summary(plan.device.kind, peaks, host_rss, local_ips,
                                           meter.elsewhere or unavailable, meter.warmup_peaks,
                                           eval_peaks))
    if meter.monitors:
        res.extra.update(monitors.summary(meter.monitors, timed_images, local_ips))
        res.extra["samples"] = monitors.samples(meter.monitors)
    if not meter.elsewhere:
        expected_range_figures(res, plan.device.kind)
    if p.measurement.estimate_dataset_size and plan.mode == TRAINING:
        res.extra.update(estimate.estimate_summary(
            ips, p.measurement.estimate_dataset_size, p.measurement.estimate_epochs,
            p.measurement.estimate_utilization))
    if env_before is not None:
        after = environment.capture(res.command.split() if res.command else None)
        res.environment["after"] = after
        res.extra["environment_changes"] = environment.diff(env_before, after)


def total_images_per_sec(res: RunResult, p: Settings, plan: Resolved,
                         repeats: Sequence[Repeat]) -> None:
    """Total images/sec (the footer's `total images/sec`) and the wall time it divides: the
    one place either is set. A repeat's figure is its timed steps' images over their wall time;
    the run's is the median of the repeats that ran to their end (with their spread, over
    several), or where none did (an interrupt, a NaN) the steps the last one timed; num_runs
    counts the repeats it summarises (--num_runs asks for them; an interrupt ends them early)."""
    complete = [r for r in repeats if r.complete] or list(repeats[-1:])
    totals = [r.steps * plan.global_batch / r.wall_time if r.steps and r.wall_time else 0.0
              for r in complete]
    res.wall_time = repeats[-1].wall_time   # the last repeat's, as far as it went
    if len(totals) > 1:
        summary = stats.repeat_summary(totals, p.measurement.unstable_threshold_pct)
        res.extra.update(summary)
        res.images_per_sec = summary["images_per_sec_median"]
    else:
        res.images_per_sec = totals[0]
        res.extra["num_runs"] = 1


def _larger(before: Optional[dict[str, Optional[int]]],
            now: dict[str, Optional[int]]) -> dict[str, Optional[int]]:
    """Per device, the larger of two peaks (None where neither is known)."""
    if before is None:
        return dict(now)
    return {name: max((b for b in (before.get(name), now.get(name)) if b), default=None)
            for name in dict.fromkeys([*before, *now])}


def count_flops(model, image_size: int, res: RunResult, log: RunLog) -> None:
    try:
        res.gflops_per_image = flops.model_forward_flops(model, image_size) / 1e9
    except Exception as exc:  # noqa: BLE001 - FLOPs are a figure, not a reason to fail
        record_notice(log, res, "FLOPs not counted: %s" % str(exc).splitlines()[0][:120])


def flops_figures(res: RunResult, p: Settings, plan: Resolved, ips: Optional[float],
                  judge_peak: bool = True) -> None:
    """Achieved TFLOP/s (training counted as 3x forward) and MFU where a peak is known
    (judge_peak: this process's devices ran the steps)."""
    if not (res.gflops_per_image and ips):
        return
    # Training costs about 3x the forward pass (forward + two backward matmuls).
    factor = 3.0 if plan.mode == TRAINING else 1.0
    res.tflops_per_sec = res.gflops_per_image * factor * ips / 1000.0
    if not judge_peak:
        return
    name = res.extra.get("device_name", "")
    per_device = p.measurement.peak_tflops or (
        peak.gpu_peak_tflops(name, plan.precision) if plan.device.kind == "gpu" else None) \
        or peak.cached_peak(name, plan.precision)
    if per_device:
        res.extra["peak_tflops"] = per_device
        res.extra["mfu_pct"] = peak.mfu_pct(res.tflops_per_sec, per_device,
                                            plan.total_devices)


def expected_range_figures(res: RunResult, device_kind: str) -> None:
    """Where the GPU is in the published table, for the run's model version and batch per GPU:
    the verdict (within / below / above its band), the figures it used
    (`expected_range_source`) and the band with its sources (`expected_range_reference`)."""
    if not res.images_per_sec or device_kind != "gpu":
        return
    judged = expected_range.judge(res.extra.get("device_name", ""), res.model, res.mode,
                                  res.precision, res.num_devices * res.num_workers,
                                  res.images_per_sec, batch_per_gpu=res.batch_size or None)
    res.extra["expected_range"] = (judged and judged.verdict) or ""
    res.extra["expected_range_source"] = expected_range.reference_used(judged) \
        if judged is not None and judged.verdict else ""
    if judged is not None:
        res.extra["expected_range_reference"] = dataclasses.asdict(judged)
