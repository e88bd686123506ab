"""What else a run keeps in RunResult.extra, for the JSON manifest only: no CSV column, no console
label. The raw series and structures a report or a check recomputes from, the monitors' states,
and what an error left (docs/output.md names `extra.exception` and `extra.traceback`).

Every key of `extra` is a figure of tfbench/figures/table.py or a declaration here
(tests/figures/test_manifest.py checks a real run's manifest and every summary function).
"""

from __future__ import annotations

from tfbench.figures.figure import Figure


def _j(name: str, definition: str, type: str = "json", unit: str = "", *,
       role: str = "measure", workers: str = "none") -> Figure:
    return Figure(name, definition, unit, csv=False, type=type, role=role, workers=workers)


MANIFEST_ONLY: tuple[Figure, ...] = (
    # --- what ran -------------------------------------------------------------------------
    _j("devices", "the devices the steps ran on, as TensorFlow names them", role="config"),
    _j("num_epochs", "epochs the timed steps cover (--num_epochs, or --num_batches over the "
       "dataset)", "float", role="config", workers="same"),
    _j("reduction", "how gradients were all-reduced, as the strategy says it", "text",
       role="config", workers="same"),
    _j("unstable_threshold_pct", "--unstable_threshold_pct: the spread over repeats above "
       "which a measurement is unstable", "float", "%", role="config", workers="same"),
    _j("tf_git_hash", "the git version TensorFlow was built from", "text", role="environment",
       workers="same"),
    # --- raw series -----------------------------------------------------------------------
    _j("wall_time_runs", "each repeat's wall time of its timed loop", unit="s"),
    _j("images_per_sec_runs", "each repeat's total images/sec (--num_runs)", unit="images/sec"),
    _j("display_events", "each Step line's step, images/sec, time and accuracy (the legacy "
       "benchmark logs)"),
    _j("evaluations", "each evaluation run beside training: top-1, top-5, examples"),
    _j("samples", "the monitors' readings over the run, by monitor"),
    _j("scaling_probes", "--explain_scaling: each probe's timings and what it read"),
    _j("scaling_explained", "--explain_scaling: the step split against the one-device step"),
    _j("trt_summary", "TF-TRT's summary() of the converted graph, line by line"),
    _j("device_checks", "--validate_devices: each device's entry (its step alone, kernels, and "
       "loss and gradients against the first device's)"),
    _j("device_checks_numeric", "--validate_devices: the numeric check's settings"),
    _j("device_checks_run", "--validate_devices: the checks that ran (step, kernels, numeric: "
       "--validate_device_checks)"),
    # --- beside the step statistics ---------------------------------------------------------
    _j("num_warmup_steps", "warm-up steps run", "int", workers="same"),
    _j("first_step_vs_steady", "first_step_sec / steady_step_sec_mean", "float",
       workers="same"),
    # --- memory ---------------------------------------------------------------------------
    _j("peak_mem_source", "device (device memory statistics) or host (peak RSS, on CPU)",
       "text", workers="same"),
    _j("device_peak_mem_gb", "each device's peak over the timed steps", unit="GiB"),
    # --- monitors -------------------------------------------------------------------------
    _j("energy_source", "counter (NVML's energy counter) or power_integral", "text",
       workers="same"),
    _j("mem_util_pct_mean", "mean GPU memory-controller utilisation over the timed steps",
       "float", "%", workers="mean"),
    _j("nvml_mem_used_gb_max", "largest GPU memory in use as NVML reads it (CUDA context and "
       "TensorFlow's pool included)", "float", "GiB", workers="max"),
    _j("throttle_reasons", "the throttle reasons GPUs reported during the timed steps, "
       "','-joined", "text"),
    _j("num_gpus_monitored", "GPUs the NVML monitor read", "int", workers="sum"),
    _j("per_gpu", "each GPU's figures over the timed steps"),
    _j("gpus", "each monitored GPU's static facts (name, memory, ...)"),
    _j("cpu_util_pct_max", "largest host CPU utilisation sampled over the timed steps",
       "float", "%", workers="max"),
    _j("num_cpus", "the host's logical CPUs", "int", role="environment"),
    # --- the training-time estimate ---------------------------------------------------------
    _j("estimate_dataset_size", "--estimate_dataset_size", "int", role="config",
       workers="same"),
    _j("estimate_epochs", "--estimate_epochs", "float", role="config", workers="same"),
    _j("estimate_utilization", "--estimate_utilization", "float", role="config",
       workers="same"),
    _j("estimate_images_per_sec", "the images/sec the estimate used", "float", "images/sec",
       workers="same"),
    # --- what an error left -----------------------------------------------------------------
    _j("exception", "the exception a failed run ended with: class and message", "text",
       role="record"),
    _j("traceback", "its traceback, for an error tfbench has no words for", "text",
       role="record"),
)
