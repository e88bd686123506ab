"""tfbench's own console lines after a run, rendered from RunResult figures: the summary printed
before the legacy footer, the footer, and what a failed run had measured.

Nothing here is stored. The JSON manifest and the CSV keep the figures these lines are made of
(model stats, latency, cold start, memory, GPU and host monitors, throttling, repeats, the
training-time estimate, environment changes, the expected range, the input diagnosis), so any
line can be rendered again from a manifest. Formatters only: no TensorFlow.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tfbench.data import diagnose
from tfbench import figures
from tfbench.figures import label
from tfbench.measure import expected_range, scaling
from tfbench.output import classic_log
from tfbench.output import environment as environment_text
from tfbench.output.device_checks_line import device_check_lines
from tfbench.results import RunResult


def summary_lines(result: RunResult) -> list[str]:
    """tfbench's own lines, printed before the legacy footer."""
    extra = result.extra
    if result.server_task:
        return []
    lines = model_stats_lines(result)
    if extra.get("batch_norm_folded_convolutions"):
        lines.append(fold_line(extra["batch_norm_folded_convolutions"]))
    lines += serving_lines(extra)
    if result.mode in ("forward_only", "eval"):
        lines += latency_lines(extra)
    lines += cold_start_lines(
        {**extra, "first_step_sec": result.first_step_sec, "warmup_sec": result.warmup_sec})
    lines += between_steps_lines(extra)
    if "peak_mem_gb" in extra:
        lines += memory_lines(extra)
    lines += monitor_lines(extra)
    lines += ["WARNING: " + w for w in monitor_warnings(extra)]
    lines += repeat_lines(extra)
    if extra.get("estimated_train_hours") is not None:
        lines += estimate_lines(extra)
    lines += environment_text.change_lines(extra.get("environment_changes", []))
    if extra.get("expected_range_reference"):
        lines.append(expected_range.describe(
            expected_range.Judgement(**extra["expected_range_reference"])))
    if "input_bound" in extra:
        lines.append(input_diagnosis_line(result))
        if extra.get("input_settings"):
            lines.append(extra["input_settings"])
    lines += scaling_lines(extra)
    lines += device_check_lines(extra)
    return lines


def footer(result: RunResult) -> list[str]:
    """The legacy total block; training + evaluation mode has none, as in the legacy script."""
    if result.train_and_eval or result.server_task:
        return []
    return classic_log.footer_lines(result.images_per_sec)


def stopped_lines(result: RunResult) -> list[str]:
    """What a run that stopped early (an error, an interrupt) had measured."""
    if not result.step_times:
        return []
    return ["Measured before the stop: %d timed steps, %.2f images/sec"
            % (len(result.step_times), result.images_per_sec)]


# --- one figure group each ---------------------------------------------------------------------
def model_stats_lines(result: RunResult) -> list[str]:
    """`Model stats: 25,557,032 trainable params, 8.178 GFLOPs/image forward (...), ...`"""
    if result.params is None:
        return []
    extra = result.extra
    line = "Model stats: %s %s" % ("{:,}".format(result.params), label("params"))
    if result.gflops_per_image:
        line += ", %.3f %s (multiply-add = 2)" % (result.gflops_per_image,
                                                  label("gflops_per_image"))
    if result.tflops_per_sec:
        line += ", %s %.3f TFLOP/s%s" % (
            label("tflops_per_sec"), result.tflops_per_sec,
            " (training = 3x forward)" if result.mode == "training" else "")
    if extra.get("mfu_pct") is not None:
        line += ", %s %.1f%% of %.1f %s" % (label("mfu_pct"), extra["mfu_pct"],
                                            extra["peak_tflops"], label("peak_tflops"))
    return [line]


def fold_line(num_folded: int) -> str:
    """Inference steps ran the folded model (the run's notice is the same sentence)."""
    return figures.sentence("batch_norm_folded_convolutions", num_folded)


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else "%.2f" % value


def served_what(summary: dict[str, Any]) -> str:
    """What the timed steps of a served run called: 'SavedModel serving signature' or 'TF-TRT
    FP16 SavedModel serving signature'; '' for the model in-process."""
    path = summary.get("serving_path")
    if not path:
        return ""
    if path == "tftrt":
        return "TF-TRT %s SavedModel serving signature" % (summary.get("trt_mode") or "")
    return "SavedModel serving signature"


