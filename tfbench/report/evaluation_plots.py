"""The per-model figures of an evaluation report (tfbench.report.evaluation_report draws them):
training throughput by execution mode, the inference latency distribution at batch 1, and peak
training memory with mean training power. Each takes plain data, writes a PNG and returns the
Figure (matplotlib's object API on the Agg canvas, as tfbench.report.plots).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from tfbench.report import plots

_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")


def throughput_by_mode(model: str, device: str, modes: Sequence[Mapping], path: str):
    """Bars of training images/sec per mode (median of the repeats), the repeats' min-max as an
    error bar, each labelled with its speed-up over native. modes: [{label, images_per_sec,
    images_per_sec_min, images_per_sec_max, speedup}]."""
    fig = plots.figure()
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(modes))
    values = np.array([float(m["images_per_sec"]) for m in modes])
    lo = np.array([float(m.get("images_per_sec_min") or v) for m, v in zip(modes, values)])
    hi = np.array([float(m.get("images_per_sec_max") or v) for m, v in zip(modes, values)])
    bars = ax.bar(x, values, color=[_COLORS[i % len(_COLORS)] for i in range(len(modes))],
                  yerr=np.vstack([np.maximum(values - lo, 0), np.maximum(hi - values, 0)]),
                  capsize=6, ecolor="black")
    for bar, mode, top in zip(bars, modes, hi):
        speedup = mode.get("speedup")
        text = "%.2fx" % speedup if speedup is not None and speedup == speedup else ""
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, max(bar.get_height(), top)),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                    fontsize=10)
    ax.set_xticks(x)
    ax.set_xticklabels([m["label"] for m in modes])
    ax.set_xlabel("Execution mode")
    ax.set_ylabel("Training throughput (images/sec)")
    ax.set_ylim(0, float(np.nanmax(hi)) * 1.2 if len(hi) and np.nanmax(hi) > 0 else 1)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title("%s on %s: training throughput by mode\n(median of the repeats, bars: min-max; "
                 "labels: speed-up over native)" % (model, device), fontsize=11)
    return plots.save(fig, path)


def latency_distribution(model: str, device: str, series: Mapping[str, Sequence[float]],
                         path: str):
    """Histogram of per-step inference latencies at batch 1 (ms), one outline per mode, with its
    p50 (solid) and p99 (dashed). series: {mode label: step times in ms}."""
    fig = plots.figure()
    ax = fig.add_subplot(1, 1, 1)
    data = {k: np.asarray(v, dtype=float) for k, v in series.items() if len(v)}
    allv = np.concatenate(list(data.values())) if data else np.array([0.0, 1.0])
    # The right edge: the slowest 0.5% of all steps are drawn there, every p99 stays inside.
    top = max([float(np.percentile(allv, 99.5))] + [float(np.percentile(v, 99)) * 1.02
                                                     for v in data.values()])
    bins = np.linspace(float(allv.min()), max(top, float(allv.min()) + 1e-3), 60)
    for i, (label, values) in enumerate(data.items()):
        color = _COLORS[i % len(_COLORS)]
        p50, p99 = np.percentile(values, [50, 99])
        ax.hist(np.clip(values, bins[0], bins[-1]), bins=bins, histtype="step", linewidth=1.5,
                color=color, label="%s: p50 %.2f, p99 %.2f ms (%d steps)"
                % (label, p50, p99, len(values)))
        ax.axvline(p50, color=color, linestyle="-", linewidth=1)
        ax.axvline(p99, color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("Latency per batch of 1 image (ms; the slowest 0.5% drawn at the right edge)")
    ax.set_ylabel("Timed steps")
    ax.grid(True, alpha=0.3)
    if data:
        ax.legend(loc="upper right", fontsize=8)
    ax.set_title("%s on %s: inference latency at batch 1\n(lines: p50 solid, p99 dashed)"
                 % (model, device), fontsize=11)
    return plots.save(fig, path)


def memory_and_power(model: str, device: str, modes: Sequence[Mapping], path: str,
                     memory_label: str = "Peak training memory (GiB)"):
    """Peak training memory (GiB, left) and mean training power (W, right) per mode.
    modes: [{label, peak_mem_gb, power_w_mean}]; a figure that is missing is left out and the
    title says why. memory_label: the left axis (a CPU run's peak is its host RSS)."""
    fig = plots.figure()
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(modes))
    width = 0.38
    mem = np.array([_num(m.get("peak_mem_gb")) for m in modes])
    power = np.array([_num(m.get("power_w_mean")) for m in modes])
    has_power = bool(np.isfinite(power).any())
    shift = width / 2 if has_power else 0.0
    ax.bar(x - shift, np.nan_to_num(mem), width, color="tab:blue", label="peak memory (GiB)")
    ax.set_ylabel(memory_label, color="tab:blue")
    ax.set_ylim(0, max(float(np.nanmax(mem)) * 1.2, 0.1) if np.isfinite(mem).any() else 1)
    note = ""
    if has_power:
        ax2 = ax.twinx()
        ax2.bar(x + shift, np.nan_to_num(power), width, color="tab:red",
                label="mean power (W)")
        ax2.set_ylabel("Mean training power (W)", color="tab:red")
        ax2.set_ylim(0, float(np.nanmax(power)) * 1.2)
    else:
        note = "; no power samples (power needs an NVIDIA GPU and its driver's NVML)"
    ax.set_xticks(x)
    ax.set_xticklabels([m["label"] for m in modes])
    ax.set_xlabel("Execution mode")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title("%s on %s: peak memory and mean power in training\n(over the timed steps%s)"
                 % (model, device, note), fontsize=11)
    return plots.save(fig, path)


def _num(value: Optional[object]) -> float:
    try:
        return float(value) if value not in (None, "") else np.nan
    except (TypeError, ValueError):
        return np.nan
