"""Device selection and runtime configuration, done before TensorFlow creates its context.

`--device=cpu --num_gpus=N` splits the CPU into N logical devices (as the legacy script does), so
every multi-replica code path runs on a machine without a GPU.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import tensorflow as tf

from tfbench import fast_paths
from tfbench.errors import UsageError


@dataclasses.dataclass(frozen=True)
class DevicePlan:
    kind: str                  # "cpu" | "gpu"
    num_devices: int
    names: tuple[str, ...]     # TF device names, e.g. "/gpu:0"
    data_format: str
    notices: tuple[str, ...] = ()
    gpu_indices: tuple[int, ...] = ()   # physical GPUs chosen (they become /gpu:0, /gpu:1, ...)


def visible_gpus() -> list:
    return tf.config.list_physical_devices("GPU")


def _parse_indices(text: str) -> list[int]:
    try:
        indices = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError("--gpu_indices=%r must be comma-separated integers" % text) from None
    if not indices or min(indices) < 0 or len(set(indices)) != len(indices):
        raise UsageError("--gpu_indices=%r must name distinct GPUs by index (0, 1, ...)" % text)
    return indices


def _horovod_local_rank() -> Optional[int]:
    """This process's rank on its host under horovod (its GPU), None without horovod."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        return None   # the strategy reports the missing horovod
    hvd.init()
    return hvd.local_rank()


def plan_devices(p) -> DevicePlan:
    """Resolves device kind, count and data format from Params and what is visible."""
    notices = []
    gpus = visible_gpus()
    kind = p.device.lower()
    if not p.is_explicit("device") and not gpus:
        kind = "cpu"
        notices.append("No GPU visible: running on CPU (--device=cpu)")
    elif kind == "gpu" and not gpus:
        raise UsageError("--device=gpu was given but no GPU is visible to TensorFlow "
                         "(check the driver, CUDA_VISIBLE_DEVICES and that a GPU build of "
                         "TensorFlow is installed), or use --device=cpu")
    n = p.num_gpus
    indices: list[int] = []
    if kind == "gpu":
        indices = _parse_indices(p.gpu_indices) if p.gpu_indices else list(range(n))
        local_rank = _horovod_local_rank() if p.variable_update == "horovod" else None
        if local_rank is not None and not p.gpu_indices:
            # One process per GPU: horovodrun starts them; each takes its local rank's GPU.
            indices, n = [local_rank], 1
        if p.gpu_indices and len(indices) != n:
            if p.is_explicit("num_gpus"):
                raise UsageError("--gpu_indices names %d GPUs but --num_gpus=%d"
                                 % (len(indices), n))
            n = len(indices)
        names_visible = [g.name for g in gpus]
        if max(indices) >= len(gpus) or n > len(gpus):
            raise UsageError("asked for %d GPU(s) (indices %s) but only %d visible: %s"
                             % (n, indices, len(gpus), ", ".join(names_visible) or "none"))
    data_format = p.data_format
    if not p.is_explicit("data_format"):
        data_format = "NHWC" if kind == "cpu" else "NCHW"
    elif kind == "cpu" and data_format == "NCHW" and not p.mkl:
        raise UsageError("--data_format=NCHW is not supported on CPU; use --data_format=NHWC")
    names = tuple("/%s:%d" % (kind, i) for i in range(n))
    return DevicePlan(kind, n, names, data_format, tuple(notices), tuple(indices[:n]))


FROZEN_WEIGHTS_ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def set_environment(p, kind: str = "gpu", weights_change: bool = True) -> None:
    """Environment variables that must be set before TensorFlow initialises its devices.

    A run whose weights never change (forward-only) lets oneDNN keep each convolution's and
    matmul's weights in its own blocked layout instead of reordering them every step, as
    inference deployments do. TensorFlow reads the variable once per process, so a run that
    updates weights with it set would compute with stale weights: that is refused.
    """
    if fast_paths.for_device(kind).frozen_weights:
        frozen = os.environ.get(FROZEN_WEIGHTS_ENV, "").strip().lower() in ("1", "true")
        if weights_change and frozen:
            raise UsageError(
                "%s=%s makes oneDNN reuse the first weights it sees, but this run changes them; "
                "unset it, or set it to 0 (tfbench sets it itself for a --forward_only process)"
                % (FROZEN_WEIGHTS_ENV, os.environ[FROZEN_WEIGHTS_ENV]))
        if not weights_change:
            os.environ.setdefault(FROZEN_WEIGHTS_ENV, "1")
    if kind == "gpu" and p.gpu_thread_mode and p.gpu_thread_mode != "global":
        os.environ.setdefault("TF_GPU_THREAD_MODE", p.gpu_thread_mode)
        os.environ.setdefault("TF_GPU_THREAD_COUNT", str(p.per_gpu_thread_count or 2))
    if kind == "gpu" and p.batchnorm_persistent:
        os.environ.setdefault("TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT", "1")
    if p.mkl:
        os.environ["KMP_BLOCKTIME"] = str(p.kmp_blocktime)
        os.environ["KMP_SETTINGS"] = str(p.kmp_settings)
        os.environ["KMP_AFFINITY"] = p.kmp_affinity
        if p.num_intra_threads:
            os.environ["OMP_NUM_THREADS"] = str(p.num_intra_threads)


def configure_runtime(p, plan: DevicePlan, gpu_memory_limit_mb: Optional[int] = None) -> None:
    """Configures TF devices and threads. Must run before the first TF op."""
    try:
        if plan.kind == "cpu":
            cpu = tf.config.list_physical_devices("CPU")[0]
            if plan.num_devices > 1:
                tf.config.set_logical_device_configuration(
                    cpu, [tf.config.LogicalDeviceConfiguration()] * plan.num_devices)
            tf.config.set_visible_devices([], "GPU")
        else:
            gpus = visible_gpus()
            chosen = [gpus[i] for i in plan.gpu_indices or range(plan.num_devices)]
            tf.config.set_visible_devices(chosen, "GPU")
            for gpu in chosen:
                if gpu_memory_limit_mb:
                    tf.config.set_logical_device_configuration(
                        gpu, [tf.config.LogicalDeviceConfiguration(
                            memory_limit=gpu_memory_limit_mb)])
                elif p.allow_growth:
                    tf.config.experimental.set_memory_growth(gpu, True)
        if p.num_intra_threads is not None:
            tf.config.threading.set_intra_op_parallelism_threads(p.num_intra_threads)
        elif plan.kind == "gpu":
            tf.config.threading.set_intra_op_parallelism_threads(1)
        if p.num_inter_threads:
            tf.config.threading.set_inter_op_parallelism_threads(p.num_inter_threads)
        if not p.enable_optimizations:
            tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    except RuntimeError as exc:
        # TF refuses device changes once initialised (e.g. a second run in one process).
        if "initialized" not in str(exc):
            raise


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


def device_name(plan: DevicePlan) -> str:
    """A human name for the CSV: the GPU's name, or the CPU model."""
    if plan.kind == "gpu":
        try:
            details = tf.config.experimental.get_device_details(visible_gpus()[0])
            return details.get("device_name", "gpu")
        except (IndexError, ValueError, RuntimeError):
            return "gpu"
    return cpu_model_name()
