"""Every command-line flag tfbench accepts, as one table.

The legacy tf_cnn_benchmarks flags keep their name, type, default and meaning. Each spec carries a
role (ROLES):
  legacy    - a legacy flag, meaningful under TF2 and implemented;
  tf1_only  - a legacy TF1/graph-only flag: accepted, and a non-default value prints one "no
              effect" warning;
  tfbench   - tfbench's own flags.
The table is the single source for absl flag definitions (cli), Params fields (params), the
settings groups by concern (CONCERNS, settings_groups) and the flag reference in docs/flags.md.
Longer than the layout guide's 420 lines: one table, every flag in it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence


LEGACY, TF1_ONLY, TFBENCH = "legacy", "tf1_only", "tfbench"
ROLES = (LEGACY, TF1_ONLY, TFBENCH)


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    name: str
    kind: str  # bool | int | float | string | enum | list
    default: Any
    help: str
    role: str = "legacy"   # ROLES
    enum_values: Optional[Sequence[str]] = None
    lower_bound: Optional[float] = None
    upper_bound: Optional[float] = None
    empty: str = ""   # an enum that accepts an empty value: what it means ('' is no choice)

    def __post_init__(self) -> None:
        if self.enum_values is not None and "" in self.enum_values and not self.empty:
            raise ValueError("flag %s accepts an empty value: say what it means (empty=)"
                             % self.name)


def choices(spec: FlagSpec) -> str:
    """An enum's values as a sentence names them: 'fp32, fp16 or bf16, or empty (the default:
    fp16 with --use_fp16, else fp32)'; the one wording of errors and --helpfull."""
    named = [v for v in spec.enum_values or () if v]
    text = " or ".join([", ".join(named[:-1]), named[-1]]) if len(named) > 1 else named[0]
    if "" in (spec.enum_values or ()):
        text += ", or empty (%s%s)" % ("the default: " if spec.default == "" else "", spec.empty)
    return text


def _legacy(kind, name, default, help, **kw):
    return FlagSpec(name, kind, default, help, LEGACY, **kw)


def _tf1_only(kind, name, default, help, **kw):
    return FlagSpec(name, kind, default, help, TF1_ONLY, **kw)


def _tfbench(kind, name, default, help, **kw):
    return FlagSpec(name, kind, default, help, TFBENCH, **kw)


DEVICE_VALUES = ("cpu", "gpu", "CPU", "GPU")
# --validate_device_checks' names (tfbench.engine.device_checks runs them in this order).
DEVICE_CHECKS = ("step", "kernels", "numeric")

