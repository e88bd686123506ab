"""Summary statistics of measured times and repeats. Pure Python and numpy, no TensorFlow.

Percentiles use linear interpolation between closest ranks (numpy's default "linear" method,
Hyndman & Fan type 7): for n sorted values x[0..n-1], the q-th percentile sits at rank
(n - 1) * q / 100, interpolated between its two neighbours. With 100 steps p99 therefore lies
between the 99th and the 100th value; with few steps the tail percentiles approach the max.

Keys are the CSV column names of tfbench.output.csv_out where a column exists; the console
lines made of these figures are tfbench.output.console's.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Optional, Sequence

import numpy as np

LATENCY_PERCENTILES = (50, 90, 99)
DEFAULT_UNSTABLE_THRESHOLD_PCT = 10.0


def perf_stats(batch_size: int, step_times: Sequence[float],
               ewma: Optional[float] = None) -> tuple[float, float, float]:
    """A Step line's (mean images/sec, +/-, jitter) over the timed steps so far, as the legacy
    script computes them.

    mean = B / mean(times) (EWMA-weighted mean of times when `ewma` is set); +/- = population
    std of per-step speeds / sqrt(n); jitter = 1.4826 * median absolute deviation of speeds.
    """
    times = np.asarray(step_times, dtype=np.float64)
    n = len(times)
    if ewma is not None and n > 0:
        weights = (1.0 - ewma) ** np.arange(n - 1, -1, -1)
        mean_time = float(np.sum(weights * times) / np.sum(weights))
    else:
        mean_time = float(np.mean(times))
    mean = batch_size / mean_time
    speeds = batch_size / times
    uncertainty = float(np.std(speeds) / math.sqrt(n))
    jitter = float(1.4826 * np.median(np.abs(speeds - np.median(speeds))))
    return mean, uncertainty, jitter


def latency_summary(step_times_sec: Sequence[float]) -> dict[str, Optional[float]]:
    """Per-batch latency in ms: p50, p90, p99, mean, min, max (all None without steps)."""
    keys = ["latency_ms_p%d" % q for q in LATENCY_PERCENTILES] + [
        "latency_ms_mean", "latency_ms_min", "latency_ms_max"]
    if not step_times_sec:
        return dict.fromkeys(keys)
    ms = np.asarray(step_times_sec, dtype=np.float64) * 1000.0
    values = list(np.percentile(ms, LATENCY_PERCENTILES, method="linear"))
    values += [ms.mean(), ms.min(), ms.max()]
    return {k: float(v) for k, v in zip(keys, values)}


def cold_start_summary(warmup_times: Sequence[float],
                       step_times: Sequence[float]) -> dict[str, Optional[float]]:
    """Cold start versus steady state, for RunResult.extra.

    The cold step itself and the warm-up's wall time are RunResult's first_step_sec and
    warmup_sec. num_warmup_steps: untimed steps. steady_step_sec_mean: mean timed step.
    first_step_vs_steady: how many steady steps the very first step (warm-up if there was one,
    else the first timed step: tracing, compilation, autotuning) costs.
    """
    first = warmup_times[0] if warmup_times else (step_times[0] if step_times else None)
    steady = float(np.mean(step_times)) if step_times else None
    ratio = first / steady if first is not None and steady else None
    return {
        "num_warmup_steps": len(warmup_times),
        "steady_step_sec_mean": steady,
        "first_step_vs_steady": ratio,
    }


def between_steps_summary(between_steps_sec: Optional[float],
                          num_steps: int) -> dict[str, Optional[float]]:
    """host_ms_between_steps: the mean time per timed step that the host spent between steps
    (the runner's loop, Step lines), in ms. total images/sec counts it (images over the loop's
    wall time); the step times, hence latency and the steady-state step, do not. So at batch
    size B: 1000 * B / total images/sec = steady state ms/step + host_ms_between_steps."""
    if between_steps_sec is None or not num_steps:
        return {"host_ms_between_steps": None}
    return {"host_ms_between_steps": max(between_steps_sec, 0.0) / num_steps * 1000.0}


def timed_calls(call: Callable[[], object], repeats: int, warmup: int,
                clock: Callable[[], float]) -> list[float]:
    """`call` made `warmup` times untimed, then `repeats` times, each timed by `clock`
    (seconds): a probe's timings, for probe_summary."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = clock()
        call()
        times.append(clock() - start)
    return times


def probe_summary(times_sec: Sequence[float]) -> dict[str, Optional[float]]:
    """A probe's repeated timings (warm-up already left out) in ms: median (the mean of the two
    middle ones for an even count), min, max and spread = (max - min) / median x 100."""
    if not times_sec:
        return {"median_ms": None, "min_ms": None, "max_ms": None, "spread_pct": None}
    ms = [t * 1000.0 for t in times_sec]
    median = statistics.median(ms)
    return {"median_ms": median, "min_ms": min(ms), "max_ms": max(ms),
            "spread_pct": (max(ms) - min(ms)) / median * 100.0 if median > 0 else None}


def repeat_summary(values: Sequence[float],
                   unstable_threshold_pct: float = DEFAULT_UNSTABLE_THRESHOLD_PCT
                   ) -> dict[str, Any]:
    """Median, min, max and spread of one figure (images/sec) over repeated runs.

    spread_pct = (max - min) / median * 100; the result is unstable when spread_pct exceeds
    the threshold. A single run has spread 0.
    """
    values = [float(v) for v in values]
    result: dict[str, Any] = {
        "num_runs": len(values),
        "images_per_sec_median": None,
        "images_per_sec_min": None,
        "images_per_sec_max": None,
        "spread_pct": None,
        "unstable": None,
        "unstable_threshold_pct": float(unstable_threshold_pct),
        "images_per_sec_runs": values,
    }
    if not values:
        return result
    median = statistics.median(values)
    low, high = min(values), max(values)
    spread = (high - low) / median * 100.0 if median > 0 else None
    result.update({
        "images_per_sec_median": median,
        "images_per_sec_min": low,
        "images_per_sec_max": high,
        "spread_pct": spread,
        "unstable": spread is not None and spread > unstable_threshold_pct,
    })
    return result