def latency_lines(summary: dict[str, Any]) -> list[str]:
    """`Latency (ms/batch): p50 12.34  p90 ...  p99 ...  mean ...  min ...  max ...`, with what
    the steps called when it was a served model (`Latency (ms/batch, SavedModel serving
    signature): ...`)."""
    if summary.get("latency_ms_p50") is None:
        return []
    parts = ["%s %s" % (label(key), _ms(summary.get(key))) for key in (
        "latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_mean",
        "latency_ms_min", "latency_ms_max")]
    served = served_what(summary)
    return ["Latency (ms/batch%s): " % (", " + served if served else "") + "  ".join(parts)]


def serving_lines(summary: dict[str, Any]) -> list[str]:
    """`Serving path: SavedModel serving signature, export 1.234 s, load 0.456 s (before warm-up,
    not timed); max |served - in-process| logit 1.2e-06 on one synthetic batch` and, with
    --trt_mode, `TF-TRT: FP16 (engines FP16), 3 TensorRT segments with 412 ops in TensorRT, 12 ops
    left in TensorFlow, 3 engines built; convert 12.345 s, engine build 4.567 s, save 1.234 s;
    TensorRT 10.8.0` (INT8: `engine build 9.876 s with 10 calibration batches`)."""
    lines = []
    if summary.get("export_sec") is not None:
        line = "Serving path: %s, %s %.3f s" % (
            served_what(summary) or "SavedModel", label("export_sec"), summary["export_sec"])
        if summary.get("load_sec") is not None:
            line += ", %s %.3f s" % (label("load_sec"), summary["load_sec"])
        line += " (before warm-up, not timed)"
        if summary.get("served_max_abs_diff") is not None:
            line += "; %s %.3g on one synthetic batch" % (label("served_max_abs_diff"),
                                                         summary["served_max_abs_diff"])
        lines.append(line)
    if summary.get("trt_segments") is not None:
        precisions = summary.get("trt_precisions")
        line = "TF-TRT: %s (%s), %d %s with %d %s, %d %s" % (
            summary.get("trt_mode") or "?",
            "engines %s" % precisions if precisions else "no TensorRT engine",
            summary["trt_segments"], label("trt_segments"),
            summary.get("trt_ops_in_tensorrt") or 0, label("trt_ops_in_tensorrt"),
            summary.get("trt_ops_in_tensorflow") or 0, label("trt_ops_in_tensorflow"))
        if summary.get("trt_engines") is not None:
            line += ", %d %s" % (summary["trt_engines"], label("trt_engines"))
        line += "; %s %.3f s" % (label("trt_convert_sec"), summary.get("trt_convert_sec") or 0.0)
        for name in ("trt_build_sec", "trt_save_sec"):
            if summary.get(name) is not None:
                line += ", %s %.3f s" % (label(name), summary[name])
            if name == "trt_build_sec" and summary.get("trt_calibration_batches"):
                line += " with %d %s" % (summary["trt_calibration_batches"],
                                         label("trt_calibration_batches"))
        if summary.get("tensorrt_version"):
            line += "; TensorRT %s" % summary["tensorrt_version"]
        lines.append(line)
    return lines


def cold_start_lines(summary: dict[str, Any]) -> list[str]:
    """`Cold start: first step 2.345 s, warm-up 3.456 s (10 steps), steady state 12.34 ms/step`"""
    if summary.get("first_step_sec") is None:
        return []
    line = "Cold start: %s %.3f s" % (label("first_step_sec"), summary["first_step_sec"])
    if summary.get("num_warmup_steps") and summary.get("warmup_sec") is not None:
        n = summary["num_warmup_steps"]
        line += ", %s %.3f s (%d step%s)" % (label("warmup_sec"), summary["warmup_sec"], n,
                                            "" if n == 1 else "s")
    if summary.get("steady_step_sec_mean") is not None:
        line += ", %s %.2f ms/step" % (label("steady_step_sec_mean"),
                                       summary["steady_step_sec_mean"] * 1000.0)
    return [line]