LEGACY_FLAGS: tuple[FlagSpec, ...] = (
    # --- core / run control -------------------------------------------------------------
    _legacy("string", "model", "trivial", "Name of the model to run (see `tfbench models`)."),
    _legacy("bool", "eval", False,
            "Evaluate the latest checkpoint in --train_dir instead of training."),
    _legacy("int", "eval_interval_secs", 0, "Re-evaluate every N seconds; 0 evaluates once."),
    _legacy("int", "eval_during_training_every_n_steps", None,
       "Every n steps, pause training, run evaluation, then resume.", lower_bound=1),
    _legacy("float", "eval_during_training_every_n_epochs", None,
       "After every n epochs, pause training, run evaluation, then resume."),
    _legacy("list", "eval_during_training_at_specified_steps", [],
       "Training steps at which to pause and evaluate."),
    _legacy("list", "eval_during_training_at_specified_epochs", [],
       "Training epochs after which to pause and evaluate."),
    _legacy("bool", "forward_only", False, "Inference benchmark: forward pass only."),
    _tf1_only("bool", "freeze_when_forward_only", False,
       "Freeze the graph in forward-only mode (TF1; with --trt_mode TF-TRT freezes the graph "
       "itself, as the legacy script required)."),
    _legacy("bool", "print_training_accuracy", False,
            "Print top-1/top-5 training accuracy columns."),
    _legacy("int", "batch_size", 0, "Batch size per compute device; 0 = the model's default.",
       lower_bound=0),
    _legacy("int", "eval_batch_size", 0,
            "Eval batch size per device; 0 = --batch_size.", lower_bound=0),
    _tf1_only("int", "batch_group_size", 1, "Batches per preprocessing group (TF1 staging)."),
    _legacy("int", "num_batches", None, "Number of timed batches, excluding warm-up. Default 100."),
    _legacy("int", "num_eval_batches", None,
            "Number of eval batches. Default: the --num_batches rule."),
    _legacy("float", "num_epochs", None,
            "Epochs to run, excluding warm-up (excludes --num_batches)."),
    _legacy("float", "num_eval_epochs", None, "Eval length in validation epochs."),
    _legacy("float", "stop_at_top_1_accuracy", None,
       "Stop training once eval top-1 reaches this (needs --eval_during_training_*)."),
    _tf1_only("bool", "collect_eval_results_async", False,
              "Asynchronous eval post-processing (SSD)."),
    _legacy("int", "num_warmup_batches", None,
       "Untimed warm-up batches. Default 10, or max(10, 5 x --autotune_threshold^2)."),
    _legacy("int", "autotune_threshold", None,
       "Sets TF_AUTOTUNE_THRESHOLD (TensorFlow's cuDNN autotuner, GPU runs) and raises the "
       "default warm-up to max(10, 5 x N^2) batches, as the legacy script."),
    _legacy("int", "num_gpus", 1, "Devices per worker (with --device=cpu: N logical CPU devices)."),
    _legacy("string", "gpu_indices", "", "Comma-separated indices of the GPUs to use."),
    _legacy("int", "display_every", 10, "Print a Step line every N steps.", lower_bound=1),
    _legacy("float", "display_perf_ewma", None, "EWMA weight for the displayed images/sec mean.",
       lower_bound=0, upper_bound=1),
    # --- data ---------------------------------------------------------------------------
    _legacy("string", "data_dir", None, "Dataset directory; unset = synthetic data."),
    _legacy("string", "data_name", None,
       "imagenet, cifar10, tfds:NAME or folder; default guessed from --data_dir."),
    _legacy("string", "resize_method", "bilinear",
       "nearest, bilinear, bicubic, area or round_robin."),
    _legacy("bool", "distortions", False, "Colour distortions in training preprocessing."),
    _tf1_only("bool", "use_datasets", True, "Use tf.data (always on in TF2)."),
    _legacy("string", "input_preprocessor", "default", "default or official_models_imagenet."),
    _legacy("string", "gpu_thread_mode", "gpu_private",
       "GPU host thread mode: global, gpu_private or gpu_shared (TF_GPU_THREAD_MODE; given, "
       "it replaces the environment's value)."),
    _legacy("int", "per_gpu_thread_count", 0,
       "Threads per GPU (TF_GPU_THREAD_COUNT; gpu_shared: times the GPUs); 0 = 2."),
    _legacy("bool", "hierarchical_copy", False,
       "Hierarchical-copy all-reduce (HierarchicalCopyAllReduce); needs --num_gpus > 1."),
    _tf1_only("enum", "network_topology", "dgx1", "Topology for hierarchical copy.",
       enum_values=("dgx1", "gcp_v100")),
    _legacy("int", "gradient_repacking", 0,
       "replicated and multi-host collective_all_reduce: all-reduce the gradients in N packs "
       "of about equal bytes, in the order the backward pass makes them; 0 = packs of 25 MiB "
       "on GPUs, each gradient alone on CPUs.", lower_bound=0),
    _legacy("bool", "compact_gradient_transfer", True,
       "replicated and multi-host collective_all_reduce: all-reduce fp16 runs' gradients in "
       "fp16 (bf16 runs' in bf16 where --xla compiles the all-reduce on GPUs), cast back "
       "after."),
    _tf1_only("enum", "variable_consistency", "strong", "Variable consistency.",
       enum_values=("strong", "relaxed")),
    _legacy("bool", "datasets_repeat_cached_sample", False,
       "Read one record into memory and repeat it (input-pipeline ceiling)."),
    _legacy("enum", "local_parameter_device", "gpu", "Where parameter_server keeps variables.",
       enum_values=DEVICE_VALUES),
    _legacy("enum", "device", "gpu", "Compute device. Default: gpu when one is visible, else cpu.",
       enum_values=DEVICE_VALUES),
    _legacy("enum", "data_format", "NCHW",
       "Image layout. Default: NCHW on GPU, NHWC on CPU.", enum_values=("NHWC", "NCHW")),
    _legacy("int", "num_intra_threads", None, "Intra-op threads; None = TF default (1 on GPU)."),
    _legacy("int", "num_inter_threads", 0, "Inter-op threads; 0 = TF default."),
    _tf1_only("bool", "use_numa_affinity", False, "NUMA affinity for CPU devices."),
    _legacy("string", "trace_file", "",
       "Write a TensorFlow profiler trace of a few steps after warm-up to this path."),
    _legacy("bool", "use_chrome_trace_format", True, "Also write the trace in Chrome JSON format."),
    _tf1_only("string", "tfprof_file", None, "tfprof ProfileProto output (TF1)."),
    _tf1_only("string", "graph_file", None, "Write the GraphDef (TF1)."),
    _tf1_only("string", "partitioned_graph_file_prefix", None, "Write partitioned graphs (TF1)."),
    # --- precision, XLA, optimizer, learning rate ---------------------------------------
    _legacy("enum", "optimizer", "sgd", "momentum (Nesterov), sgd, rmsprop or adam.",
       enum_values=("momentum", "sgd", "rmsprop", "adam")),
    _legacy("float", "init_learning_rate", None, "Constant initial learning rate."),
    _legacy("string", "piecewise_learning_rate_schedule", None,
            "LR0;E1;LR1;...;En;LRn (E in epochs)."),
    _legacy("float", "num_epochs_per_decay", 0, "Staircase decay period in epochs."),
    _legacy("float", "learning_rate_decay_factor", 0, "Decay factor per period."),
    _legacy("float", "num_learning_rate_warmup_epochs", 0, "Linear warm-up epochs."),
    _legacy("float", "minimum_learning_rate", 0, "Learning-rate floor (needs the decay flags)."),
    _legacy("float", "resnet_base_lr", None, "ResNet base LR at batch 256 (default 0.128)."),
    _legacy("float", "momentum", 0.9, "Momentum."),
    _legacy("float", "rmsprop_decay", 0.9, "RMSProp decay."),
    _legacy("float", "rmsprop_momentum", 0.9, "RMSProp momentum."),
    _legacy("float", "rmsprop_epsilon", 1.0, "RMSProp epsilon."),
    _legacy("float", "adam_beta1", 0.9, "Adam beta1."),
    _legacy("float", "adam_beta2", 0.999, "Adam beta2."),
    _legacy("float", "adam_epsilon", 1e-8, "Adam epsilon."),
    _legacy("float", "gradient_clip", None, "Element-wise gradient clipping to +/- this value."),
    _legacy("float", "weight_decay", 0.00004, "L2 weight decay factor."),
    _tf1_only("float", "gpu_memory_frac_for_testing", 0, "GPU memory fraction.", lower_bound=0.0),
    _tf1_only("bool", "use_unified_memory", None, "Unified memory."),
    _tf1_only("bool", "timestamped_allocator", False, "Timestamped BFC allocator."),
    _tf1_only("int", "gpu_kt_max_interval", 0, "GPU kernel tracker interval."),
    _tf1_only("int", "gpu_kt_max_bytes", 0, "GPU kernel tracker bytes."),
    _tf1_only("int", "gpu_kt_max_pending", 0, "GPU kernel tracker pending events."),
    _tf1_only("bool", "use_tf_layers", True, "tf.layers vs own layers (TF1)."),
    _legacy("int", "tf_random_seed", 1234, "Random seed."),
    _tf1_only("string", "debugger", None, "TF1 debugger."),
    _tf1_only("bool", "use_python32_barrier", False, "threading.Barrier."),
    _legacy("bool", "ml_perf", False, "MLPerf-style ImageNet preprocessing (mean subtraction)."),
    _tf1_only("bool", "datasets_use_prefetch", True, "MultiDeviceIterator prefetch (TF1)."),
    _tf1_only("int", "datasets_prefetch_buffer_size", 1, "Prefetch buffer per device."),
    _legacy("int", "datasets_num_private_threads", None,
       "Private thread pool size for tf.data (0: TensorFlow's shared threads). Default on "
       "GPUs: the CPUs minus the GPU threads minus 2 per GPU, as the legacy script; on the "
       "CPU: the shared threads."),
    _legacy("bool", "datasets_use_caching", False, "Cache the input records in memory."),
    _legacy("int", "datasets_parallel_interleave_cycle_length", None,
            "Interleave width (default 10)."),
    _legacy("bool", "datasets_sloppy_parallel_interleave", False,
            "Non-deterministic interleave order."),
    _legacy("int", "datasets_parallel_interleave_prefetch", None, "Interleave prefetch per input."),
    _tf1_only("int", "multi_device_iterator_max_buffer_size", 1, "MultiDeviceIterator buffer."),
    _tf1_only("bool", "winograd_nonfused", True, "Winograd non-fused convolutions."),
    _legacy("bool", "batchnorm_persistent", True,
       "cuDNN persistent batch norm (TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT=1; the "
       "--no form removes it)."),
    _tf1_only("bool", "sync_on_finish", False, "Sync devices after each step."),
    _tf1_only("bool", "staged_vars", False, "Staged variables."),
    _legacy("bool", "force_gpu_compatible", False,
       "Host tensors in pinned memory (gpu_options.force_gpu_compatible): input batches copy "
       "to the GPUs by DMA."),
    _legacy("bool", "allow_growth", None, "GPU memory growth."),
    _legacy("bool", "xla", False, "Compile the step with XLA."),
    _legacy("bool", "xla_compile", False, "Compile the step with XLA (same as --xla in tfbench)."),
    _legacy("bool", "fuse_decode_and_crop", True, "Fused JPEG decode and crop."),
    _legacy("bool", "distort_color_in_yiq", True, "Colour distortion in YIQ space."),
    _legacy("bool", "enable_optimizations", True, "Grappler optimizations."),
    _tf1_only("string", "rewriter_config", None, "RewriterConfig proto text."),
    _legacy("enum", "loss_type_to_report", "total_loss", "Loss shown in Step lines.",
       enum_values=("base_loss", "total_loss")),
    _tf1_only("bool", "single_l2_loss_op", False, "Single L2 loss op."),
    _tf1_only("bool", "use_resource_vars", False, "Resource variables."),
    _tf1_only("bool", "compute_lr_on_cpu", False, "Learning-rate ops on CPU."),
    _tf1_only("bool", "sparse_to_dense_grads", False, "Sparse to dense gradients."),
    _legacy("bool", "mkl", False, "Set the MKL/OpenMP environment variables."),
    _legacy("int", "kmp_blocktime", 0, "KMP_BLOCKTIME with --mkl."),
    _legacy("string", "kmp_affinity", "granularity=fine,verbose,compact,1,0",
            "KMP_AFFINITY with --mkl."),
    _legacy("int", "kmp_settings", 1, "KMP_SETTINGS with --mkl."),
    _legacy("bool", "use_fp16", False,
            "Mixed precision float16 (legacy spelling of --precision=fp16)."),
    _legacy("float", "fp16_loss_scale", None, "Static loss scale for fp16 (default 128)."),
    _tf1_only("bool", "fp16_vars", False, "fp16 variables."),
    _legacy("bool", "fp16_enable_auto_loss_scale", False, "Dynamic loss scaling for fp16."),
    _legacy("int", "fp16_inc_loss_scale_every_n", 1000, "Dynamic loss scale growth interval."),
    # --- variable management / distributed ----------------------------------------------
    _legacy("enum", "variable_update", "parameter_server",
            "How variables are shared between devices.",
       enum_values=("parameter_server", "replicated", "distributed_replicated", "independent",
                    "distributed_all_reduce", "collective_all_reduce", "horovod")),
    _legacy("string", "all_reduce_spec", None, "Cross-device reduction: nccl, xring, pscpu, ..."),
    _tf1_only("int", "agg_small_grads_max_bytes", 0, "Aggregate small gradients."),
    _tf1_only("int", "agg_small_grads_max_group", 10, "Aggregate small gradients group."),
    _tf1_only("int", "allreduce_merge_scope", 1, "All-reduce merge scope."),
    _legacy("enum", "job_name", "", "This task's job in a cluster: ps, worker or controller.",
       enum_values=("ps", "worker", "controller", ""), empty="no cluster"),
    _legacy("string", "ps_hosts", "", "Comma-separated parameter-server hosts."),
    _legacy("string", "worker_hosts", "", "Comma-separated worker hosts."),
    _legacy("string", "controller_host", None, "Controller host."),
    _legacy("int", "task_index", 0, "Index of this task within its job."),
    _legacy("string", "server_protocol", "grpc", "Server protocol."),
    _tf1_only("bool", "cross_replica_sync", True, "Synchronous cross-replica updates."),
    _legacy("string", "horovod_device", "", "Device for Horovod all-reduce."),
    # --- output, checkpoints ------------------------------------------------------------
    _legacy("int", "summary_verbosity", 0, "0 off, 1 scalars, 2 +gradient histograms, 3 +images."),
    _legacy("int", "save_summaries_steps", 0, "Summary period in steps; 0 = off."),
    _legacy("int", "save_model_secs", 0, "Checkpoint every N seconds; 0 = off."),
    _legacy("int", "save_model_steps", None, "Checkpoint every N steps."),
    _legacy("int", "max_ckpts_to_keep", 5, "Checkpoints to keep."),
    _legacy("string", "train_dir", None,
            "Checkpoint directory (the final checkpoint is always saved)."),
    _legacy("string", "eval_dir", "/tmp/tf_cnn_benchmarks/eval", "Eval event directory."),
    _tf1_only("string", "backbone_model_path", None, "Pretrained backbone (SSD)."),
    _legacy("enum", "trt_mode", "",
       "Forward-only and --eval runs: convert the served SavedModel with TF-TRT at this "
       "precision (FP32, FP16, or INT8 calibrated on the run's own input) and time it; needs "
       "TensorFlow built with TensorRT and a GPU (NVIDIA's TensorFlow container). Implies "
       "--saved_model.", enum_values=("", "FP32", "FP16", "INT8"), empty="no TF-TRT"),
    _legacy("int", "trt_max_workspace_size_bytes", 4 << 30,
       "--trt_mode: the most GPU memory, in bytes, each TensorRT engine may use as workspace."),
    _legacy("string", "benchmark_log_dir", None, "Write benchmark_run.log and metric.log here."),
    _legacy("string", "benchmark_test_id", None, "Test id recorded in benchmark_run.log."),
    _tf1_only("bool", "ml_perf_compliance_logging", False, "MLPerf compliance logging."),
)

