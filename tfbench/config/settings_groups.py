"""The settings of a run, one frozen group per concern (flagdefs.CONCERNS).

Generated from the flag table by tfbench.config.settings_source: do not edit; run
`python -m tfbench.config.settings_source` after changing a flag. Each field is the
flag of the same name, as parsed and validated (config.params). Longer than the
layout guide's 420 lines: generated, every flag in it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Workload:
    """The model that runs, its input size and its initial weights."""

    # Name of the model to run (see `tfbench models`).
    model: str

    # Input height and width; 0 = the model's default.
    image_size: int

    # Random seed.
    tf_random_seed: int

    # tf.layers vs own layers (TF1).
    use_tf_layers: bool

    # Single L2 loss op.
    single_l2_loss_op: bool

    # Pretrained backbone (SSD).
    backbone_model_path: Optional[str]


@dataclasses.dataclass(frozen=True)
class Mode:
    """What the timed steps do: train, forward only, evaluate a checkpoint, read the input alone,
    or serve an exported model.
    """

    # Evaluate the latest checkpoint in --train_dir instead of training.
    eval: bool

    # Re-evaluate every N seconds; 0 evaluates once.
    eval_interval_secs: int

    # Every n steps, pause training, run evaluation, then resume.
    eval_during_training_every_n_steps: Optional[int]

    # After every n epochs, pause training, run evaluation, then resume.
    eval_during_training_every_n_epochs: Optional[float]

    # Training steps at which to pause and evaluate.
    eval_during_training_at_specified_steps: tuple[str, ...]

    # Training epochs after which to pause and evaluate.
    eval_during_training_at_specified_epochs: tuple[str, ...]

    # Stop training once eval top-1 reaches this (needs --eval_during_training_*).
    stop_at_top_1_accuracy: Optional[float]

    # Asynchronous eval post-processing (SSD).
    collect_eval_results_async: bool

    # Inference benchmark: forward pass only.
    forward_only: bool

    # Freeze the graph in forward-only mode (TF1; with --trt_mode TF-TRT freezes the graph
    # itself, as the legacy script required).
    freeze_when_forward_only: bool

    # Benchmark the input pipeline alone (needs --data_dir): images/sec delivered, no model.
    data_only: bool

    # Run synthetic, real-data and input-only, and say whether the real-data run is input-bound
    # (needs --data_dir).
    diagnose_input: bool

    # Forward-only and --eval runs: export the model as a SavedModel with a serving signature,
    # load it back and time the loaded signature as a deployment calls it (one device).
    saved_model: bool

    # Keep the SavedModel of --saved_model (and the TF-TRT one of --trt_mode) in this new or
    # empty directory; default: a temporary directory, removed when the run ends.
    saved_model_dir: str

    # Forward-only and --eval runs: convert the served SavedModel with TF-TRT at this precision
    # (FP32, FP16, or INT8 calibrated on the run's own input) and time it; needs TensorFlow built
    # with TensorRT and a GPU (NVIDIA's TensorFlow container). Implies --saved_model.
    trt_mode: str

    # --trt_mode: the most GPU memory, in bytes, each TensorRT engine may use as workspace.
    trt_max_workspace_size_bytes: int

    # --trt_mode=INT8: batches of the run's input (synthetic or --data_dir) that INT8 calibration
    # runs on.
    trt_calibration_batches: int

    # Forward-only and --eval runs: fold each inference-mode batch norm into the convolution
    # before it, as inference compilers do (same outputs up to float rounding; lets a residual
    # Add + ReLU fuse into the convolution). --nofold_batch_norm times the model unfolded.
    fold_batch_norm: bool


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How many images a step takes and how many steps are warmed up, timed and repeated."""

    # Batch size per compute device; 0 = the model's default.
    batch_size: int

    # Eval batch size per device; 0 = --batch_size.
    eval_batch_size: int

    # Batches per preprocessing group (TF1 staging).
    batch_group_size: int

    # Gradient accumulation: micro-batches per optimizer update.
    accum_steps: int

    # Number of timed batches, excluding warm-up. Default 100.
    num_batches: Optional[int]

    # Number of eval batches. Default: the --num_batches rule.
    num_eval_batches: Optional[int]

    # Epochs to run, excluding warm-up (excludes --num_batches).
    num_epochs: Optional[float]

    # Eval length in validation epochs.
    num_eval_epochs: Optional[float]

    # Untimed warm-up batches. Default 10, or max(10, 5 x --autotune_threshold^2).
    num_warmup_batches: Optional[int]

    # Repeat the measurement N times in one invocation; report median, min, max, spread.
    num_runs: int

    # Seconds to wait between repeated runs.
    cooldown_secs: float


