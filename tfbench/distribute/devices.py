"""Device selection and runtime configuration, done before TensorFlow creates its context.

`--device=cpu --num_gpus=N` splits the CPU into N logical devices (as the legacy script does), so
every multi-replica code path runs on a machine without a GPU. Without a visible GPU only the
plain single-device default falls back to the CPU (saying so); a run that asks for GPUs
(--device=gpu, --num_gpus>1, --gpu_indices) is refused with what is visible and why.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional

import tensorflow as tf

from tfbench.config import fast_paths, gpu_names, startup_env
from tfbench.config.settings import Settings
from tfbench.distribute import gpu_env
from tfbench.errors import UsageError


@dataclasses.dataclass(frozen=True)
class DeviceSet:
    """The devices this process computes on (select_devices), in the order replicas use them."""
    kind: str                  # "cpu" | "gpu"
    num_devices: int
    names: tuple[str, ...]     # TF device names, e.g. "/gpu:0"
    data_format: str
    notices: tuple[str, ...] = ()
    gpu_indices: tuple[int, ...] = ()   # physical GPUs chosen (they become /gpu:0, /gpu:1, ...)
    gpu_models: tuple[Optional[str], ...] = ()  # their model names, as CUDA reports them


def visible_gpus() -> list:
    return tf.config.list_physical_devices("GPU")


def gpu_model(gpu) -> Optional[str]:
    """CUDA's name of a physical GPU ('NVIDIA A100-SXM4-40GB', '... MIG 1g.5gb'); None when
    TensorFlow has no details for it. Reading it creates no CUDA context."""
    try:
        return tf.config.experimental.get_device_details(gpu).get("device_name") or None
    except ValueError:   # not a device TensorFlow listed (a test's stand-in)
        return None
    except RuntimeError:   # a compute capability TensorFlow cannot parse: the name is unknown
        return None


# Minimum Linux driver per CUDA major version under minor-version compatibility.
_MIN_DRIVER = {12: "525.60.13", 11: "450.80.02"}


def _nvml_view(nvml: Any = None) -> str:
    """What the NVIDIA driver sees, in a few words ('NVML: 8 x NVIDIA A100-SXM4-80GB, driver
    470.82.01 (CUDA 11.4)' or 'NVML: no NVIDIA driver: ...')."""
    from tfbench.measure import nvml as nvml_mod
    module, reason = nvml_mod.open_nvml(nvml)
    if module is None:
        return "NVML: %s" % reason
    try:
        count = module.nvmlDeviceGetCount()
        names = [nvml_mod.text(module.nvmlDeviceGetName(module.nvmlDeviceGetHandleByIndex(i)))
                 for i in range(count)]
        system = nvml_mod.system_info(module)
    except Exception as exc:  # noqa: BLE001 - NVMLError from a half-working driver
        return nvml_mod.reason(exc)
    finally:
        nvml_mod.close_nvml(module)
    groups: dict[str, int] = {}
    for name in names:
        groups[name] = groups.get(name, 0) + 1
    gpus = ", ".join("%d x %s" % (n, name) for name, n in groups.items()) or "no GPU"
    return "NVML: %s, driver %s (CUDA %s)" % (gpus, system["driver_version"],
                                               system["cuda_driver_version"])


def no_gpu_message(request: str, environ: Optional[Mapping[str, str]] = None,
                   build_info: Optional[Mapping[str, Any]] = None, nvml: Any = None) -> str:
    """One line: what asked for GPUs, what is visible, the usual causes and the CPU option."""
    environ = os.environ if environ is None else environ
    build = dict(tf.sysconfig.get_build_info()) if build_info is None else dict(build_info)
    seen = ["TensorFlow sees none"]
    if "CUDA_VISIBLE_DEVICES" in environ:
        seen.append("CUDA_VISIBLE_DEVICES=%r" % environ["CUDA_VISIBLE_DEVICES"])
    view = _nvml_view(nvml)
    seen.append(view)
    causes = []
    cuda = build.get("cuda_version")
    if not build.get("is_cuda_build"):
        causes.append("this TensorFlow has no GPU support (tensorflow-cpu, or a CPU wheel): "
                      "install tensorflow[and-cuda]")
    else:
        seen.append("TensorFlow built for CUDA %s" % cuda)
        major = int(str(cuda).split(".")[0]) if str(cuda).split(".")[0].isdigit() else None
        causes.append("no NVIDIA driver, or one older than CUDA %s needs%s" % (
            major or cuda, " (%s or newer)" % _MIN_DRIVER[major] if major in _MIN_DRIVER
            else ""))
        causes.append("the CUDA libraries missing (pip `tensorflow` without `[and-cuda]`)")
    causes += ["a container started without `--gpus all`",
               "CUDA_VISIBLE_DEVICES hiding the GPUs"]
    return ("%s asks for GPUs but none is visible (%s). Usual causes: %s. Add --device=cpu to run "
            "on the CPU (with --num_gpus=N, as N logical devices)"
            % (request, "; ".join(seen), ", ".join(causes)))


def _gpu_request(p: Settings) -> Optional[str]:
    """The flag that asks for GPUs beyond the single-device default, None for that default.

    A legacy one-GPU line such as `--num_gpus=1 --variable_update=replicated
    --all_reduce_spec=nccl` is that default: one device has nothing to all-reduce, on a GPU
    too, so the all-reduce spec asks for nothing and the line runs on the CPU like a plain
    `--model=resnet50`. With more devices --num_gpus already asks for GPUs.
    """
    if p.is_explicit("device") and p.devices.device.lower() == "gpu":
        return "--device=gpu"
    if p.devices.gpu_indices:
        return "--gpu_indices=%s" % p.devices.gpu_indices
    if p.devices.num_gpus > 1:
        return "--num_gpus=%d" % p.devices.num_gpus
    return None


def _horovod_local_rank() -> Optional[int]:
    """This process's rank on its host under horovod (its GPU), None without horovod."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        return None   # the strategy reports the missing horovod
    hvd.init()
    return hvd.local_rank()


def _slurm_gpus(p: Settings, visible: int, environ: Optional[Mapping[str, str]] = None
                ) -> tuple[Optional[int], Optional[str]]:
    """(GPUs, notice) for a cluster task inside a Slurm step when --num_gpus is not given: the
    GPUs Slurm bound to it (through CUDA_VISIBLE_DEVICES), whatever describes the cluster
    (Slurm's variables, or flags as scripts/sbatch_scaling.sh gives its one-node step), so every
    point of a series drives the same GPUs per host; MultiWorkerMirroredStrategy gets them as
    num_accelerators. Slurm binding none (the variable unset) leaves the default of one GPU,
    said in one line: the node's other GPUs may be other jobs'. (None, None) outside."""
    from tfbench.distribute import cluster
    environ = os.environ if environ is None else environ
    if "SLURM_STEP_ID" not in environ or visible < 1 or p.devices.variable_update == "horovod" \
            or cluster.read_cluster(p, environ) is None:
        return None, None
    bound = environ.get("CUDA_VISIBLE_DEVICES")
    if bound is None:
        return None, ("Slurm step: no GPU bound to this task (CUDA_VISIBLE_DEVICES unset; ask "
                      "with --gpus-per-node or --gres): running the default --num_gpus=1")
    return visible, ("Slurm step: this task drives the %d GPU(s) it sees (--num_gpus=%d; "
                     "CUDA_VISIBLE_DEVICES=%s)" % (visible, visible, bound))


def select_devices(p: Settings) -> DeviceSet:
    """Resolves device kind, count and data format from the Settings and what is visible."""
    notices = []
    gpus = visible_gpus()
    kind = p.devices.device.lower()
    if kind == "gpu" and not gpus:
        request = _gpu_request(p)
        if request is not None:
            raise UsageError(no_gpu_message(request))
        kind = "cpu"
        notices.append("No GPU visible: running on CPU (--device=cpu)")
    # (Fallen back to the CPU, the flags named no GPU: _gpu_request refused --gpu_indices.)
    n = p.asks.devices
    if kind == "gpu" and not p.is_explicit("num_gpus") and not p.devices.gpu_indices:
        slurm, notice = _slurm_gpus(p, len(gpus))
        n = slurm or n
        if notice:
            notices.append(notice)
    indices: list[int] = []
    models: list[Optional[str]] = []
    if kind == "gpu":
        indices = list(p.asks.gpu_indices) or list(range(n))
        local_rank = _horovod_local_rank() if p.devices.variable_update == "horovod" else None
        if local_rank is not None and not p.devices.gpu_indices:
            # One process per GPU: horovodrun starts them; each takes its local rank's GPU, or
            # the only one it sees where the launcher binds one GPU per rank (Slurm
            # --gpus-per-task=1, a per-rank CUDA_VISIBLE_DEVICES).
            indices, n = [local_rank if len(gpus) > 1 else 0], 1
        names_visible = [g.name for g in gpus]
        if max(indices) >= len(gpus) or n > len(gpus):
            raise UsageError("asked for %d GPU(s) (indices %s) but only %d visible: %s"
                             % (n, indices, len(gpus), ", ".join(names_visible) or "none"))
        models = [gpu_model(gpus[i]) for i in indices[:n]]
        notices.extend(_model_notices(indices[:n], models))
    elif p.devices.gpu_indices:
        notices.append("--gpu_indices=%s has no effect on the CPU; ignored" % p.devices.gpu_indices)
    data_format = p.devices.data_format
    if not p.is_explicit("data_format"):
        data_format = "NHWC" if kind == "cpu" else "NCHW"
    elif kind == "cpu" and data_format == "NCHW" and not p.runtime.mkl:
        raise UsageError("--data_format=NCHW is not supported on CPU; use --data_format=NHWC")
    names = tuple("/%s:%d" % (kind, i) for i in range(n))
    return DeviceSet(kind, n, names, data_format, tuple(notices), tuple(indices[:n]),
                     tuple(models))


def _model_notices(indices: list[int], models: list[Optional[str]]) -> list[str]:
    """A MIG slice, or GPUs of different models: no datasheet peak or published range fits."""
    notices = []
    for index, model in zip(indices, models):
        key = gpu_names.parse(model)
        if key is not None and key.mig is not None:
            notices.append("GPU %d is a MIG slice (%s): it has a fraction of the GPU's SMs and "
                           "memory, so there is no datasheet peak (MFU needs --peak_tflops or "
                           "`tfbench peak` on the slice) and no published expected range"
                           % (index, model))
    distinct = list(dict.fromkeys(m or "unknown GPU" for m in models))
    if len(distinct) > 1:
        notices.append("The GPUs used are of different models (%s): no one datasheet peak or "
                       "published expected range describes them" % ", ".join(distinct))
    return notices


FROZEN_WEIGHTS_ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


@dataclasses.dataclass(frozen=True)
class EnvSettings:
    """What set_environment did: `changed` lists each variable it set or removed ("NAME=value",
    "NAME removed"), `notices` the values it kept from the environment or replaced by a flag."""
    changed: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()


def set_environment(p: Settings, kind: str = "gpu", weights_change: bool = True,
                    num_devices: int = 1) -> EnvSettings:
    """Environment variables that must be set before TensorFlow initialises its devices.

    A run whose weights never change (forward-only) lets oneDNN keep each convolution's and
    matmul's weights in its own blocked layout instead of reordering them every step, as
    inference deployments do. TensorFlow reads the variable once per process, so a run that
    updates weights with it set would compute with stale weights: that is refused. On a GPU
    the flags set the GPU variables (distribute/gpu_env.py: a flag given wins, else an
    inherited value is kept); the names tfbench sets are recorded (config.startup_env.mark).
    """
    wanted: dict[str, Optional[str]] = {}
    notices: list[str] = []
    if fast_paths.for_device(kind).frozen_weights:
        frozen = os.environ.get(FROZEN_WEIGHTS_ENV, "").strip().lower() in ("1", "true")
        if weights_change and frozen:
            raise UsageError(
                "%s=%s makes oneDNN reuse the first weights it sees, but this run changes them; "
                "unset it, or set it to 0 (tfbench sets it itself for a --forward_only process)"
                % (FROZEN_WEIGHTS_ENV, os.environ[FROZEN_WEIGHTS_ENV]))
        if not weights_change and FROZEN_WEIGHTS_ENV not in os.environ:
            wanted[FROZEN_WEIGHTS_ENV] = "1"
    if kind == "gpu":
        gpu, notices = gpu_env.gpu_environment(p, num_devices, os.environ)
        wanted.update(gpu)
        if p.runtime.autotune_threshold:
            # As the legacy script: the flag wins over the environment.
            wanted["TF_AUTOTUNE_THRESHOLD"] = str(p.runtime.autotune_threshold)
    if p.runtime.mkl:
        wanted.update(KMP_BLOCKTIME=str(p.runtime.kmp_blocktime),
                      KMP_SETTINGS=str(p.runtime.kmp_settings),
                      KMP_AFFINITY=p.runtime.kmp_affinity)
        if p.runtime.num_intra_threads:
            wanted["OMP_NUM_THREADS"] = str(p.runtime.num_intra_threads)
    changed = {name: value for name, value in wanted.items() if os.environ.get(name) != value}
    for name, value in changed.items():
        if value is None:
            del os.environ[name]
        else:
            os.environ[name] = value
    startup_env.mark([name for name, value in changed.items() if value is not None])
    return EnvSettings(tuple("%s removed" % name if value is None else "%s=%s" % (name, value)
                             for name, value in changed.items()), tuple(notices))


def runtime_started() -> bool:
    """Whether this process's TensorFlow runtime (its eager context, with its devices) exists:
    from then on it ignores device and thread settings and the variables it read at start.
    The context's own test before each such setting (context.py, TF 2.17 and 2.21)."""
    from tensorflow.python.eager import context
    return getattr(context.context(), "_context_handle", None) is not None


def configure_runtime(p: Settings, device_set: DeviceSet, gpu_memory_limit_mb: Optional[int] = None
                      ) -> list[str]:
    """Configures TF devices and threads. Must run before the first TF op.

    Returns the settings TensorFlow refused because its runtime had started (a second run in
    one process with other settings); each setter is a no-op where nothing changes."""
    refused: list[str] = []

    def setting(what: str, setter, *args) -> None:
        try:
            setter(*args)
        except RuntimeError as exc:
            # "... cannot be modified after being initialized" / "... after initialization."
            if "initializ" not in str(exc):
                raise
            refused.append(what)

    if device_set.kind == "cpu":
        cpu = tf.config.list_physical_devices("CPU")[0]
        if device_set.num_devices > 1:
            setting("%d logical CPU devices" % device_set.num_devices,
                    tf.config.set_logical_device_configuration, cpu,
                    [tf.config.LogicalDeviceConfiguration()] * device_set.num_devices)
        setting("no GPU", tf.config.set_visible_devices, [], "GPU")
    else:
        gpus = visible_gpus()
        indices = list(device_set.gpu_indices or range(device_set.num_devices))
        chosen = [gpus[i] for i in indices]
        setting("GPUs %s" % ",".join(map(str, indices)), tf.config.set_visible_devices,
                chosen, "GPU")
        for index, gpu in zip(indices, chosen):
            if gpu_memory_limit_mb:
                setting("a %d MB limit on GPU %d" % (gpu_memory_limit_mb, index),
                        tf.config.set_logical_device_configuration, gpu,
                        [tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_limit_mb)])
            elif p.devices.allow_growth:
                setting("memory growth on GPU %d" % index,
                        tf.config.experimental.set_memory_growth, gpu, True)
    intra = p.runtime.num_intra_threads if p.runtime.num_intra_threads is not None else (
        1 if device_set.kind == "gpu" else None)
    if intra is not None:
        setting("%d intra-op threads" % intra,
                tf.config.threading.set_intra_op_parallelism_threads, intra)
    if p.runtime.num_inter_threads:
        setting("%d inter-op threads" % p.runtime.num_inter_threads,
                tf.config.threading.set_inter_op_parallelism_threads, p.runtime.num_inter_threads)
    if not p.runtime.enable_optimizations:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    if p.devices.force_gpu_compatible:
        setting("pinned host buffers (--force_gpu_compatible)", force_gpu_compatible)
    return refused


def force_gpu_compatible() -> None:
    """Host tensors in pinned (page-locked) memory, as the legacy script's ConfigProto
    gpu_options.force_gpu_compatible: the input pipeline's batches then copy to a GPU by DMA
    without a staging copy (gpu_device_factory.cc's GPUCompatibleCPUDevice reads the option when
    the runtime creates its CPU device; without a GPU it keeps the plain allocator).

    TF2 has no public setter: the eager context hands its ConfigProto (`_config`, TF 2.17 to
    2.21) with its own settings merged in (`context.config`) to the runtime when it starts.
    Physical devices are listed first, so the context has already imported `_config`'s
    device options and reads only the GPU option from it from then on."""
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.eager import context
    tf.config.list_physical_devices()
    if runtime_started():
        raise RuntimeError("force_gpu_compatible cannot be set after initialization")
    ctx = context.context()
    config = config_pb2.ConfigProto()
    if ctx._config is not None:
        config.CopyFrom(ctx._config)
    config.gpu_options.force_gpu_compatible = True
    ctx._config = config


def prepare_runtime(p: Settings, device_set: DeviceSet, weights_change: bool = True,
                    gpu_memory_limit_mb: Optional[int] = None) -> list[str]:
    """The environment (set_environment) and the runtime settings (configure_runtime) of a
    run; returns its notices. Where TensorFlow's runtime had started first (an earlier run in
    this process), one notice names every setting that did not apply: the variables it reads
    when it starts, and the device and thread settings it refused."""
    started = runtime_started()
    env = set_environment(p, device_set.kind, weights_change, device_set.num_devices)
    refused = configure_runtime(p, device_set, gpu_memory_limit_mb)
    notices = list(env.notices)
    missed = (list(env.changed) if started else []) + refused
    if missed:
        notices.append("TensorFlow had started in this process before this run's settings, so "
                       "these did not apply: %s" % "; ".join(missed))
    return notices


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "cpu"


def device_name(device_set: DeviceSet) -> str:
    """A human name for the CSV: the model of the GPUs in the set (not physical GPU 0), the
    models joined by ' + ' when they differ, or the CPU model."""
    if device_set.kind != "gpu":
        return cpu_model_name()
    models = device_set.gpu_models
    if not models:
        gpus = visible_gpus()
        models = tuple(gpu_model(gpus[i])
                       for i in device_set.gpu_indices or range(device_set.num_devices))
    distinct = dict.fromkeys(m or "unknown GPU" for m in models)
    return gpu_names.MIXED_SEPARATOR.join(distinct) or "unknown GPU"
