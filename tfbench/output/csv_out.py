"""The results CSV: one row per run, a documented and stable schema.

Appends take an exclusive file lock, so concurrent runs (one per GPU, say) never interleave rows.
A file written with an older schema is migrated in place (new columns empty) and the caller is
told in one line; it is never silently mixed.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import tempfile
from typing import Any, Iterator, Optional

from tfbench.results import FIELD_NAMES, RunResult

SCHEMA_VERSION = 2   # 2: warmup_peak_mem_gb

# (column, meaning). docs/csv.md's column table is generated from this list.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("schema_version", "version of this column set"),
    ("run_id", "unique id of the run; the JSON manifest is <json_dir>/<run_id>.json"),
    ("timestamp", "UTC start time, ISO 8601"),
    ("status", "ok, oom, nan, interrupted or error"),
    ("error", "the error message when status is not ok"),
    ("model", "--model"),
    ("dataset", "imagenet or cifar10 (label space and default sizes)"),
    ("mode", "training, forward_only or eval"),
    ("precision", "fp32, fp16 or bf16"),
    ("xla", "1 when the step was compiled with XLA"),
    ("batch_size", "batch per device"),
    ("global_batch_size", "batch per step over all devices and workers"),
    ("num_devices", "devices per worker"),
    ("device_kind", "cpu or gpu"),
    ("device_name", "GPU or CPU model name"),
    ("num_workers", "worker processes (multi-host)"),
    ("variable_update", "how variables were shared (strategy)"),
    ("data_source", "synthetic or the real-data reader"),
    ("data_format", "NHWC or NCHW"),
    ("image_size", "input height = width in pixels"),
    ("num_batches", "timed steps requested"),
    ("num_warmup_batches", "untimed warm-up steps"),
    ("accum_steps", "micro-batches per optimizer update"),
    ("steps_run", "timed steps actually run"),
    ("images_per_sec", "the `total images/sec` figure (wall time of the timed loop)"),
    ("step_images_per_sec", "the Step lines' figure over every timed step of the last repeat: "
                            "per-worker batch / mean step time (EWMA-weighted with "
                            "--display_perf_ewma)"),
    ("step_images_per_sec_plusminus", "the Step line's +/- (std of per-step speeds / sqrt(n))"),
    ("jitter", "the Step line's jitter (1.4826 x median absolute deviation)"),
    ("first_step_sec", "time of the first (cold) step, seconds"),
    ("warmup_sec", "wall time of warm-up, from the start of its first step to the end of its "
                   "last (host work between steps included), seconds"),
    ("final_loss", "last reported loss"),
    ("top_1_accuracy", "eval or last training top-1"),
    ("top_5_accuracy", "eval or last training top-5"),
    ("params", "trainable parameters of the model (batch-norm moving statistics and other "
               "non-trainable state excluded, as in published counts)"),
    ("gflops_per_image", "forward GFLOPs per image (multiply-add = 2 FLOPs)"),
    ("tflops_per_sec", "achieved TFLOP/s (training counted as 3x forward)"),
    ("mfu_pct", "model FLOPs utilisation: tflops_per_sec / (peak per device x devices), %"),
    ("peak_tflops", "peak dense TFLOP/s per device used for mfu_pct"),
    ("latency_ms_p50", "median step time in ms per batch"),
    ("latency_ms_p90", "90th percentile step time, ms"),
    ("latency_ms_p99", "99th percentile step time, ms"),
    ("latency_ms_mean", "mean step time, ms"),
    ("peak_mem_gb", "peak device memory over the timed steps (read when they end: a final "
                    "checkpoint or evaluation is not in it), GiB (2^30 bytes); on CPU the "
                    "host's peak RSS; empty on a GPU run whose device statistics are unavailable and on a "
                    "parameter-server controller (its workers run the steps)"),
    ("warmup_peak_mem_gb", "peak device memory during warm-up (cuDNN autotuning included), GiB"),
    ("host_peak_rss_gb", "host peak resident memory, GiB"),
    ("images_per_sec_per_gb", "images/sec divided by the summed peak memory of all devices "
                              "(host RSS on CPU), per GiB"),
    ("power_w_mean", "mean GPU power (all monitored GPUs together) over the timed steps, W"),
    ("power_w_max", "max GPU power (all monitored GPUs together) over the timed steps, W"),
    ("energy_j", "GPU energy over the timed steps of every repeat (warm-up, cooldowns, "
                 "evaluations and final checkpoints excluded), J"),
    ("joules_per_image", "energy_j / the images of those timed steps, J"),
    ("images_per_sec_per_watt", "images_per_sec / power_w_mean"),
    ("gpu_util_pct_mean", "mean GPU utilisation over the timed steps, %"),
    ("temp_c_max", "max GPU temperature (hottest monitored GPU) over the timed steps, °C"),
    ("sm_clock_mhz_mean", "mean SM clock over the timed steps, MHz"),
    ("throttled", "1 when the GPU reported throttling during the timed steps"),
    ("cpu_util_pct_mean", "mean host CPU utilisation over the timed steps (each reading "
                          "weighted by the time it covers), %"),
    ("num_runs", "repeats of the measurement (--num_runs)"),
    ("images_per_sec_median", "median over repeats"),
    ("images_per_sec_min", "min over repeats"),
    ("images_per_sec_max", "max over repeats"),
    ("spread_pct", "(max - min) / median over repeats, %"),
    ("unstable", "1 when spread_pct exceeds the threshold"),
    ("synthetic_images_per_sec", "--diagnose_input: synthetic-data run"),
    ("input_only_images_per_sec", "--diagnose_input: input pipeline alone"),
    ("input_bound", "--diagnose_input verdict: 1 input-bound, 0 not"),
    ("estimated_train_hours", "--estimate_dataset_size x --estimate_epochs / (images/sec x "
                              "--estimate_utilization), hours"),
    ("expected_range", "within / below / above the published range for this GPU, model "
                       "version and batch per GPU"),
    ("expected_range_source", "the published figures that verdict used: source (framework): "
                              "model, batch per GPU, images/sec"),
    ("tf_version", "TensorFlow version"),
    ("keras_version", "Keras version"),
    ("tfbench_version", "tfbench version"),
    ("hostname", "host name"),
    ("notices", "what tfbench changed from what was asked, '; '-separated"),
    ("command", "the command line"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(c for c, _ in COLUMNS)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return "%.6g" % value
    return str(value)


def row_for(result: RunResult) -> dict[str, str]:
    """The CSV row of a result: RunResult fields and the figures derived from them, then
    `extra` (monitors, studies) for the other columns only: a key of `extra` never replaces a
    figure of the same name (one name, one definition in the console, CSV and JSON)."""
    from tfbench import __version__
    values: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "steps_run": result.steps_run,
        "params": result.params_count,
        "tfbench_version": __version__,
        "notices": "; ".join(result.notices),
    }
    for name in COLUMN_NAMES:
        if name not in values and hasattr(result, name):
            values[name] = getattr(result, name)
    for name, value in result.extra.items():
        if name in COLUMN_NAMES and name not in values and name not in FIELD_NAMES:
            values[name] = value
    return {name: _fmt(values.get(name)) for name in COLUMN_NAMES}


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock on a side file, so the CSV itself may be replaced while held."""
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def append_row(path: str, result: RunResult) -> Optional[str]:
    """Appends the result's row; returns a one-line notice if an older file was migrated."""
    return append_rows(path, [row_for(result)])


