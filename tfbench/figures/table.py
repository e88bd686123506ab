"""The table of every figure of a run, one declaration each (tfbench.figures.figure.Figure):
its name (the CSV column and the JSON key), definition, unit, console label, and how reports
read, title, format and combine it. Table order is CSV order.

Adding a figure: compute it (into RunResult or its `extra` under this name) and declare it here
(a figure the JSON manifest alone keeps, with no console label: tfbench/figures/manifest.py).
CSV columns are only ever appended: a new one goes after the last CSV figure and needs
SCHEMA_VERSION + 1 (tests/test_promises.py pins every version's header); then
`python -m tfbench.output.docgen`. Every report reads the declaration: a title and a format
make it a column of report tables, `repeats` one their rows aggregate, `shows` one of the
Results or compare columns.
"""

from __future__ import annotations

from tfbench.figures.figure import Figure

SCHEMA_VERSION = 6   # 2: warmup_peak_mem_gb; 3: expected_range_source; 4: --explain_scaling;
#                      5: serving_path to tensorrt_version (--saved_model, --trt_mode);
#                      6: devices_checked to max_grad_rel_diff (--validate_devices)


def _f(name: str, definition: str, unit: str = "", label: str = "", csv: bool = True,
       line: str = "", *, type: str = "float", role: str = "measure", identifies: bool = False,
       title: str = "", format: str = "", repeats: str = "none", workers: str = "none",
       shows: frozenset[str] | set[str] = frozenset(), sentence: str = "",
       better: str = "") -> Figure:
    return Figure(name, definition, unit, label, csv, line, type=type, role=role,
                  identifies=identifies, title=title, format=format, repeats=repeats,
                  workers=workers, shows=frozenset(shows), sentence=sentence,
                  better=better or BETTER.get(name, ""))


def _config(name: str, definition: str, type: str, title: str = "", *, unit: str = "",
            format: str = "") -> Figure:
    """A column that says what ran and identifies the configuration: the same in every worker's
    row."""
    return _f(name, definition, unit, type=type, role="config", identifies=True, title=title,
              format=format, workers="same")


IPS = "images/sec"

# Which way each figure with a direction is better (Figure.better): the history's changes say
# "worse" or "better" by it, and its gates fail on "worse".
BETTER: dict[str, str] = {
    **dict.fromkeys(("images_per_sec", "step_images_per_sec", "tflops_per_sec", "mfu_pct",
                     "images_per_sec_per_gb", "images_per_sec_per_watt", "top_1_accuracy",
                     "top_5_accuracy", "images_per_sec_median", "images_per_sec_min",
                     "images_per_sec_max", "synthetic_images_per_sec",
                     "input_only_images_per_sec", "allreduce_algbw_gbs",
                     "allreduce_busbw_gbs"), "higher"),
    **dict.fromkeys(("latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_mean",
                     "latency_ms_min", "latency_ms_max", "first_step_sec", "warmup_sec",
                     "peak_mem_gb", "warmup_peak_mem_gb", "eval_peak_mem_gb",
                     "host_peak_rss_gb", "power_w_mean", "power_w_max", "energy_j",
                     "joules_per_image", "temp_c_max", "jitter", "spread_pct",
                     "estimated_train_hours", "allreduce_ms", "one_device_step_ms",
                     "slowest_device_step_ms", "input_step_ms", "steady_step_sec_mean",
                     "host_ms_between_steps", "export_sec", "load_sec", "trt_convert_sec",
                     "trt_build_sec"), "lower"),
}

