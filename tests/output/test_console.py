"""tfbench's own console lines (tfbench/output/console.py), each variant pinned as the literal
line a user reads: units, rounding, singular and plural, the cases without a reading."""

import pytest

from tfbench.measure import estimate
from tfbench.output import console
from tfbench.results import RunResult
from tfbench.measure import stats


def _estimate(hours):
    return console.estimate_lines({"estimated_train_hours": hours, "estimate_dataset_size": 10,
                                   "estimate_epochs": 2, "estimate_images_per_sec": 3.0,
                                   "estimate_utilization": 0.5})[0].split(" = ")[1]


def test_estimate_durations_change_unit_at_one_hour_and_two_days():
    assert _estimate(0.5) == "30.0 minutes"
    assert _estimate(0.999) == "59.9 minutes"
    assert _estimate(1.0) == "1.00 hours"
    assert _estimate(47.99) == "47.99 hours"
    assert _estimate(48.0) == "48.0 hours (2.0 days)"


def test_latency_without_a_percentile_says_na():
    summary = {"latency_ms_p50": 1.5, "latency_ms_p90": None, "latency_ms_p99": 3.25,
               "latency_ms_mean": 2.0, "latency_ms_min": 1.0, "latency_ms_max": 4.0}
    assert console.latency_lines(summary) == [
        "Latency (ms/batch): p50 1.50  p90 n/a  p99 3.25  mean 2.00  min 1.00  max 4.00"]
    assert console.latency_lines({"latency_ms_p50": None}) == []


def test_cold_start_variants():
    assert console.cold_start_lines({"first_step_sec": 1.5, "num_warmup_steps": 1,
                                     "warmup_sec": 2.0}) == [
        "Cold start: first step 1.500 s, warm-up 2.000 s (1 step)"]
    assert console.cold_start_lines({"first_step_sec": 1.5, "num_warmup_steps": 0,
                                     "warmup_sec": 2.0, "steady_step_sec_mean": 0.25}) == [
        "Cold start: first step 1.500 s, steady state 250.00 ms/step"]
    assert console.cold_start_lines({"first_step_sec": None}) == []


def test_gpu_power_variants():
    assert console.gpu_power_lines({"nvml_monitor": "not available (no driver)"}) == [
        "GPU power: not available (no driver)"]
    assert console.gpu_power_lines({"nvml_monitor": "ok"}) == ["GPU power: no readings"]
    assert console.gpu_power_lines({"nvml_monitor": "ok", "power_w_mean": 100.0,
                                    "power_w_max": 120.0}) == [
        "GPU power: mean 100.0 W, max 120.0 W"]
    assert console.gpu_power_lines({"nvml_monitor": "ok", "gpu_util_pct_mean": 50.0,
                                    "num_gpus_monitored": 1}) == [
        "GPU power: power n/a; util 50%"]
    assert console.gpu_power_lines({"nvml_monitor": "ok", "power_w_mean": 600.0,
                                    "power_w_max": 700.0, "energy_j": 1234.56,
                                    "num_gpus_monitored": 2}) == [
        "GPU power: mean 600.0 W, max 700.0 W, energy 1234.6 J (2 GPUs; power and energy are "
        "totals)"]


def test_host_cpu_variants_and_both_monitors_in_order():
    assert console.host_cpu_lines({"host_monitor": "ok", "cpu_util_pct_mean": 40.4}) == [
        "Host CPU: 40% busy (system, ? cores)"]
    assert console.host_cpu_lines({"host_monitor": "not available (psutil)"}) == [
        "Host CPU: not available (psutil)"]
    assert console.host_cpu_lines({"host_monitor": "ok", "cpu_util_pct_mean": None}) == []
    both = {"nvml_monitor": "ok", "power_w_mean": 1.0, "power_w_max": 2.0,
            "host_monitor": "ok", "cpu_util_pct_mean": 3.0, "num_cpus": 2}
    assert console.monitor_lines(both) == ["GPU power: mean 1.0 W, max 2.0 W",
                                           "Host CPU: 3% busy (system, 2 cores)"]


def test_repeats_of_two_and_a_spread_that_cannot_be_computed():
    summary = {"num_runs": 2, "images_per_sec_median": 0.0, "images_per_sec_min": 0.0,
               "images_per_sec_max": 0.0, "spread_pct": None}
    assert console.repeat_lines(summary) == [
        "Repeats: 2 runs, median 0.00 images/sec, min 0.00, max 0.00, spread n/a"]
    assert console.repeat_lines({"images_per_sec_median": 5.0}) == []


def test_throttle_warning_names_each_gpu_and_ranks_its_reasons():
    per_gpu = [{"gpu": 0, "throttle_reasons": {}},
               {"gpu": 1, "throttle_reasons": {"hw_slowdown": 0.25, "sw_power_cap": 0.6}},
               {"gpu": 2, "throttle_reasons": {"sw_thermal_slowdown": 0.125}}]
    expected = ("GPU throttled during the timed run (images/sec reflects the lowered clocks): "
                "GPU 1%s sw_power_cap in 60%% of samples, hw_slowdown in 25%% of samples; "
                "GPU 2 sw_thermal_slowdown in 12%% of samples")
    assert console.throttle_warning(per_gpu) == expected % ""
    assert console.throttle_warning(per_gpu, {1: "NVIDIA H100", 2: None}) == \
        expected % " [NVIDIA H100]"
    assert console.throttle_warning([{"gpu": 0}]) is None
    summary = {"per_gpu": per_gpu, "gpus": [{"gpu": 1, "name": "A100"}]}
    assert console.monitor_warnings(summary) == [expected % " [A100]"]


