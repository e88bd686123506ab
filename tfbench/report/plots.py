"""PNG figures for reports, drawn with matplotlib's object API on the Agg canvas (no display, no
pyplot global state). Every figure has labelled axes with units and a title naming the model
and device. Each function returns the Figure so callers (and tests) can inspect it.
"""

from __future__ import annotations

import os
import re
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tfbench.report import load

_THROUGHPUT_COLOR = "tab:blue"
_SECOND_COLOR = "tab:red"


def _figure() -> Figure:
    fig = Figure(figsize=(8, 4.8), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str) -> Figure:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return fig


# For the other figure modules of reports (tfbench.report.evaluation_plots).
figure = _figure
save = _save


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_")[:120] or "plot"


def device_label(row) -> str:
    """'NVIDIA A100-SXM4-40GB x2' (device kind when the name is unknown)."""
    name = str(row.get("device_name") or "") or str(row.get("device_kind") or "") or "device"
    devices = row.get("devices")
    if devices is None or (isinstance(devices, float) and np.isnan(devices)):
        devices = load.devices({"num_devices": int(row.get("num_devices") or 1),
                                "num_workers": int(row.get("num_workers") or 1)})
    return "%s x%d" % (name, int(devices)) if int(devices) > 1 else name


def context(row, skip: Sequence[str] = ()) -> str:
    """A subtitle with the settings that hold for the whole figure."""
    parts = []
    if "mode" not in skip and row.get("mode"):
        parts.append(str(row["mode"]))
    if "precision" not in skip:
        label = str(row.get("precision") or "fp32")
        if int(row.get("xla") or 0):
            label += " + XLA"
        parts.append(label)
    if "batch_size" not in skip and int(row.get("batch_size") or 0):
        parts.append("batch %d/device" % int(row["batch_size"]))
    if "image_size" not in skip and int(row.get("image_size") or 0):
        parts.append("%dpx" % int(row["image_size"]))
    return ", ".join(parts)


def batch_size_plot(group: pd.DataFrame, path: str) -> Figure:
    """Throughput against batch size, peak memory on the right axis, the knee marked."""
    group = group.sort_values("batch_size")
    first = group.iloc[0]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(group["batch_size"], group["images_per_sec"], "o-", color=_THROUGHPUT_COLOR,
            label="images/sec")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(group["batch_size"]))
    ax.set_xticklabels([str(int(b)) for b in group["batch_size"]])
    ax.set_xlabel("Batch size per device (images)")
    ax.set_ylabel("Throughput (images/sec)", color=_THROUGHPUT_COLOR)
    ax.set_ylim(bottom=0)
    if "knee" in group and group["knee"].astype(bool).any():
        knee = group[group["knee"].astype(bool)].iloc[0]
        ax.axvline(knee["batch_size"], color="gray", linestyle="--",
                   label="knee (%g%% of best): %d" % (knee.get("knee_pct", 90),
                                                       knee["batch_size"]))
    mem = group["peak_mem_gb"]
    if mem.notna().any():
        ax2 = ax.twinx()
        ax2.plot(group["batch_size"], mem, "s--", color=_SECOND_COLOR, label="peak memory")
        ax2.set_ylabel("Peak memory (GiB)", color=_SECOND_COLOR)
        ax2.set_ylim(bottom=0)
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    ax.set_title("%s on %s: throughput vs batch size\n%s"
                 % (first["model"], device_label(first), context(first, ("batch_size",))))
    return _save(fig, path)


def scaling_plot(group: pd.DataFrame, path: str) -> Figure:
    """Scaling efficiency bars per device count, throughput on the right axis."""
    group = group.sort_values("devices")
    first = group.iloc[0]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    labels = [str(int(d)) for d in group["devices"]]
    x = np.arange(len(group))
    bars = ax.bar(x, group["efficiency_pct"], color=_THROUGHPUT_COLOR, alpha=0.8,
                  label="scaling efficiency")
    for bar, value in zip(bars, group["efficiency_pct"]):
        ax.annotate("%.0f%%" % value, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=9)
    ax.axhline(100, color="gray", linestyle="--", linewidth=1, label="ideal (100%)")
    ax.set_xticks(x)
    ax.set_xticklabels(labels)
    ax.set_xlabel("Devices (GPUs or logical devices)")
    ax.set_ylabel("Scaling efficiency (%)")
    ax.set_ylim(0, max(110.0, float(np.nanmax(group["efficiency_pct"])) * 1.1))
    ax2 = ax.twinx()
    ax2.plot(x, group["images_per_sec"], "o-", color=_SECOND_COLOR, label="images/sec")
    ax2.set_ylabel("Throughput (images/sec)", color=_SECOND_COLOR)
    ax2.set_ylim(bottom=0)
    ax.legend(loc="lower left")
    fixed = ("batch %d/device" % first["batch_size"] if first["scaling"] == "weak"
             else "global batch %d" % first["global_batch_size"])
    ax.set_title("%s on %s: %s scaling (%s)\n%s"
                 % (first["model"], first.get("device_name") or "device", first["scaling"],
                    fixed, context(first, ("batch_size",))))
    return _save(fig, path)