@dataclasses.dataclass(frozen=True)
class Data:
    """The input: which data, how it is read and preprocessed."""

    # Dataset directory; unset = synthetic data.
    data_dir: Optional[str]

    # imagenet, cifar10, tfds:NAME or folder; default guessed from --data_dir.
    data_name: Optional[str]

    # Synthetic inputs even when --data_dir is set.
    use_synthetic_data: bool

    # nearest, bilinear, bicubic, area or round_robin.
    resize_method: str

    # Colour distortions in training preprocessing.
    distortions: bool

    # Use tf.data (always on in TF2).
    use_datasets: bool

    # default or official_models_imagenet.
    input_preprocessor: str

    # MLPerf-style ImageNet preprocessing (mean subtraction).
    ml_perf: bool

    # Fused JPEG decode and crop.
    fuse_decode_and_crop: bool

    # Colour distortion in YIQ space.
    distort_color_in_yiq: bool

    # Read one record into memory and repeat it (input-pipeline ceiling).
    datasets_repeat_cached_sample: bool

    # MultiDeviceIterator prefetch (TF1).
    datasets_use_prefetch: bool

    # Prefetch buffer per device.
    datasets_prefetch_buffer_size: int

    # Private thread pool size for tf.data (0: TensorFlow's shared threads). Default on GPUs: the
    # CPUs minus the GPU threads minus 2 per GPU, as the legacy script; on the CPU: the shared
    # threads.
    datasets_num_private_threads: Optional[int]

    # Cache the input records in memory.
    datasets_use_caching: bool

    # Interleave width (default 10).
    datasets_parallel_interleave_cycle_length: Optional[int]

    # Non-deterministic interleave order.
    datasets_sloppy_parallel_interleave: bool

    # Interleave prefetch per input.
    datasets_parallel_interleave_prefetch: Optional[int]

    # MultiDeviceIterator buffer.
    multi_device_iterator_max_buffer_size: int


@dataclasses.dataclass(frozen=True)
class Devices:
    """The devices of one worker, their memory, and how variables and gradients are shared between
    them (the strategy).
    """

    # Compute device. Default: gpu when one is visible, else cpu.
    device: str

    # Devices per worker (with --device=cpu: N logical CPU devices).
    num_gpus: int

    # Comma-separated indices of the GPUs to use.
    gpu_indices: str

    # Image layout. Default: NCHW on GPU, NHWC on CPU.
    data_format: str

    # Cap each GPU's usable memory at N MB (a logical device with memory_limit) to emulate a
    # smaller card, e.g. for `tfbench sweep --find_max_batch_size`; 0 = no cap.
    gpu_memory_limit_mb: int

    # GPU memory growth.
    allow_growth: Optional[bool]

    # Host tensors in pinned memory (gpu_options.force_gpu_compatible): input batches copy to the
    # GPUs by DMA.
    force_gpu_compatible: bool

    # GPU memory fraction.
    gpu_memory_frac_for_testing: float

    # Unified memory.
    use_unified_memory: Optional[bool]

    # Timestamped BFC allocator.
    timestamped_allocator: bool

    # GPU kernel tracker interval.
    gpu_kt_max_interval: int

    # GPU kernel tracker bytes.
    gpu_kt_max_bytes: int

    # GPU kernel tracker pending events.
    gpu_kt_max_pending: int

    # How variables are shared between devices.
    variable_update: str

    # Cross-device reduction: nccl, xring, pscpu, ...
    all_reduce_spec: Optional[str]

    # Where parameter_server keeps variables.
    local_parameter_device: str

    # Hierarchical-copy all-reduce (HierarchicalCopyAllReduce); needs --num_gpus > 1.
    hierarchical_copy: bool

    # Topology for hierarchical copy.
    network_topology: str

    # replicated and multi-host collective_all_reduce: all-reduce the gradients in N packs of
    # about equal bytes, in the order the backward pass makes them; 0 = packs of 25 MiB on GPUs,
    # each gradient alone on CPUs.
    gradient_repacking: int

    # replicated and multi-host collective_all_reduce: all-reduce fp16 runs' gradients in fp16
    # (bf16 runs' in bf16 where --xla compiles the all-reduce on GPUs), cast back after.
    compact_gradient_transfer: bool

    # Variable consistency.
    variable_consistency: str

    # Aggregate small gradients.
    agg_small_grads_max_bytes: int

    # Aggregate small gradients group.
    agg_small_grads_max_group: int

    # All-reduce merge scope.
    allreduce_merge_scope: int

    # Device for Horovod all-reduce.
    horovod_device: str

    # Synchronous cross-replica updates.
    cross_replica_sync: bool

    # Staged variables.
    staged_vars: bool

    # Sync devices after each step.
    sync_on_finish: bool

    # Resource variables.
    use_resource_vars: bool


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The hosts of a multi-host run and this task's place among them."""

    # This task's job in a cluster: ps, worker or controller.
    job_name: str

    # Comma-separated parameter-server hosts.
    ps_hosts: str

    # Comma-separated worker hosts.
    worker_hosts: str

    # Controller host.
    controller_host: Optional[str]

    # Index of this task within its job.
    task_index: int

    # Server protocol.
    server_protocol: str

    # Multi-host: stop with an error naming the unreachable peers when the cluster has not formed
    # (or, with parameter servers, a step has not completed) within N seconds.
    cluster_timeout_secs: int