def test_lines_a_run_shows_or_leaves_out():
    res = RunResult(images_per_sec=12.345, step_times=[0.1, 0.2])
    assert console.footer(res) == ["-" * 64, "total images/sec: 12.35", "-" * 64]
    assert console.stopped_lines(res) == [
        "Measured before the stop: 2 timed steps, 12.35 images/sec"]
    assert console.stopped_lines(RunResult()) == []
    assert console.footer(RunResult(train_and_eval=True)) == []
    server = RunResult(params=5, server_task="ps 0")
    assert console.footer(server) == [] and console.summary_lines(server) == []
    assert console.fold_line(3) == ("Batch norm folded into 3 convolutions for inference "
                                    "(--nofold_batch_norm times the unfolded model)")
    folded = RunResult(params=5, mode="training",
                       extra={"batch_norm_folded_convolutions": 3})
    assert console.summary_lines(folded) == ["Model stats: 5 trainable params",
                                                   console.fold_line(3)]


def test_a_whole_summary_in_order():
    """Every part of the summary a run can print, in the order printed."""
    res = RunResult(mode="eval", params=25557032, gflops_per_image=8.178,
                    tflops_per_sec=12.5, images_per_sec=500.0, first_step_sec=2.0)
    res.extra.update({
        "mfu_pct": 4.25, "peak_tflops": 312.0, "latency_ms_p50": 1.0, "latency_ms_p90": 2.0,
        "latency_ms_p99": 3.0, "latency_ms_mean": 1.5, "latency_ms_min": 0.5,
        "latency_ms_max": 4.0, "per_gpu": [{"gpu": 0, "throttle_reasons": {"hw_slowdown": 1.0}}],
        "num_runs": 2, "images_per_sec_median": 500.0, "images_per_sec_min": 490.0,
        "images_per_sec_max": 510.0, "spread_pct": 4.0, "unstable": False,
        "environment_changes": [{"field": "gpu.0.clock", "before": "1410", "after": "1200"}],
        "expected_range_reference": {
            "verdict": None, "device_name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "gpu": "A100",
            "model": "resnet50", "mode": "training", "precision": "fp16", "num_gpus": 1,
            "mig": True},
        "input_bound": False, "synthetic_images_per_sec": 1000.0,
        "input_only_images_per_sec": 2000.0})
    assert console.summary_lines(res) == [
        "Model stats: 25,557,032 trainable params, 8.178 GFLOPs/image forward (multiply-add = "
        "2), achieved 12.500 TFLOP/s, MFU 4.2% of 312.0 TFLOP/s per device",
        "Latency (ms/batch): p50 1.00  p90 2.00  p99 3.00  mean 1.50  min 0.50  max 4.00",
        "Cold start: first step 2.000 s",
        "WARNING: GPU throttled during the timed run (images/sec reflects the lowered clocks): "
        "GPU 0 hw_slowdown in 100% of samples",
        "Repeats: 2 runs, median 500.00 images/sec, min 490.00, max 510.00, spread 4.0%",
        "Environment changed during the run: gpu.0.clock: 1410 -> 1200",
        "Expected range: none for NVIDIA A100-SXM4-40GB MIG 1g.5gb, a MIG slice (published "
        "figures are whole GPUs)",
        "Input diagnosis: slowed by input, not bound by it (synthetic 1000.0, real data 500.0, "
        "input pipeline alone 2000.0 images/sec; real data reaches 50% of synthetic but the "
        "pipeline alone delivers 4.0x that): the model and the pipeline compete for the host "
        "(CPU threads, host-to-device copies); try --datasets_num_private_threads to cap the "
        "pipeline's threads, or more host cores"]
    res.mode = "training"
    assert console.summary_lines(res)[0].endswith(
        "achieved 12.500 TFLOP/s (training = 3x forward), MFU 4.2% of 312.0 TFLOP/s per device")
    assert not [l for l in console.summary_lines(res) if l.startswith("Latency")]


def test_summary_and_console_line():
    s = estimate.estimate_summary(2345.6, 1281167, 90, 0.7)
    assert s["estimated_train_hours"] == pytest.approx(1281167 * 90 / (2345.6 * 0.7) / 3600)
    assert console.estimate_lines(s) == [
        "Training-time estimate: 1281167 samples x 90 epochs at 2345.60 images/sec x 0.70 "
        "utilization = 19.51 hours"]


def test_console_units():
    short = estimate.estimate_summary(1000.0, 50000, 1, 1.0)
    assert console.estimate_lines(short)[0].endswith("= 0.8 minutes")
    long = estimate.estimate_summary(100.0, 1281167, 90, 0.7)
    assert console.estimate_lines(long)[0].endswith("= 457.6 hours (19.1 days)")


def test_console_line_latency_format():
    s = stats.latency_summary([0.01234, 0.01234, 0.02])
    (line,) = console.latency_lines(s)
    assert line.startswith("Latency (ms/batch): p50 12.34  p90 18.47  p99 19.85  mean 14.89")
    assert line.endswith("min 12.34  max 20.00")