# The parts of a step, bottom to top, as tfbench.report.studies.explain_table names them.
_STEP_PARTS = (("reference_ms", "one-device step", "0.75"),
               ("lost_ms_compute", "slowest device's extra compute", "tab:orange"),
               ("lost_ms_input", "input wait", "tab:green"),
               ("lost_ms_allreduce", "all-reduce (not overlapped)", "tab:blue"),
               ("lost_ms_unexplained", "unexplained", "tab:red"))


def scaling_explained_plot(group: pd.DataFrame, path: str) -> Figure:
    """The step time per device count as stacked bars: the one-device step, then what each
    cause adds (a negative remainder is drawn as nothing; the measured step is marked)."""
    group = group.sort_values("devices")
    first = group.iloc[0]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(group))
    bottom = np.zeros(len(group))
    for column, name, color in _STEP_PARTS:
        values = np.clip(group[column].to_numpy(dtype=float), 0.0, None)
        ax.bar(x, values, bottom=bottom, color=color, label=name, width=0.6)
        bottom += values
    ax.plot(x, group["step_ms"], "k_", markersize=30, markeredgewidth=2,
            label="measured step")
    for xi, step, eff in zip(x, group["step_ms"], group["efficiency_pct"]):
        ax.annotate("%.0f%%" % eff, (xi, max(step, 0)), ha="center", va="bottom", fontsize=9,
                    xytext=(0, 4), textcoords="offset points")
    ax.set_xticks(x)
    ax.set_xticklabels([str(int(d)) for d in group["devices"]])
    ax.set_xlabel("Devices (GPUs or logical devices); efficiency above each bar")
    ax.set_ylabel("Time per step (ms)")
    ax.set_ylim(0, float(np.nanmax(np.maximum(bottom, group["step_ms"]))) * 1.12)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, markerscale=0.4)
    ax.grid(True, axis="y", alpha=0.3)
    fixed = ("batch %d/device" % first["batch_size"] if first["scaling"] == "weak"
             else "global batch %d" % first["global_batch_size"])
    ax.set_title("%s on %s: where the step time goes\n%s scaling, %s, %s"
                 % (first["model"], first.get("device_name") or "device", first["scaling"],
                    fixed, context(first, ("batch_size",))), fontsize=10)
    return _save(fig, path)


def precision_plot(group: pd.DataFrame, path: str) -> Figure:
    """Throughput per precision/execution, each bar labelled with its speed-up over fp32."""
    first = group.iloc[0]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(group))
    bars = ax.bar(x, group["images_per_sec"], color=_THROUGHPUT_COLOR)
    for bar, speedup in zip(bars, group["speedup_vs_fp32"]):
        if pd.notna(speedup):
            ax.annotate("%.2fx" % speedup, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=9)
    ax.set_xticks(x)
    ax.set_xticklabels(list(group["execution"]))
    ax.set_xlabel("Precision / execution")
    ax.set_ylabel("Throughput (images/sec)")
    ax.set_ylim(0, float(np.nanmax(group["images_per_sec"])) * 1.15)
    ax.set_title("%s on %s: precision matrix (labels: speed-up over fp32)\n%s"
                 % (first["model"], device_label(first), context(first, ("precision",))))
    return _save(fig, path)


def _monitor_lists(samples) -> list[list[dict]]:
    """Each monitor's samples: the manifest holds a list (one monitor) or {name: list}."""
    if isinstance(samples, dict):
        return [v for v in samples.values() if isinstance(v, list)]
    return [list(samples or [])]


# A monitor's phases inside the timed window (tfbench.monitors.base): from mark_steady()'s sample
# to pause()'s, and again from each resume().
_TIMED_PHASES = ("steady_start", "steady", "steady_end", "steady_resume")