def between_steps_lines(summary: dict[str, Any]) -> list[str]:
    """`Host time between steps: 0.48 ms/step (in total images/sec, not in latency or steady
    state)`: why 1000 x batch / total images/sec exceeds the steady-state step time."""
    if summary.get("host_ms_between_steps") is None:
        return []
    return ["Host time between steps: %.2f ms/step (in total images/sec, not in latency or "
            "steady state)" % summary["host_ms_between_steps"]]


def repeat_lines(summary: dict[str, Any]) -> list[str]:
    """`Repeats: 5 runs, median 123.45 images/sec, min 120.00, max 125.00, spread 3.2%`

    followed by ` UNSTABLE (spread > 10%)` when the spread exceeds the threshold. Nothing for a
    single run.
    """
    if summary.get("num_runs", 0) < 2 or summary.get("images_per_sec_median") is None:
        return []
    spread = summary.get("spread_pct")
    line = "Repeats: %d %s, %s %.2f images/sec, %s %.2f, %s %.2f, %s %s" % (
        summary["num_runs"], label("num_runs"),
        label("images_per_sec_median"), summary["images_per_sec_median"],
        label("images_per_sec_min"), summary["images_per_sec_min"],
        label("images_per_sec_max"), summary["images_per_sec_max"],
        label("spread_pct"), "n/a" if spread is None else "%.1f%%" % spread)
    if summary.get("unstable"):
        line += " %s (spread > %g%%)" % (label("unstable"), summary["unstable_threshold_pct"])
    return [line]


def memory_lines(summary: dict[str, Any]) -> list[str]:
    """`Memory: peak 12.34 GiB per device (steady state; warm-up 14.02 GiB; evaluation 6.10
    GiB), host peak RSS 3.21 GiB, 123.4 images/sec/GiB` (tfbench.measure.memory's
    memory_summary figures)"""
    if summary.get("memory_unavailable"):
        line = "Memory: device peak not available (%s)" % summary["memory_unavailable"]
        if summary.get("host_peak_rss_gb") is not None:
            line += "; %s %.2f GiB" % (label("host_peak_rss_gb"), summary["host_peak_rss_gb"])
        return [line]
    if summary.get("peak_mem_gb") is None:
        return ["Memory: not available"]
    line = "Memory: %s %.2f GiB" % (label("peak_mem_gb"), summary["peak_mem_gb"])
    if summary.get("peak_mem_source") == "device":
        line += " per device"
        besides = ["%s %.2f GiB" % (label(name), summary[name])
                   for name in ("warmup_peak_mem_gb", "eval_peak_mem_gb")
                   if summary.get(name) is not None]
        if besides:
            line += " (steady state; %s)" % "; ".join(besides)
        if summary.get("host_peak_rss_gb") is not None:
            line += ", %s %.2f GiB" % (label("host_peak_rss_gb"), summary["host_peak_rss_gb"])
    else:
        line += " host RSS (no device memory statistics)"
    if summary.get("images_per_sec_per_gb") is not None:
        line += ", %.1f %s" % (summary["images_per_sec_per_gb"], label("images_per_sec_per_gb"))
    return [line]


def monitor_lines(summary: dict[str, Any]) -> list[str]:
    """The lines of the monitors that ran (tfbench.monitors.summary's figures): GPU power, then
    host CPU."""
    lines = gpu_power_lines(summary) if "nvml_monitor" in summary else []
    if "host_monitor" in summary:
        lines += host_cpu_lines(summary)
    return lines