TFBENCH_FLAGS: tuple[FlagSpec, ...] = (
    _tfbench("float", "peak_tflops", 0.0,
       "Peak TFLOP/s of one device for MFU; 0 = datasheet table (GPUs) or `tfbench peak` cache.",
       lower_bound=0),
    _tfbench("bool", "use_synthetic_data", False,
       "Synthetic inputs even when --data_dir is set."),
    _tfbench("int", "accum_steps", 1, "Gradient accumulation: micro-batches per optimizer update.",
       lower_bound=1),
    _tfbench("int", "image_size", 0,
             "Input height and width; 0 = the model's default.", lower_bound=0),
    _tfbench("string", "csv_file", "tfbench_results.csv",
       "Append one result row per run to this CSV; empty disables."),
    _tfbench("string", "json_dir", "tfbench_runs",
       "Write a JSON manifest per run (<run_id>.json) here; empty disables."),
    _tfbench("string", "history", None,
       "The results history every result is added to: a SQLite file or a postgresql:// URL; "
       "empty disables; unset = $TFBENCH_HISTORY, else ~/.local/share/tfbench/history.sqlite "
       "(docs/history.md)."),
    _tfbench("enum", "precision", "", "fp32, fp16 (mixed_float16) or bf16 (mixed_bfloat16).",
       enum_values=("", "fp32", "fp16", "bf16"), empty="fp16 with --use_fp16, else fp32"),
    _tfbench("bool", "fold_batch_norm", True,
       "Forward-only and --eval runs: fold each inference-mode batch norm into the convolution "
       "before it, as inference compilers do (same outputs up to float rounding; lets a residual "
       "Add + ReLU fuse into the convolution). --nofold_batch_norm times the model unfolded."),
    # --- measurement: monitors, repeats, training-time estimate -------------------------
    _tfbench("int", "monitor_interval_ms", 250,
       "Sample GPU power/temperature/clocks (NVML) and host CPU every N ms; 0 = no sampling.",
       lower_bound=0),
    _tfbench("int", "num_runs", 1,
       "Repeat the measurement N times in one invocation; report median, min, max, spread.",
       lower_bound=1),
    _tfbench("float", "cooldown_secs", 0.0,
             "Seconds to wait between repeated runs.", lower_bound=0),
    _tfbench("float", "unstable_threshold_pct", 10.0,
       "Mark a repeated result unstable when (max - min) / median exceeds this, %.",
       lower_bound=0),
    _tfbench("int", "estimate_dataset_size", 0,
       "Training runs: print and record the hours to train this many samples "
       "(x --estimate_epochs); 0 = off.",
       lower_bound=0),
    _tfbench("float", "estimate_epochs", 1.0, "Epochs for the training-time estimate.",
       lower_bound=0.01),
    _tfbench("float", "estimate_utilization", 0.7,
       "Fraction of the benchmark's images/sec a real training run sustains (estimate).",
       lower_bound=0.01, upper_bound=1.0),
    # --- input pipeline -----------------------------------------------------------------
    _tfbench("bool", "data_only", False,
       "Benchmark the input pipeline alone (needs --data_dir): images/sec delivered, no model."),
    _tfbench("bool", "diagnose_input", False,
       "Run synthetic, real-data and input-only, and say whether the real-data run is "
       "input-bound (needs --data_dir)."),
    # --- studies ------------------------------------------------------------------------
    _tfbench("int", "gpu_memory_limit_mb", 0,
       "Cap each GPU's usable memory at N MB (a logical device with memory_limit) to emulate "
       "a smaller card, e.g. for `tfbench sweep --find_max_batch_size`; 0 = no cap.",
       lower_bound=0),
    # --- inference as deployed ----------------------------------------------------------
    _tfbench("bool", "saved_model", False,
       "Forward-only and --eval runs: export the model as a SavedModel with a serving signature, "
       "load it back and time the loaded signature as a deployment calls it (one device)."),
    _tfbench("string", "saved_model_dir", "",
       "Keep the SavedModel of --saved_model (and the TF-TRT one of --trt_mode) in this new or "
       "empty directory; default: a temporary directory, removed when the run ends."),
    _tfbench("int", "trt_calibration_batches", 10,
       "--trt_mode=INT8: batches of the run's input (synthetic or --data_dir) that INT8 "
       "calibration runs on.", lower_bound=1),
    # --- multi-host ---------------------------------------------------------------------
    _tfbench("int", "cluster_timeout_secs", 120,
       "Multi-host: stop with an error naming the unreachable peers when the cluster has not "
       "formed (or, with parameter servers, a step has not completed) within N seconds.",
       lower_bound=1),
    # --- scaling explained --------------------------------------------------------------
    _tfbench("bool", "explain_scaling", False,
       "After the timed steps on several devices or workers, probe where the scaling "
       "efficiency goes: the gradient all-reduce alone, each device's step alone and all "
       "together, the input pipeline alone, the GPUs' links (docs/measurements.md)."),
    # --- each device alone, for `tfbench validate` ------------------------------------------
    _tfbench("bool", "validate_devices", False,
       "Training runs: after the timed steps, check each of this worker's devices alone: the "
       "run's training step, a matmul and a 3x3 convolution in the run's precision, and one "
       "forward and backward pass from the same weights on the same batch under TensorFlow's "
       "op determinism, whose gradients every device must reproduce bit for bit "
       "(docs/validate.md)."),
    _tfbench("list", "validate_device_checks", list(DEVICE_CHECKS),
       "--validate_devices: which checks run on each device: step (the training step alone), "
       "kernels (the matmul and the convolution), numeric (the gradients every device must "
       "reproduce); `tfbench validate --level=quick` runs kernels,numeric."),
    _tfbench("string", "validate_allreduce_json", "",
       "Training runs on several devices: after the timed steps (and --validate_devices' "
       "checks), time the all-reduce probe of `tfbench allreduce` on the run's own strategy "
       "and model (the gradients, then sizes up to 1 GiB on GPUs, those a GPU has no room "
       "for left out, 1 MiB on CPU devices) and "
       "write its JSON to this file, for `tfbench validate` (docs/validate.md)."),
)