FIGURES: tuple[Figure, ...] = (
    # --- what ran -------------------------------------------------------------------------
    _f("schema_version", "version of this column set", type="int", role="record", workers="same"),
    _f("run_id", "unique id of the run; the JSON manifest is <json_dir>/<run_id>.json",
       type="text", role="record", title="Run"),
    _f("timestamp", "UTC start time, ISO 8601", type="text", role="record"),
    _f("status", "ok, oom, nan, interrupted or error", type="text", role="record", title="Status"),
    _f("error", "the error message when status is not ok",
       type="text", role="record", title="Error"),
    _config("model", "--model", "text", "Model"),
    _config("dataset", "imagenet or cifar10 (label space and default sizes)", "text", "Dataset"),
    _config("mode", "training, forward_only, eval or data_only", "text", "Mode"),
    _config("precision", "fp32, fp16 or bf16", "text", "Precision"),
    _config("xla", "1 when the step was compiled with XLA", "bool", "XLA", format="on|off"),
    _config("batch_size", "batch per device", "int", "Batch/device"),
    _config("global_batch_size", "batch per step over all devices and workers", "int",
            "Global batch"),
    _config("num_devices", "devices per worker", "int", "Devices/worker"),
    _config("device_kind", "cpu or gpu", "text", "Device kind"),
    _config("device_name", "GPU or CPU model name", "text", "Device"),
    _config("num_workers", "worker processes (multi-host)", "int", "Workers"),
    _config("variable_update", "how variables were shared (strategy)", "text", "Variables"),
    _config("data_source", "synthetic or the real-data reader", "text", "Data"),
    _config("data_format", "NHWC or NCHW", "text", "Layout"),
    _config("image_size", "input height = width", "int", "Image size (px)", unit="px"),
    _f("num_batches", "timed steps requested", type="int", role="config", workers="same"),
    _f("num_warmup_batches", "untimed warm-up steps the run plans (--eval: the one cold call "
       "before the timed batches)", type="int", role="config", workers="same"),
    _config("accum_steps", "micro-batches per optimizer update", "int", "Accum. steps"),
    _f("steps_run", "timed steps actually run (every repeat's)", type="int", workers="same"),
    # --- throughput -----------------------------------------------------------------------
    _f("images_per_sec", "the `total images/sec` figure: images of the timed steps of all "
       "workers / wall time of the timed loop (with --num_runs, the median of the repeats')",
       IPS, "total images/sec:", line="footer",
       title="Images/sec", format="{:,.1f}", repeats="median", workers="same", shows={"summary"}),
    _f("step_images_per_sec", "the Step lines' figure over every timed step of the last "
       "repeat: per-worker batch / mean step time (EWMA-weighted with --display_perf_ewma)",
       IPS, "images/sec:", line="Step line", workers="sum"),
    _f("step_images_per_sec_plusminus", "the Step line's +/-: population std of per-step "
       "speeds / sqrt(n)", IPS, "+/-",
       line="Step line", repeats="median", workers="sum"),
    _f("jitter", "the Step line's jitter: 1.4826 x median absolute deviation of per-step speeds",
       IPS, "jitter =", line="Step line", workers="sum"),
    _f("first_step_sec", "time of the first (cold) step", "s", "first step",
       line="Cold start", workers="same"),
    _f("warmup_sec", "wall time of warm-up, from the start of its first step to the end of its "
       "last (host work between steps included)", "s", "warm-up",
       line="Cold start", workers="same"),
    _f("final_loss", "last reported loss"),
    _f("top_1_accuracy", "eval or last training top-1", workers="same"),
    _f("top_5_accuracy", "eval or last training top-5", workers="same"),
    # --- model ----------------------------------------------------------------------------
    _f("params", "trainable parameters of the model (batch-norm moving statistics and other "
       "non-trainable state excluded, as in published counts)", "", "trainable params",
       line="Model stats", type="int", workers="same"),
    _f("gflops_per_image", "forward GFLOPs per image (multiply-add = 2 FLOPs)", "GFLOPs",
       "GFLOPs/image forward",
       line="Model stats", title="GFLOPs per image (forward)", format="{:,.3f}", workers="same"),
    _f("tflops_per_sec", "achieved TFLOP/s (training counted as 3x forward)", "TFLOP/s",
       "achieved",
       line="Model stats", title="Achieved TFLOP/s", format="{:,.3f}", workers="same"),
    _f("mfu_pct", "model FLOPs utilisation: tflops_per_sec / (peak per device x devices)", "%",
       "MFU",
       line="Model stats", title="MFU (%)", format="{:.1f}", workers="same"),
    _f("peak_tflops", "peak dense TFLOP/s per device used for mfu_pct", "TFLOP/s",
       "TFLOP/s per device",
       line="Model stats", workers="same"),
    # --- latency --------------------------------------------------------------------------
    _f("latency_ms_p50", "median step time per batch (linear interpolation)", "ms", "p50",
       line="Latency", title="p50 latency (ms)", format="{:.2f}", repeats="median", workers="same",
       shows={"summary", "compare"}),
    _f("latency_ms_p90", "90th percentile step time per batch", "ms", "p90",
       line="Latency", workers="same"),
    _f("latency_ms_p99", "99th percentile step time per batch", "ms", "p99",
       line="Latency", title="p99 latency (ms)", format="{:.2f}", repeats="median", workers="same",
       shows={"summary", "compare"}),
    _f("latency_ms_mean", "mean step time per batch", "ms", "mean",
       line="Latency", workers="same"),
    # --- memory ---------------------------------------------------------------------------
    _f("peak_mem_gb", "peak device memory over the timed steps (2^30 bytes; read when they "
       "end: a final checkpoint or evaluation is not in it); on CPU the host's peak RSS; empty "
       "on a GPU run whose device statistics are unavailable and on a parameter-server "
       "controller (its workers run the steps)", "GiB", "peak",
       line="Memory", title="Peak memory (GiB)", format="{:.3f}", repeats="median", workers="max",
       shows={"summary", "compare"}),
    _f("warmup_peak_mem_gb", "peak device memory during warm-up (cuDNN autotuning included)",
       "GiB", "warm-up",
       line="Memory", workers="max"),
    _f("eval_peak_mem_gb", "peak device memory of the evaluations run beside training, each "
       "read apart from the timed steps (the largest)", "GiB", "evaluation",
       csv=False, line="Memory", workers="max"),
    _f("host_peak_rss_gb", "host peak resident memory", "GiB", "host peak RSS",
       line="Memory", workers="max"),
    _f("images_per_sec_per_gb", "this worker's images/sec (images_per_sec / num_workers) "
       "divided by the summed peak memory of its devices (host RSS on CPU)", "images/sec/GiB",
       "images/sec/GiB",
       line="Memory",
       title="Images/sec per GiB", format="{:,.1f}", repeats="median", workers="per_worker",
       shows={"summary"}),
    # --- GPU monitor ----------------------------------------------------------------------
    _f("power_w_mean", "mean GPU power (all monitored GPUs together) over the timed steps", "W",
       "mean",
       line="GPU power", title="Power (W)", format="{:.0f}", repeats="median", workers="sum",
       shows={"summary", "compare"}),
    _f("power_w_max", "max GPU power (all monitored GPUs together) over the timed steps", "W",
       "max",
       line="GPU power", workers="sum"),
    _f("energy_j", "GPU energy over the timed steps of every repeat (warm-up, cooldowns, "
       "evaluations and final checkpoints excluded)", "J", "energy",
       line="GPU power", workers="sum"),
    _f("joules_per_image", "energy_j / this worker's images of those timed steps", "J/image",
       "J/image",
       line="GPU power", workers="mean"),
    _f("images_per_sec_per_watt", "this worker's images/sec (images_per_sec / num_workers) / "
       "power_w_mean", "images/sec/W",
       "images/sec/W",
       line="GPU power",
       title="Images/sec per W", format="{:.2f}", repeats="median", workers="per_worker",
       shows={"summary", "compare"}),
    _f("gpu_util_pct_mean", "mean GPU utilisation over the timed steps", "%", "util",
       line="GPU power", workers="mean"),
    _f("temp_c_max", "max GPU temperature (hottest monitored GPU) over the timed steps", "°C",
       "temp max",
       line="GPU power", repeats="max", workers="max"),
    _f("sm_clock_mhz_mean", "mean SM clock over the timed steps", "MHz", "SM clock",
       line="GPU power", workers="mean"),
    _f("throttled", "1 when the GPU reported throttling during the timed steps",
       type="bool", workers="max"),
    # --- host monitor ---------------------------------------------------------------------
    _f("cpu_util_pct_mean", "mean host CPU utilisation over the timed steps (each reading "
       "weighted by the time it covers)", "%", "busy",
       line="Host CPU", workers="mean"),
    # --- repeats --------------------------------------------------------------------------
    _f("num_runs", "repeats the total images/sec summarises: those of --num_runs that ran to "
       "their end, or the one cut short when none did (empty when no timed step ran)", "",
       "runs",
       line="Repeats", type="int", title="Repeats", workers="same"),
    _f("images_per_sec_median", "median of the repeats' total images/sec (the mean of the two "
       "middle ones for an even count)", IPS, "median",
       line="Repeats", workers="same"),
    _f("images_per_sec_min", "min over repeats", IPS, "min",
       line="Repeats", title="Min images/sec", format="{:,.1f}", workers="same"),
    _f("images_per_sec_max", "max over repeats", IPS, "max",
       line="Repeats", title="Max images/sec", format="{:,.1f}", workers="same"),
    _f("spread_pct", "(max - min) / median over repeats", "%", "spread",
       line="Repeats", title="Spread (%)", format="{:.1f}", workers="same"),
    _f("unstable", "1 when spread_pct exceeds the threshold", "", "UNSTABLE",
       line="Repeats", type="bool", workers="same"),
    # --- studies --------------------------------------------------------------------------
    _f("synthetic_images_per_sec", "--diagnose_input: synthetic-data run", IPS, workers="same"),
    _f("input_only_images_per_sec", "--diagnose_input: input pipeline alone", IPS, workers="same"),
    _f("input_bound", "--diagnose_input verdict: 1 input-bound, 0 not",
       type="bool", workers="same"),
    _f("estimated_train_hours", "--estimate_dataset_size x --estimate_epochs / (images/sec x "
       "--estimate_utilization)", "hours", "Training-time estimate:",
       line="Training-time estimate", workers="same"),
    _f("expected_range", "within / below / above the published range for this GPU, model "
       "version and batch per GPU",
       type="text", title="Expected range", workers="same", shows={"summary"}),
    # --- environment ----------------------------------------------------------------------
    _f("tf_version", "TensorFlow version", type="text", role="environment", workers="same"),
    _f("keras_version", "Keras version", type="text", role="environment", workers="same"),
    _f("tfbench_version", "tfbench version", type="text", role="environment", workers="same"),
    _f("hostname", "host name", type="text", role="environment"),
    _f("notices", "what tfbench changed from what was asked, '; '-separated",
       type="text", role="record"),
    _f("command", "the command line", type="text", role="record"),
    _f("expected_range_source", "the published figures the expected_range verdict used: "
       "source (framework): model, batch per GPU, images/sec",
       type="text", workers="same"),
    # --- --explain_scaling's probes (docs/measurements.md) -------------------------------
    _f("allreduce_ms", "--explain_scaling: one all-reduce of the model's gradients with the "
       "run's strategy, reduction, transfer dtype and packs, alone: a call of 10 back to back "
       "and one host sync, / 10 (median of 5 calls after 1 warm-up)", "ms", "time",
       line="Scaling probes",
       repeats="median", workers="same"),
    _f("allreduce_mib", "--explain_scaling: bytes each rank all-reduces per step, as sent "
       "(fp16 gradients count 2 bytes each)", "MiB", "all-reduce of", line="Scaling probes",
       repeats="median", workers="same"),
    _f("allreduce_algbw_gbs", "--explain_scaling: algorithm bandwidth, allreduce bytes / "
       "allreduce_ms (NCCL tests' algbw; GB = 10^9 bytes)", "GB/s", "algbw",
       line="Scaling probes", workers="same"),
    _f("allreduce_busbw_gbs", "--explain_scaling: bus bandwidth, algbw x 2(n-1)/n for n ranks "
       "of the whole cluster (NCCL tests' busbw), the figure to compare with a link", "GB/s",
       "busbw",
       line="Scaling probes",
       title="All-reduce busbw (GB/s)", format="{:.3g}", repeats="median", workers="same"),
    _f("one_device_step_ms", "--explain_scaling: the one-device step (the model, optimizer and "
       "batch per device of a one-device run) on the fastest of this worker's devices alone "
       "(median of 10)", "ms", "one device alone", line="Scaling probes",
       repeats="median", workers="min"),
    _f("slowest_device_step_ms", "--explain_scaling: that step on the slowest device while "
       "every device of this worker runs it at once (median of 10)", "ms",
       "slowest device with all at once", line="Scaling probes",
       repeats="median", workers="max"),
    _f("slowest_device", "--explain_scaling: the device of slowest_device_step_ms (GPU n: "
       "its CUDA index)", "", "", line="Scaling probes",
       type="text", repeats="first"),
    _f("slowest_device_ratio", "--explain_scaling: slowest_device_step_ms / the median device's "
       "step, all at once", "", "x the median", line="Scaling probes",
       repeats="median"),
    _f("input_step_ms", "--explain_scaling, real data: the input alone as the steps read it "
       "(every replica's pipeline, through the run's distributed iterator, no model), mean "
       "time per step's batch of this worker", "ms", "input pipeline alone",
       line="Scaling probes", repeats="median", workers="max"),
    _f("link", "--explain_scaling: the GPUs' links as NVML reads them (PCIe generation and "
       "width, NVLink, the widest topology between two GPUs, links below their maximum), the "
       "transport NCCL logged, and what decides expected_busbw_gbs ('expected busbw from "
       "...', or 'no expected busbw: ' and why)",
       type="text", title="Link", format="first clause", repeats="first"),
    _f("expected_busbw_gbs", "--explain_scaling: the bus bandwidth the all-reduce's slowest "
       "hop allows, in one direction: rings over NVLink through every GPU (direct links or "
       "NVSwitch), else the slowest GPU's PCIe link, and where the GPUs hang off both CPU "
       "sockets the link between them at NCCL's rate for the host's CPU where slower; on "
       "several workers the NICs NCCL uses between hosts where slower; empty when a hop's rate "
       "is unknown", "GB/s",
       "expected up to", line="Scaling probes",
       title="Expected busbw (GB/s)", format="{:.3g}", repeats="median", workers="min"),
    # --- serving path: --saved_model, --trt_mode (docs/serving.md) --------------------------
    _config("serving_path", "what the timed steps called: empty = the model in-process; "
            "saved_model = the loaded SavedModel's serving signature; tftrt = the same after "
            "TF-TRT conversion", "text", "Serving", format="empty=in-process"),
    _f("export_sec", "writing the SavedModel with its serving signature, before warm-up", "s",
       "export", line="Serving path"),
    _f("load_sec", "tf.saved_model.load of the SavedModel the steps call (the converted one with "
       "--trt_mode), before warm-up", "s", "load", line="Serving path"),
    _config("trt_mode", "--trt_mode: the precision TF-TRT was asked for (FP32, FP16 or INT8)",
            "text", "TF-TRT mode"),
    _f("trt_precisions", "the precision_mode of the TensorRT engines in the converted graph "
       "('+'-joined when they differ; empty when TF-TRT made none)",
       type="text", workers="same"),
    _f("trt_segments", "TensorRT segments: TRTEngineOp nodes of the converted graph", "",
       "TensorRT segments", line="TF-TRT",
       type="int", workers="same"),
    _f("trt_ops_in_tensorrt", "ops inside the TensorRT segments (the nodes of their native "
       "segments, as TF-TRT's summary() counts them)", "", "ops in TensorRT", line="TF-TRT",
       type="int", workers="same"),
    _f("trt_ops_in_tensorflow", "nodes of the converted graph left to TensorFlow (placeholders "
       "and outputs included, as TF-TRT's summary() counts them)", "", "ops left in TensorFlow",
       line="TF-TRT", type="int", workers="same"),
    _f("trt_convert_sec", "TF-TRT's convert() (dynamic-shape mode), before warm-up", "s",
       "convert", line="TF-TRT"),
    _f("trt_build_sec", "TF-TRT's build(): the optimisation profile for the run's input shape, "
       "INT8 calibration, and the TensorRT engines built, before warm-up", "s", "engine build",
       line="TF-TRT"),
    _f("trt_calibration_batches", "--trt_mode=INT8: batches of the run's input calibration ran "
       "on", "", "calibration batches", line="TF-TRT",
       type="int", role="config", workers="same"),
    _f("tensorrt_version", "the TensorRT TensorFlow loaded (--trt_mode runs)",
       type="text", role="environment", workers="same"),
    _f("trt_engines", "TensorRT engines built before warm-up, counted in the converted "
       "SavedModel (one per segment; a segment without one runs in TensorFlow)", "",
       "engines built", csv=False, line="TF-TRT"),
    # --- --validate_devices: each device alone (docs/validate.md) --------------------------
    _f("devices_checked", "--validate_devices: this worker's devices checked alone (each one's "
       "entry in the JSON manifest's device_checks)", "", "devices alone",
       line="Device checks", type="int", workers="sum"),
    _f("slowest_alone_device", "--validate_devices: the device whose training step alone is "
       "slowest (GPU n: its CUDA index)", "", "", line="Device checks",
       type="text"),
    _f("slowest_alone_ratio", "--validate_devices: that device's step alone / the median "
       "device's step alone (median of 10 after 2 each)", "", "step alone",
       line="Device checks"),
    _f("slowest_matmul_device", "--validate_devices: the device with the fewest matmul TFLOP/s "
       "(tfbench peak's NxN matmul in the run's precision)", "", "", line="Device checks",
       type="text"),
    _f("slowest_matmul_ratio", "--validate_devices: the median device's matmul TFLOP/s / that "
       "device's (each the median of 10 calls after 2)", "", "matmul", line="Device checks"),
    _f("slowest_conv_device", "--validate_devices: the device with the fewest TFLOP/s in tfbench "
       "peak's 3x3 convolution training step", "", "", line="Device checks",
       type="text"),
    _f("slowest_conv_ratio", "--validate_devices: the median device's convolution TFLOP/s / that "
       "device's", "", "conv", line="Device checks"),
    _f("devices_differing", "--validate_devices: devices whose loss and gradients on the same "
       "batch from the same weights are not the first device's: not bit-exact under op "
       "determinism, else beyond the bound of the run's precision", "", "differing devices",
       line="Device checks", type="int", workers="sum"),
    _f("max_grad_rel_diff", "--validate_devices: the largest difference of any device's loss or "
       "gradient element from the first device's, relative to that tensor's largest magnitude "
       "there; empty when a difference is not finite", "", "largest difference",
       line="Device checks", workers="max"),
    # --- the JSON manifest and the console only -------------------------------------------
    _f("latency_ms_min", "fastest step per batch", "ms", "min", csv=False,
       line="Latency", workers="same"),
    _f("latency_ms_max", "slowest step per batch", "ms", "max", csv=False,
       line="Latency", workers="same"),
    _f("steady_step_sec_mean", "mean timed step (shown in ms/step)", "s", "steady state",
       csv=False, line="Cold start", workers="same"),
    _f("process_cpu_pct_mean", "this process's CPU over the timed steps, 100 = one core", "%",
       "process", csv=False,
       line="Host CPU", workers="mean"),
    _f("host_rss_gb_max", "largest host RSS sampled", "GiB", "RSS max", csv=False,
       line="Host CPU", workers="max"),
    _f("served_max_abs_diff", "largest |served - in-process| logit on one batch of synthetic "
       "images, before warm-up (TF-TRT's FP16 and INT8 engines round)", "",
       "max |served - in-process| logit", csv=False, line="Serving path",
       workers="max"),
    _f("trt_save_sec", "TF-TRT's save() of the converted SavedModel, engines included, before "
       "warm-up", "s", "save", csv=False, line="TF-TRT"),
    _f("batch_norm_folded_convolutions", "--fold_batch_norm: convolutions the batch norm after "
       "them was folded into, for the inference steps", csv=False, line="Batch norm folded",
       type="int", workers="same", sentence="Batch norm folded into %d convolutions for "
       "inference (--nofold_batch_norm times the unfolded model)"),
    _f("host_ms_between_steps", "host time between two timed steps (a clock reading, the loss, "
       "a Step line), per step: in total images/sec, not in the step times", "ms", csv=False,
       line="Host time between steps", workers="same"),
    _f("memory_unavailable", "why no device memory peak is known", csv=False, line="Memory",
       type="text"),
    _f("nvml_monitor", "the NVML monitor: ok, or not available and why", csv=False,
       line="GPU power", type="text"),
    _f("host_monitor", "the host monitor: ok, or not available and why", csv=False,
       line="Host CPU", type="text"),
    _f("environment_changes", "the environment fields that changed between the run's start and "
       "end", csv=False, line="Environment changed during the run", type="json"),
    _f("expected_range_reference", "the published band expected_range judged against, with its "
       "sources", csv=False, line="Expected range", type="json", workers="same"),
    _f("input_settings", "--diagnose_input: the real-data runs' tf.data threads and host "
       "buffers", csv=False, line="Input settings", type="text", workers="same"),
)

_UNDECLARED = set(BETTER) - {f.name for f in FIGURES}
if _UNDECLARED:   # a direction for a figure the table does not have (a typo, a rename)
    raise ValueError("BETTER names figures the table does not declare: %s" % sorted(_UNDECLARED))