def gpu_power_lines(s: dict[str, Any]) -> list[str]:
    """`GPU power: mean 312.4 W, max 398.2 W, energy 3123.5 J (0.0305 J/image), ...`"""
    if s.get("nvml_monitor") != "ok":
        return ["GPU power: %s" % s.get("nvml_monitor")]
    if s.get("power_w_mean") is None and s.get("gpu_util_pct_mean") is None:
        return ["GPU power: no readings"]
    parts = []
    if s.get("power_w_mean") is not None:
        parts.append("%s %.1f W, %s %.1f W" % (label("power_w_mean"), s["power_w_mean"],
                                              label("power_w_max"), s["power_w_max"]))
    else:
        parts.append("power n/a")
    if s.get("energy_j") is not None:
        energy = "%s %.1f J" % (label("energy_j"), s["energy_j"])
        if s.get("joules_per_image") is not None:
            energy += " (%.4g %s)" % (s["joules_per_image"], label("joules_per_image"))
        parts.append(energy)
    if s.get("images_per_sec_per_watt") is not None:
        parts.append("%.3g %s" % (s["images_per_sec_per_watt"],
                                  label("images_per_sec_per_watt")))
    detail = []
    if s.get("gpu_util_pct_mean") is not None:
        detail.append("%s %.0f%%" % (label("gpu_util_pct_mean"), s["gpu_util_pct_mean"]))
    if s.get("temp_c_max") is not None:
        detail.append("%s %.0f C" % (label("temp_c_max"), s["temp_c_max"]))
    if s.get("sm_clock_mhz_mean") is not None:
        detail.append("%s %.0f MHz" % (label("sm_clock_mhz_mean"), s["sm_clock_mhz_mean"]))
    line = "GPU power: " + ", ".join(parts)
    if detail:
        line += "; " + ", ".join(detail)
    if s.get("num_gpus_monitored", 1) > 1:
        line += " (%d GPUs; power and energy are totals)" % s["num_gpus_monitored"]
    return [line]


def host_cpu_lines(s: dict[str, Any]) -> list[str]:
    """`Host CPU: 85% busy (system, 8 cores), process 170% (100% = one core), RSS max 3.21 GiB`"""
    if s.get("host_monitor") != "ok":
        return ["Host CPU: %s" % s.get("host_monitor")]
    if s.get("cpu_util_pct_mean") is None:
        return []
    line = "Host CPU: %.0f%% %s (system, %s cores)" % (
        s["cpu_util_pct_mean"], label("cpu_util_pct_mean"), s.get("num_cpus") or "?")
    if s.get("process_cpu_pct_mean") is not None:
        line += ", %s %.0f%% (100%% = one core)" % (label("process_cpu_pct_mean"),
                                                    s["process_cpu_pct_mean"])
    if s.get("host_rss_gb_max") is not None:
        line += ", %s %.2f GiB" % (label("host_rss_gb_max"), s["host_rss_gb_max"])
    return [line]


def monitor_warnings(summary: dict[str, Any]) -> list[str]:
    """The monitors' warnings (tfbench.monitors.summary's figures): GPU throttling."""
    names = {g["gpu"]: g.get("name") for g in summary.get("gpus") or []}
    warning = throttle_warning(summary.get("per_gpu") or [], names)
    return [warning] if warning else []


def throttle_warning(per_gpu: Sequence[dict[str, Any]],
                     names: Optional[dict[Any, str]] = None) -> Optional[str]:
    """One line naming each GPU that throttled during the timed steps and why, or None.

    per_gpu: tfbench.monitors.aggregate.gpu_per_device's figures, whose `throttle_reasons` maps
    each reason to the fraction of the GPU's samples that reported it, most frequent first."""
    parts = []
    for gpu in per_gpu:
        fractions = gpu.get("throttle_reasons") or {}
        if not fractions:
            continue
        label = "GPU %s" % gpu["gpu"]
        if names and names.get(gpu["gpu"]):
            label += " [%s]" % names[gpu["gpu"]]
        ranked = sorted(fractions.items(), key=lambda item: -item[1])   # as JSON loses order
        parts.append("%s %s" % (label, ", ".join(
            "%s in %d%% of samples" % (name, round(100 * f)) for name, f in ranked)))
    if not parts:
        return None
    return ("GPU throttled during the timed run (images/sec reflects the lowered clocks): %s"
            % "; ".join(parts))


def _duration(hours: float) -> str:
    if hours < 1.0:
        return "%.1f minutes" % (hours * 60.0)
    if hours < 48.0:
        return "%.2f hours" % hours
    return "%.1f hours (%.1f days)" % (hours, hours / 24.0)