def append_rows(path: str, rows: list[dict[str, str]]) -> Optional[str]:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    notice = None
    with _locked(path):
        existing = ""
        if os.path.exists(path):
            with open(path, newline="") as handle:
                existing = handle.read()
        if existing:
            header = next(csv.reader(io.StringIO(existing)))
            if tuple(header) != COLUMN_NAMES:
                notice = _migrate(path, existing, header)
                existing = "migrated"
        with open(path, "a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMN_NAMES, extrasaction="ignore")
            if not existing:
                writer.writeheader()
            for row in rows:
                writer.writerow(row)
            handle.flush()
            os.fsync(handle.fileno())
    return notice


def _migrate(path: str, existing: str, header: list[str]) -> str:
    """Rewrites an older-schema file with the current columns (new ones empty), atomically."""
    unknown = [c for c in header if c not in COLUMN_NAMES]
    if unknown:
        backup = path + ".unknown-schema.bak"
        os.replace(path, backup)
        with open(path, "w", newline="") as fresh:
            csv.DictWriter(fresh, fieldnames=COLUMN_NAMES).writeheader()
        return ("%s had columns tfbench does not know (%s); it was moved to %s and a new file "
                "started" % (path, ", ".join(unknown[:3]), backup))
    rows = list(csv.DictReader(io.StringIO(existing)))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".csv.tmp")
    with os.fdopen(fd, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMN_NAMES)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMN_NAMES})
    os.replace(tmp, path)
    return "%s used an older column set; migrated it to schema %d (%d rows kept)" % (
        path, SCHEMA_VERSION, len(rows))


def write_json_atomic(path: str, data: Any) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=parent, suffix=".json.tmp")
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=1, sort_keys=True, default=str)
        out.write("\n")
    os.replace(tmp, path)
