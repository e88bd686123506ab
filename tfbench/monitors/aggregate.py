"""Pure functions over monitor samples: steady-state means and maxima, energy, throttling.

No NVML, psutil or threads here, so every figure is testable on recorded samples.

A sample is a plain dict. Every sample carries
  t      seconds since the monitor started (samples of one tick share t),
  phase  "start" (taken by start()), "warmup", "steady_start" (taken by mark_steady()),
         "steady", "steady_end" (pause()), "paused", "steady_resume" (resume()), or "end"
         (taken by stop()).
GPU samples add: gpu, power_w, energy_j (the driver's cumulative counter, J), gpu_util_pct,
mem_util_pct, mem_used_bytes, temp_c, sm_clock_mhz, throttle_mask, throttle_reasons; host
samples add cpu_util_pct, proc_cpu_pct, rss_bytes. A reading the device does not support is None.

Measurement windows: the runner opens a window when timed steps start and closes it when they
stop (repeats, evaluations, cooldowns and checkpoints after the loop fall between windows), so
every figure covers exactly the timed steps its images are counted over. A window runs from an
opening boundary ("steady_start" or "steady_resume") to a closing one ("steady_end", or "end"
while the window is open). A "steady_start" begins a new measurement: windows before it no
longer count. Utilisation and power readings describe the period before the reading, so a
window's readings are its samples after the opening boundary, up to and including the closing
one. Energy is summed over the windows, each from its opening to its closing boundary. If
mark_steady() was never called, the whole run (everything after "start") is one window.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Optional

from tfbench.measure import clock_events

GB = float(1 << 30)   # GiB: every *_gb figure is in 2**30 bytes

# NVML clocks event (throttle) reason bits and their names: tfbench.measure.clock_events.
THROTTLE_REASONS = clock_events.REASONS
THROTTLING_MASK = clock_events.THROTTLING_MASK
decode_throttle = clock_events.decode

OPENING_PHASES = ("steady_start", "steady_resume")
CLOSING_PHASES = ("steady_end", "end")


def throttling_reasons(mask: Optional[int]) -> list[str]:
    """Only the reasons that mean the clocks were held down under load."""
    return decode_throttle((mask or 0) & THROTTLING_MASK)


def is_marked(samples: Iterable[dict]) -> bool:
    return any(s.get("phase") == "steady_start" for s in samples)


def windows(samples: list[dict]) -> list[list[dict]]:
    """One device's measurement windows, each from its opening boundary sample to its closing
    one (see the module docstring); the whole run when it was never marked."""
    if not is_marked(samples):
        return [samples] if samples else []
    first = max(i for i, s in enumerate(samples) if s.get("phase") == "steady_start")
    out: list[list[dict]] = []
    current: Optional[list[dict]] = None
    for s in samples[first:]:
        if s.get("phase") in OPENING_PHASES:
            current = [s]
            out.append(current)
        elif current is not None:
            current.append(s)
            if s.get("phase") in CLOSING_PHASES:
                current = None
    return out


def steady_samples(samples: list[dict]) -> list[dict]:
    """Samples whose readings describe the timed steps: every window's samples after its
    opening boundary, device by device."""
    return [s for rows in _by_gpu(samples).values() for w in windows(rows) for s in w[1:]]


def _values(samples: Iterable[dict], key: str) -> list[float]:
    return [s[key] for s in samples if s.get(key) is not None]


def _mean(values: list[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def _max(values: list[float]) -> Optional[float]:
    return max(values) if values else None


def _by_gpu(samples: Iterable[dict]) -> dict[Any, list[dict]]:
    groups: dict[Any, list[dict]] = defaultdict(list)
    for s in samples:
        groups[s.get("gpu")].append(s)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0])))


def _counter_energy(window: list[dict]) -> Optional[float]:
    """Energy from the cumulative counter: last reading minus first, over one GPU's window."""
    readings = [s for s in window if s.get("energy_j") is not None]
    if len(readings) < 2 or readings[0] is not window[0] or readings[-1] is not window[-1]:
        return None
    delta = readings[-1]["energy_j"] - readings[0]["energy_j"]
    return delta if delta >= 0 else None  # a counter reset (driver reload) mid-run