@dataclasses.dataclass(frozen=True)
class Runtime:
    """How TensorFlow executes the step: threads, XLA, graph rewrites, cuDNN and MKL settings."""

    # Compile the step with XLA.
    xla: bool

    # Compile the step with XLA (same as --xla in tfbench).
    xla_compile: bool

    # Grappler optimizations.
    enable_optimizations: bool

    # RewriterConfig proto text.
    rewriter_config: Optional[str]

    # GPU host thread mode: global, gpu_private or gpu_shared (TF_GPU_THREAD_MODE; given, it
    # replaces the environment's value).
    gpu_thread_mode: str

    # Threads per GPU (TF_GPU_THREAD_COUNT; gpu_shared: times the GPUs); 0 = 2.
    per_gpu_thread_count: int

    # Intra-op threads; None = TF default (1 on GPU).
    num_intra_threads: Optional[int]

    # Inter-op threads; 0 = TF default.
    num_inter_threads: int

    # NUMA affinity for CPU devices.
    use_numa_affinity: bool

    # Sets TF_AUTOTUNE_THRESHOLD (TensorFlow's cuDNN autotuner, GPU runs) and raises the default
    # warm-up to max(10, 5 x N^2) batches, as the legacy script.
    autotune_threshold: Optional[int]

    # cuDNN persistent batch norm (TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT=1; the --no form
    # removes it).
    batchnorm_persistent: bool

    # Winograd non-fused convolutions.
    winograd_nonfused: bool

    # Set the MKL/OpenMP environment variables.
    mkl: bool

    # KMP_BLOCKTIME with --mkl.
    kmp_blocktime: int

    # KMP_AFFINITY with --mkl.
    kmp_affinity: str

    # KMP_SETTINGS with --mkl.
    kmp_settings: int

    # threading.Barrier.
    use_python32_barrier: bool

    # TF1 debugger.
    debugger: Optional[str]


@dataclasses.dataclass(frozen=True)
class Numerics:
    """The precision the step computes in and how fp16 scales its loss."""

    # fp32, fp16 (mixed_float16) or bf16 (mixed_bfloat16).
    precision: str

    # Mixed precision float16 (legacy spelling of --precision=fp16).
    use_fp16: bool

    # Static loss scale for fp16 (default 128).
    fp16_loss_scale: Optional[float]

    # fp16 variables.
    fp16_vars: bool

    # Dynamic loss scaling for fp16.
    fp16_enable_auto_loss_scale: bool

    # Dynamic loss scale growth interval.
    fp16_inc_loss_scale_every_n: int


@dataclasses.dataclass(frozen=True)
class Learning:
    """The optimizer, its learning rate over time and the regularisation."""

    # momentum (Nesterov), sgd, rmsprop or adam.
    optimizer: str

    # Constant initial learning rate.
    init_learning_rate: Optional[float]

    # LR0;E1;LR1;...;En;LRn (E in epochs).
    piecewise_learning_rate_schedule: Optional[str]

    # Staircase decay period in epochs.
    num_epochs_per_decay: float

    # Decay factor per period.
    learning_rate_decay_factor: float

    # Linear warm-up epochs.
    num_learning_rate_warmup_epochs: float

    # Learning-rate floor (needs the decay flags).
    minimum_learning_rate: float

    # ResNet base LR at batch 256 (default 0.128).
    resnet_base_lr: Optional[float]

    # Momentum.
    momentum: float

    # RMSProp decay.
    rmsprop_decay: float

    # RMSProp momentum.
    rmsprop_momentum: float

    # RMSProp epsilon.
    rmsprop_epsilon: float

    # Adam beta1.
    adam_beta1: float

    # Adam beta2.
    adam_beta2: float

    # Adam epsilon.
    adam_epsilon: float

    # Element-wise gradient clipping to +/- this value.
    gradient_clip: Optional[float]

    # L2 weight decay factor.
    weight_decay: float

    # Learning-rate ops on CPU.
    compute_lr_on_cpu: bool

    # Sparse to dense gradients.
    sparse_to_dense_grads: bool


