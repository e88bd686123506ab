"""Everything a finished (or failed) run writes: CSV row, JSON manifest, benchmark logs.

Formatters only: they read RunResult and Params, never TensorFlow state.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from tfbench.output import classic_log, csv_out
from tfbench.results import RunResult


def manifest(p, result: RunResult) -> dict[str, Any]:
    data = result.to_dict()
    data["params"] = {k: v for k, v in dataclasses.asdict(p).items()
                      if k not in ("explicit", "notices")}
    data["params_explicit"] = sorted(p.explicit)
    data["csv_row"] = csv_out.row_for(result)
    return data


def write_all(p, result: RunResult) -> list[str]:
    """Writes every enabled output; returns the lines to print about them."""
    lines: list[str] = []
    if result.extra.get("server_task") and result.status == "ok":
        # ps / worker tasks of a parameter-server cluster measure nothing themselves.
        return ["%s: done serving the cluster; the controller reports the results"
                % result.extra["server_task"]]
    if p.json_dir:
        path = os.path.join(p.json_dir, "%s.json" % result.run_id)
        result.extra["json_file"] = path
        csv_out.write_json_atomic(path, manifest(p, result))
    if p.benchmark_log_dir:
        from tfbench.output import benchmark_logger
        benchmark_logger.write(p.benchmark_log_dir, p, result)
    if p.csv_file:
        notice = csv_out.append_row(p.csv_file, result)
        if notice:
            lines.append(notice)
        lines.append("Results: %s row appended to %s (run %s)"
                     % (result.status, p.csv_file, result.run_id))
    return lines


def summary_lines(p, result: RunResult) -> list[str]:
    """tfbench's own lines, printed before the legacy footer."""
    from tfbench.measure import estimate, stats
    extra = result.extra
    if extra.get("server_task"):
        return []
    lines = []
    if result.params_count is not None:
        line = "Model stats: %s trainable params" % "{:,}".format(result.params_count)
        if result.gflops_per_image:
            line += ", %.3f GFLOPs/image forward (multiply-add = 2)" % result.gflops_per_image
        if result.tflops_per_sec:
            line += ", achieved %.3f TFLOP/s%s" % (
                result.tflops_per_sec, " (training = 3x forward)" if result.mode == "training"
                else "")
        if extra.get("mfu_pct") is not None:
            line += ", MFU %.1f%% of %.1f TFLOP/s per device" % (extra["mfu_pct"],
                                                                extra["peak_tflops"])
        lines.append(line)
    if extra.get("batch_norm_fold_line"):
        lines.append(extra["batch_norm_fold_line"])
    if result.mode in ("forward_only", "eval"):
        lines += stats.console_lines_latency(extra)
    lines += stats.console_lines_cold_start(
        {**extra, "first_step_sec": result.first_step_sec, "warmup_sec": result.warmup_sec})
    lines += extra.get("memory_lines", [])
    lines += extra.get("monitor_lines", [])
    lines += ["WARNING: " + w for w in extra.get("monitor_warnings", [])]
    if extra.get("num_runs", 1) > 1:
        lines += stats.console_lines_repeats(extra)
    if extra.get("estimated_train_hours") is not None:
        lines += estimate.console_lines(extra)
    lines += extra.get("environment_changes", [])
    if extra.get("expected_range_line"):
        lines.append(extra["expected_range_line"])
    if extra.get("input_verdict_line"):
        lines.append(extra["input_verdict_line"])
    return lines


def footer(result: RunResult) -> list[str]:
    """The legacy total block; training + evaluation mode has none, as in the legacy script."""
    if result.extra.get("train_and_eval") or result.extra.get("server_task"):
        return []
    return classic_log.footer_lines(result.images_per_sec)