def _integrated_energy(window: list[dict]) -> Optional[float]:
    """Trapezoidal integral of power over one GPU's window, for GPUs without an energy counter."""
    points = [(s["t"], s["power_w"]) for s in window if s.get("power_w") is not None]
    if len(points) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in zip(points, points[1:]))


def _summed(values: list[Optional[float]]) -> Optional[float]:
    return sum(values) if values and all(v is not None for v in values) else None  # type: ignore


def gpu_energy(samples: list[dict]) -> tuple[Optional[float], Optional[str]]:
    """(joules over the measurement windows summed over GPUs, "counter" or "power_integral")."""
    groups = _by_gpu(samples)
    if not groups:
        return None, None
    per_gpu = {g: windows(rows) for g, rows in groups.items()}
    counted = [_summed([_counter_energy(w) for w in ws]) for ws in per_gpu.values()]
    if all(v is not None for v in counted):
        return sum(counted), "counter"   # type: ignore[arg-type]
    integrated = [_summed([_integrated_energy(w) for w in ws]) for ws in per_gpu.values()]
    if all(v is not None for v in integrated):
        return sum(integrated), "power_integral"   # type: ignore[arg-type]
    return None, None


def _tick_totals(samples: list[dict], key: str, num_gpus: int) -> list[float]:
    """Per tick, the sum of `key` over GPUs; ticks missing a GPU's reading are skipped."""
    ticks: dict[float, list[float]] = defaultdict(list)
    for s in samples:
        if s.get(key) is not None:
            ticks[s["t"]].append(s[key])
    return [sum(v) for _, v in sorted(ticks.items()) if len(v) == num_gpus]


def _throttle_fractions(steady: list[dict]) -> dict[str, float]:
    """reason -> fraction of steady samples (with a reading) that reported it."""
    with_reading = [s for s in steady if s.get("throttle_mask") is not None]
    counts: dict[str, int] = defaultdict(int)
    for s in with_reading:
        for name in throttling_reasons(s["throttle_mask"]):
            counts[name] += 1
    return {name: counts[name] / len(with_reading)
            for name in sorted(counts, key=lambda n: -counts[n])}


def gpu_per_device(samples: list[dict]) -> list[dict[str, Any]]:
    """One summary per GPU (for the JSON manifest)."""
    out = []
    for gpu, rows in _by_gpu(samples).items():
        steady = steady_samples(rows)
        energy, source = gpu_energy(rows)
        used = _max(_values(rows, "mem_used_bytes"))
        out.append({
            "gpu": gpu,
            "power_w_mean": _mean(_values(steady, "power_w")),
            "power_w_max": _max(_values(steady, "power_w")),
            "energy_j": energy,
            "energy_source": source,
            "gpu_util_pct_mean": _mean(_values(steady, "gpu_util_pct")),
            "mem_util_pct_mean": _mean(_values(steady, "mem_util_pct")),
            "temp_c_max": _max(_values(steady, "temp_c")),
            "sm_clock_mhz_mean": _mean(_values(steady, "sm_clock_mhz")),
            "sm_clock_mhz_min": min(_values(steady, "sm_clock_mhz"), default=None),
            "nvml_mem_used_gb_max": None if used is None else used / GB,
            "throttle_reasons": _throttle_fractions(steady),
        })
    return out


GPU_COLUMNS = ("power_w_mean", "power_w_max", "energy_j", "joules_per_image",
               "images_per_sec_per_watt", "gpu_util_pct_mean", "temp_c_max",
               "sm_clock_mhz_mean", "throttled")