def estimate_lines(summary: dict[str, Any]) -> list[str]:
    """`Training-time estimate: 1281167 samples x 90 epochs at 2345.60 images/sec x 0.70
    utilization = 19.53 hours` (one line; nothing when the estimate is off)."""
    if not summary or summary.get("estimated_train_hours") is None:
        return []
    return ["%s %d samples x %g epochs at %.2f images/sec x %.2f "
            "utilization = %s" % (label("estimated_train_hours"),
                                  summary["estimate_dataset_size"], summary["estimate_epochs"],
                                  summary["estimate_images_per_sec"],
                                  summary["estimate_utilization"],
                                  _duration(summary["estimated_train_hours"]))]


def scaling_lines(s: dict[str, Any]) -> list[str]:
    """--explain_scaling's probes, the links, and the step split against one device:
    `Scaling probes: all-reduce of 97.5 MiB: time 18.20 ms, algbw 5.36 GB/s, busbw
    9.38 GB/s, expected up to 15.8 GB/s; one device alone 87.10 ms/step; slowest device with
    all at once 90.40 ms/step (GPU 5, 1.03x the median); input pipeline alone 40.00 ms/step`
    `Links: PCIe 3.0 x16; ...`, then `Scaling explained: ...` and the verdict line."""
    parts = []
    if s.get("allreduce_ms") is not None and s.get("allreduce_busbw_gbs") is None:
        # --variable_update=parameter_server: sums at the variables, no all-reduce
        parts.append("gradient sums at the variables' devices and variable reads of %.3g MiB: "
                     "%s %.2f ms" % (s["allreduce_mib"], label("allreduce_ms"),
                                     s["allreduce_ms"]))
    elif s.get("allreduce_ms") is not None:
        part = "%s %.3g MiB: %s %.2f ms, %s %.3g GB/s, %s %.3g GB/s" % (
            label("allreduce_mib"), s["allreduce_mib"], label("allreduce_ms"),
            s["allreduce_ms"], label("allreduce_algbw_gbs"), s["allreduce_algbw_gbs"],
            label("allreduce_busbw_gbs"), s["allreduce_busbw_gbs"])
        if s.get("expected_busbw_gbs") is not None:
            part += ", %s %.3g GB/s" % (label("expected_busbw_gbs"), s["expected_busbw_gbs"])
        parts.append(part)
    elif (s.get("scaling_probes") or {}).get("allreduce", {}).get("not_probed"):
        parts.append("no all-reduce: %s" % s["scaling_probes"]["allreduce"]["not_probed"])
    if s.get("one_device_step_ms") is not None:
        parts.append("%s %.2f ms/step" % (label("one_device_step_ms"),
                                           s["one_device_step_ms"]))
        parts.append("%s %.2f ms/step (%s%.2f%s)" % (
            label("slowest_device_step_ms"), s["slowest_device_step_ms"],
            "%s, " % s["slowest_device"] if s.get("slowest_device") else "",
            s["slowest_device_ratio"], label("slowest_device_ratio")))
    if s.get("input_step_ms") is not None:
        parts.append("%s %.2f ms/step" % (label("input_step_ms"), s["input_step_ms"]))
    lines = ["Scaling probes: " + "; ".join(parts)] if parts else []
    if s.get("link") and not str(s["link"]).startswith(("logical CPU", "one CPU")):
        lines.append("Links: %s" % s["link"])
    explained = s.get("scaling_explained")
    if explained:
        lost = ", ".join("%s %.1f" % (scaling.CAUSE_LABELS[cause], explained["lost_pts"][cause])
                         for cause in scaling.CAUSES)
        lines.append("Scaling explained: %.2f ms/step against %.2f ms on %s, %.1f%% efficiency; "
                     "points lost: %s" % (explained["step_ms"], explained["reference_ms"],
                                          explained["reference"], explained["efficiency_pct"],
                                          lost))
        lines.append(explained["verdict"])
    return lines


def input_diagnosis_line(result: RunResult) -> str:
    """--diagnose_input's verdict from its three figures (tfbench.data.diagnose words it)."""
    return diagnose.input_bound_verdict(result.extra["synthetic_images_per_sec"],
                                        result.images_per_sec,
                                        result.extra["input_only_images_per_sec"])[1]