def _timed_window(samples: list[dict]) -> list[tuple[float, dict]]:
    """(seconds of timed steps before it, sample) for one monitor's samples inside the timed
    window: 0 at the window's start, the pauses between windows (evaluations, cooldowns between
    repeats) left out, so they line up with the steps' cumulative times. A new measurement
    (a later steady_start) starts over, as the monitors' figures do; warm-up, the model build
    before it and what runs after the last step are outside."""
    out: list[tuple[float, dict]] = []
    origin = paused_at = None
    for s in samples:
        if not isinstance(s, dict) or s.get("t") is None:
            continue
        t, phase = float(s["t"]), s.get("phase")
        if phase == "steady_start":
            out, origin, paused_at = [], t, None
        elif origin is None or phase not in _TIMED_PHASES:
            continue
        elif phase == "steady_resume" and paused_at is not None:
            origin += t - paused_at
            paused_at = None
        out.append((t - origin, s))
        if phase == "steady_end":
            paused_at = t
    return out


def _series(samples, key: str) -> dict[object, tuple[np.ndarray, np.ndarray]]:
    """{gpu index (None if unstated): (t, values)} for the samples carrying `key` inside the
    timed window, t in seconds of timed steps (_timed_window)."""
    by_gpu: dict[object, list[tuple[float, float]]] = {}
    for timed in map(_timed_window, _monitor_lists(samples)):
        for t, s in timed:
            if s.get(key) is not None:
                by_gpu.setdefault(s.get("gpu"), []).append((t, float(s[key])))
    return {gpu: (np.array([t for t, _ in pts]), np.array([v for _, v in pts]))
            for gpu, pts in sorted(by_gpu.items(), key=lambda kv: str(kv[0]))}


def timeseries_plot(manifest: dict, row, path: str) -> Optional[Figure]:
    """Per-step throughput over the timed steps and, on the right axis, GPU temperature (else
    the host's CPU utilisation) over the same window.

    Uses the manifest's step_times, step_line_batch and extra.samples (a list, or
    {monitor: list}, of {t, phase, temp_c, gpu, ...}); missing series are left out. Only the
    timed window is drawn: warm-up, the model build before it and what runs after the last step
    (FLOP counting, a final checkpoint) are left out, and the monitors' samples are placed on
    the steps' clock (_timed_window). None when there are no step times.
    """
    steps = [float(x) for x in (manifest.get("step_times") or []) if x]
    if not steps:
        return None
    # Each step's images/sec as the Step lines count it (step_images_per_sec: the images one
    # Step line counts, this worker's); a manifest without step_line_batch: every worker's.
    batch = int(manifest.get("step_line_batch") or row.get("global_batch_size")
                or manifest.get("global_batch_size") or 0) or int(row.get("batch_size") or 1)
    times = np.array(steps)
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(np.cumsum(times), batch / times, "-", color=_THROUGHPUT_COLOR, linewidth=1,
            label="images/sec per step")
    ax.set_xlabel("Time since the timed steps started (s)")
    ax.set_ylabel("Throughput (images/sec)", color=_THROUGHPUT_COLOR)
    ax.set_ylim(bottom=0)
    samples = (manifest.get("extra") or {}).get("samples") or []
    temps = _series(samples, "temp_c")
    what, note = "throughput and temperature", ""
    if temps:
        ax2 = ax.twinx()
        for i, (gpu, (t, temp)) in enumerate(temps.items()):
            ax2.plot(t, temp, "-", color=_SECOND_COLOR, alpha=1.0 - 0.5 * i / len(temps),
                     label="GPU %s temperature" % gpu if gpu is not None else "GPU temperature")
        ax2.set_ylabel("GPU temperature (°C)", color=_SECOND_COLOR)
    elif _series(samples, "cpu_util_pct"):
        # No GPU monitor (CPU runs): host CPU utilisation is the next best companion series.
        what, note = "throughput and host CPU use", ", no temperature samples"
        ax2 = ax.twinx()
        for t, util in _series(samples, "cpu_util_pct").values():
            ax2.plot(t, util, "-", color=_SECOND_COLOR, label="host CPU utilisation")
        ax2.set_ylabel("Host CPU utilisation (%)", color=_SECOND_COLOR)
        ax2.set_ylim(0, 105)
    else:
        what, note = "throughput", ", no temperature samples"
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    ax.set_title("%s on %s: %s over the timed steps\n%s, run %s%s"
                 % (row.get("model"), device_label(row), what, context(row),
                    row.get("run_id"), note), fontsize=11)
    return _save(fig, path)