def gpu_summary(samples: list[dict], images: Optional[int] = None,
                images_per_sec: Optional[float] = None) -> dict[str, Any]:
    """The run's GPU figures, keyed by CSV column.

    Power and energy are totals over the monitored GPUs (what the run drew), so
    images_per_sec_per_watt compares across GPU counts; utilisation, temperature and clock are
    over all GPUs' steady samples (mean or max). `images` is the number of images the timed
    loop processed (joules_per_image); `images_per_sec` the run's figure (per watt).
    """
    summary: dict[str, Any] = dict.fromkeys(GPU_COLUMNS)
    groups = _by_gpu(samples)
    if not groups:
        return summary
    steady_by_gpu = {g: steady_samples(rows) for g, rows in groups.items()}
    steady = [s for rows in steady_by_gpu.values() for s in rows]
    power_ticks = _tick_totals(steady, "power_w", len(groups))
    energy, source = gpu_energy(samples)
    power_mean = _mean(power_ticks)
    reasons: dict[str, int] = {}
    for rows in steady_by_gpu.values():
        for name in _throttle_fractions(rows):
            reasons[name] = 1
    used = _max(_values(samples, "mem_used_bytes"))
    summary.update({
        "power_w_mean": power_mean,
        "power_w_max": _max(power_ticks),
        "energy_j": energy,
        "energy_source": source,
        "joules_per_image": energy / images if energy is not None and images else None,
        "images_per_sec_per_watt": (images_per_sec / power_mean
                                    if images_per_sec and power_mean else None),
        "gpu_util_pct_mean": _mean(_values(steady, "gpu_util_pct")),
        "mem_util_pct_mean": _mean(_values(steady, "mem_util_pct")),
        "temp_c_max": _max(_values(steady, "temp_c")),
        "sm_clock_mhz_mean": _mean(_values(steady, "sm_clock_mhz")),
        "throttled": (bool(reasons) if any(s.get("throttle_mask") is not None for s in steady)
                      else None),
        "throttle_reasons": ",".join(sorted(reasons)),
        "nvml_mem_used_gb_max": None if used is None else used / GB,
        "num_gpus_monitored": len(groups),
        "per_gpu": gpu_per_device(samples),
    })
    return summary


HOST_COLUMNS = ("cpu_util_pct_mean",)


def _interval_weighted_mean(samples: list[dict], steady: list[dict], key: str
                            ) -> Optional[float]:
    """Mean of `key` over `steady`, each reading weighted by the time since the previous sample
    of `samples` (the span a since-the-last-call reading such as psutil's covers)."""
    previous = {id(b): a["t"] for a, b in zip(samples, samples[1:])}
    pairs = [(s["t"] - previous[id(s)], s[key]) for s in steady
             if s.get(key) is not None and id(s) in previous]
    total = sum(w for w, _ in pairs)
    if total <= 0:
        return _mean([v for _, v in pairs])
    values = [v for _, v in pairs]
    # A mean lies within its values; float rounding must not put 100 % readings at 100.00001.
    return min(max(values), max(min(values), sum(w * v for w, v in pairs) / total))


def host_summary(samples: list[dict]) -> dict[str, Any]:
    """Host CPU utilisation (system-wide, 0-100 %) and this process's CPU and RSS.

    psutil's CPU percentages cover the time since the previous reading, so the means weight each
    reading by that interval: a reading at a window boundary, a few ms after the last tick,
    counts for those few ms only.
    """
    steady = steady_samples(samples)
    rss = _max(_values(samples, "rss_bytes"))
    return {
        "cpu_util_pct_mean": _interval_weighted_mean(samples, steady, "cpu_util_pct"),
        "cpu_util_pct_max": _max(_values(steady, "cpu_util_pct")),
        # Per process, 100 = one core busy.
        "process_cpu_pct_mean": _interval_weighted_mean(samples, steady, "proc_cpu_pct"),
        "host_rss_gb_max": None if rss is None else rss / GB,
    }