@dataclasses.dataclass(frozen=True)
class Measurement:
    """What is measured and shown beside images/sec, and the probes after the timed steps."""

    # Print a Step line every N steps.
    display_every: int

    # EWMA weight for the displayed images/sec mean.
    display_perf_ewma: Optional[float]

    # Print top-1/top-5 training accuracy columns.
    print_training_accuracy: bool

    # Loss shown in Step lines.
    loss_type_to_report: str

    # Sample GPU power/temperature/clocks (NVML) and host CPU every N ms; 0 = no sampling.
    monitor_interval_ms: int

    # Mark a repeated result unstable when (max - min) / median exceeds this, %.
    unstable_threshold_pct: float

    # Peak TFLOP/s of one device for MFU; 0 = datasheet table (GPUs) or `tfbench peak` cache.
    peak_tflops: float

    # Training runs: print and record the hours to train this many samples (x --estimate_epochs);
    # 0 = off.
    estimate_dataset_size: int

    # Epochs for the training-time estimate.
    estimate_epochs: float

    # Fraction of the benchmark's images/sec a real training run sustains (estimate).
    estimate_utilization: float

    # Write a TensorFlow profiler trace of a few steps after warm-up to this path.
    trace_file: str

    # Also write the trace in Chrome JSON format.
    use_chrome_trace_format: bool

    # tfprof ProfileProto output (TF1).
    tfprof_file: Optional[str]

    # Write the GraphDef (TF1).
    graph_file: Optional[str]

    # Write partitioned graphs (TF1).
    partitioned_graph_file_prefix: Optional[str]

    # 0 off, 1 scalars, 2 +gradient histograms, 3 +images.
    summary_verbosity: int

    # Summary period in steps; 0 = off.
    save_summaries_steps: int

    # After the timed steps on several devices or workers, probe where the scaling efficiency
    # goes: the gradient all-reduce alone, each device's step alone and all together, the input
    # pipeline alone, the GPUs' links (docs/measurements.md).
    explain_scaling: bool

    # Training runs: after the timed steps, check each of this worker's devices alone: the run's
    # training step, a matmul and a 3x3 convolution in the run's precision, and one forward and
    # backward pass from the same weights on the same batch under TensorFlow's op determinism,
    # whose gradients every device must reproduce bit for bit (docs/validate.md).
    validate_devices: bool

    # --validate_devices: which checks run on each device: step (the training step alone),
    # kernels (the matmul and the convolution), numeric (the gradients every device must
    # reproduce); `tfbench validate --level=quick` runs kernels,numeric.
    validate_device_checks: tuple[str, ...]

    # Training runs on several devices: after the timed steps (and --validate_devices' checks),
    # time the all-reduce probe of `tfbench allreduce` on the run's own strategy and model (the
    # gradients, then sizes up to 1 GiB on GPUs, those a GPU has no room for left out, 1 MiB on
    # CPU devices) and write its JSON to this file, for `tfbench validate` (docs/validate.md).
    validate_allreduce_json: str


@dataclasses.dataclass(frozen=True)
class Outputs:
    """Where results, logs and checkpoints are written."""

    # Append one result row per run to this CSV; empty disables.
    csv_file: str

    # Write a JSON manifest per run (<run_id>.json) here; empty disables.
    json_dir: str

    # The results history every result is added to: a SQLite file or a postgresql:// URL; empty
    # disables; unset = $TFBENCH_HISTORY, else ~/.local/share/tfbench/history.sqlite
    # (docs/history.md).
    history: Optional[str]

    # Write benchmark_run.log and metric.log here.
    benchmark_log_dir: Optional[str]

    # Test id recorded in benchmark_run.log.
    benchmark_test_id: Optional[str]

    # MLPerf compliance logging.
    ml_perf_compliance_logging: bool

    # Checkpoint directory (the final checkpoint is always saved).
    train_dir: Optional[str]

    # Eval event directory.
    eval_dir: str

    # Checkpoint every N seconds; 0 = off.
    save_model_secs: int

    # Checkpoint every N steps.
    save_model_steps: Optional[int]

    # Checkpoints to keep.
    max_ckpts_to_keep: int


GROUPS = {
    "workload": Workload,
    "mode": Mode,
    "schedule": Schedule,
    "data": Data,
    "devices": Devices,
    "cluster": Cluster,
    "runtime": Runtime,
    "numerics": Numerics,
    "learning": Learning,
    "measurement": Measurement,
    "outputs": Outputs,
}