ALL_FLAGS: tuple[FlagSpec, ...] = LEGACY_FLAGS + TFBENCH_FLAGS

BY_NAME: dict[str, FlagSpec] = {f.name: f for f in ALL_FLAGS}


def graph_only_overrides(values: Mapping[str, Any]) -> list[str]:
    """Names of TF1-only flags that `values` (every flag's value by name) sets to a non-default
    value."""
    return [f.name for f in ALL_FLAGS if f.role == TF1_ONLY and values[f.name] != f.default]


# --- concerns: which part of a run each flag settles ----------------------------------------
# Below the configuration layer a run reads its settings by concern (config.settings), one
# frozen group per concern, generated from this table (config/settings_groups.py).
CONCERNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "workload": ("the model that runs, its input size and its initial weights", (
        "model", "image_size", "tf_random_seed", "use_tf_layers", "single_l2_loss_op",
        "backbone_model_path")),
    "mode": ("what the timed steps do: train, forward only, evaluate a checkpoint, read the "
             "input alone, or serve an exported model", (
        "eval", "eval_interval_secs", "eval_during_training_every_n_steps",
        "eval_during_training_every_n_epochs", "eval_during_training_at_specified_steps",
        "eval_during_training_at_specified_epochs", "stop_at_top_1_accuracy",
        "collect_eval_results_async", "forward_only", "freeze_when_forward_only", "data_only",
        "diagnose_input", "saved_model", "saved_model_dir", "trt_mode",
        "trt_max_workspace_size_bytes", "trt_calibration_batches", "fold_batch_norm")),
    "schedule": ("how many images a step takes and how many steps are warmed up, timed and "
                 "repeated", (
        "batch_size", "eval_batch_size", "batch_group_size", "accum_steps", "num_batches",
        "num_eval_batches", "num_epochs", "num_eval_epochs", "num_warmup_batches", "num_runs",
        "cooldown_secs")),
    "data": ("the input: which data, how it is read and preprocessed", (
        "data_dir", "data_name", "use_synthetic_data", "resize_method", "distortions",
        "use_datasets", "input_preprocessor", "ml_perf", "fuse_decode_and_crop",
        "distort_color_in_yiq", "datasets_repeat_cached_sample", "datasets_use_prefetch",
        "datasets_prefetch_buffer_size", "datasets_num_private_threads",
        "datasets_use_caching", "datasets_parallel_interleave_cycle_length",
        "datasets_sloppy_parallel_interleave", "datasets_parallel_interleave_prefetch",
        "multi_device_iterator_max_buffer_size")),
    "devices": ("the devices of one worker, their memory, and how variables and gradients "
                "are shared between them (the strategy)", (
        "device", "num_gpus", "gpu_indices", "data_format", "gpu_memory_limit_mb",
        "allow_growth", "force_gpu_compatible", "gpu_memory_frac_for_testing",
        "use_unified_memory", "timestamped_allocator", "gpu_kt_max_interval",
        "gpu_kt_max_bytes", "gpu_kt_max_pending", "variable_update", "all_reduce_spec",
        "local_parameter_device", "hierarchical_copy", "network_topology",
        "gradient_repacking", "compact_gradient_transfer", "variable_consistency",
        "agg_small_grads_max_bytes", "agg_small_grads_max_group", "allreduce_merge_scope",
        "horovod_device", "cross_replica_sync", "staged_vars", "sync_on_finish",
        "use_resource_vars")),
    "cluster": ("the hosts of a multi-host run and this task's place among them", (
        "job_name", "ps_hosts", "worker_hosts", "controller_host", "task_index",
        "server_protocol", "cluster_timeout_secs")),
    "runtime": ("how TensorFlow executes the step: threads, XLA, graph rewrites, cuDNN and "
                "MKL settings", (
        "xla", "xla_compile", "enable_optimizations", "rewriter_config", "gpu_thread_mode",
        "per_gpu_thread_count", "num_intra_threads", "num_inter_threads", "use_numa_affinity",
        "autotune_threshold", "batchnorm_persistent", "winograd_nonfused", "mkl",
        "kmp_blocktime", "kmp_affinity", "kmp_settings", "use_python32_barrier", "debugger")),
    "numerics": ("the precision the step computes in and how fp16 scales its loss", (
        "precision", "use_fp16", "fp16_loss_scale", "fp16_vars",
        "fp16_enable_auto_loss_scale", "fp16_inc_loss_scale_every_n")),
    "learning": ("the optimizer, its learning rate over time and the regularisation", (
        "optimizer", "init_learning_rate", "piecewise_learning_rate_schedule",
        "num_epochs_per_decay", "learning_rate_decay_factor",
        "num_learning_rate_warmup_epochs", "minimum_learning_rate", "resnet_base_lr",
        "momentum", "rmsprop_decay", "rmsprop_momentum", "rmsprop_epsilon", "adam_beta1",
        "adam_beta2", "adam_epsilon", "gradient_clip", "weight_decay", "compute_lr_on_cpu",
        "sparse_to_dense_grads")),
    "measurement": ("what is measured and shown beside images/sec, and the probes after the "
                    "timed steps", (
        "display_every", "display_perf_ewma", "print_training_accuracy",
        "loss_type_to_report", "monitor_interval_ms", "unstable_threshold_pct", "peak_tflops",
        "estimate_dataset_size", "estimate_epochs", "estimate_utilization", "trace_file",
        "use_chrome_trace_format", "tfprof_file", "graph_file",
        "partitioned_graph_file_prefix", "summary_verbosity", "save_summaries_steps",
        "explain_scaling", "validate_devices", "validate_device_checks",
        "validate_allreduce_json")),
    "outputs": ("where results, logs and checkpoints are written", (
        "csv_file", "json_dir", "history", "benchmark_log_dir", "benchmark_test_id",
        "ml_perf_compliance_logging", "train_dir", "eval_dir", "save_model_secs",
        "save_model_steps", "max_ckpts_to_keep")),
}

CONCERN_OF: dict[str, str] = {name: concern for concern, (_, names) in CONCERNS.items()
                              for name in names}
