"""TensorFlow's GPU variables that tfbench's flags set: TF_GPU_THREAD_MODE, TF_GPU_THREAD_COUNT
and TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT.

TensorFlow reads the first two when it creates each GPU device (gpu_device.cc,
BaseGPUDevice::Init: the mode case-insensitively, "global" by default, another value failing
the device; the count as an integer, 2 by default, the size of each GPU's pool under
gpu_private and of the one shared pool under gpu_shared) and the third once per process, at
its first cuDNN batch norm (stream_executor's cuda_dnn.cc, BatchnormSpatialPersistentEnabled:
ReadBoolFromEnvVar under TF_CHECK_OK, so a value other than 0/1/true/false aborts the process).
tfbench.distribute.devices sets them before TensorFlow starts. Imports no TensorFlow.
"""

from __future__ import annotations

from typing import Mapping, Optional

from tfbench.config import startup_env
from tfbench.config.settings import Settings
from tfbench.errors import UsageError

GPU_THREAD_MODE_ENV = "TF_GPU_THREAD_MODE"
GPU_THREAD_COUNT_ENV = "TF_GPU_THREAD_COUNT"
BATCHNORM_PERSISTENT_ENV = "TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT"
# What TensorFlow's GPU device accepts (gpu_device.cc, case-insensitive; another value fails
# the creation of every GPU device).
GPU_THREAD_MODES = ("global", "gpu_private", "gpu_shared")
# tsl ReadBoolFromEnvVar, case-insensitive; cuDNN's batch norm aborts the process on another
# value (TF_CHECK_OK in stream_executor's cuda_dnn.cc), at the first batch norm.
_BOOL_TEXT = {"0": False, "false": False, "1": True, "true": True}


def gpu_environment(p: Settings, num_devices: int, environ: Mapping[str, str]
                    ) -> tuple[dict[str, Optional[str]], list[str]]:
    """The GPU variables the flags set ({name: value, or None to remove}) and the notices.

    As the legacy script, a flag the user gave is assigned: --gpu_thread_mode to
    TF_GPU_THREAD_MODE, the threads (--per_gpu_thread_count or 2; times the devices for
    gpu_shared, one pool for them all) to TF_GPU_THREAD_COUNT, --batchnorm_persistent to "1"
    and --nobatchnorm_persistent by removing TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT. A value
    the environment holds (not one tfbench set) is kept where the flags were not given, and said
    where it differs from the flags' default, so the header's Env line and the notices tell
    what ran. Values TensorFlow would refuse are one error line.
    """
    mine = set(startup_env.set_by_tfbench(environ))
    inherited = {name: environ[name] for name in
                 (GPU_THREAD_MODE_ENV, GPU_THREAD_COUNT_ENV, BATCHNORM_PERSISTENT_ENV)
                 if name in environ and name not in mine}
    out: dict[str, Optional[str]] = {}
    notices: list[str] = []

    def flag_wins(name: str, value: Optional[str], flag: str) -> None:
        out[name] = value
        if name in inherited and inherited[name] != value:
            notices.append("%s replaces %s=%s from the environment" % (flag, name,
                                                                     inherited[name]))

    def kept(name: str, default: Optional[str], flag: str, differs: bool) -> None:
        if differs:
            notices.append("%s=%s from the environment is kept (no %s given; tfbench's "
                           "default is %s)" % (name, inherited[name], flag,
                                               default if default is not None else "unset"))

    mode_given = p.is_explicit("gpu_thread_mode")
    mode = p.runtime.gpu_thread_mode.lower()
    if mode_given and mode not in GPU_THREAD_MODES:
        raise UsageError("--gpu_thread_mode=%s: use one of %s" % (p.runtime.gpu_thread_mode,
                                                                 ", ".join(GPU_THREAD_MODES)))
    if mode_given:
        flag_wins(GPU_THREAD_MODE_ENV, mode, "--gpu_thread_mode=%s" % mode)
    elif GPU_THREAD_MODE_ENV in inherited:
        mode = inherited[GPU_THREAD_MODE_ENV].strip().lower()
        if mode not in GPU_THREAD_MODES:
            raise UsageError("%s=%s in the environment is not a mode TensorFlow knows (%s): it "
                             "would refuse to create the GPU devices; unset it or give "
                             "--gpu_thread_mode" % (GPU_THREAD_MODE_ENV,
                                                    inherited[GPU_THREAD_MODE_ENV],
                                                    ", ".join(GPU_THREAD_MODES)))
        kept(GPU_THREAD_MODE_ENV, p.runtime.gpu_thread_mode, "--gpu_thread_mode",
             mode != p.runtime.gpu_thread_mode.lower())
    else:
        out[GPU_THREAD_MODE_ENV] = mode
    count_given = p.is_explicit("per_gpu_thread_count") and p.runtime.per_gpu_thread_count
    if count_given and mode == "global":
        raise UsageError("--per_gpu_thread_count=%d has no effect with gpu_thread_mode=global "
                         "(GPUs then share the global threads); leave it out or choose "
                         "gpu_private or gpu_shared" % p.runtime.per_gpu_thread_count)
    per_gpu = p.runtime.per_gpu_thread_count or 2
    count = str(per_gpu * num_devices if mode == "gpu_shared" else per_gpu)
    if mode != "global":
        if mode_given or count_given:
            flag_wins(GPU_THREAD_COUNT_ENV, count, "--per_gpu_thread_count=%d" % per_gpu
                      if count_given else "--gpu_thread_mode=%s (%s threads)" % (mode, count))
        elif GPU_THREAD_COUNT_ENV in inherited:
            text = inherited[GPU_THREAD_COUNT_ENV].strip()
            if not (text.lstrip("+").isdigit() and int(text) > 0):
                raise UsageError("%s=%s in the environment is not a positive thread count: "
                                 "TensorFlow would refuse to create the GPU devices; unset it "
                                 "or give --per_gpu_thread_count" % (
                                     GPU_THREAD_COUNT_ENV, inherited[GPU_THREAD_COUNT_ENV]))
            kept(GPU_THREAD_COUNT_ENV, count, "--per_gpu_thread_count", int(text) != int(count))
        else:
            out[GPU_THREAD_COUNT_ENV] = count
    persistent = "1" if p.runtime.batchnorm_persistent else None
    if p.is_explicit("batchnorm_persistent"):
        flag_wins(BATCHNORM_PERSISTENT_ENV, persistent, "--%sbatchnorm_persistent"
                  % ("" if p.runtime.batchnorm_persistent else "no"))
    elif BATCHNORM_PERSISTENT_ENV in inherited:
        text = inherited[BATCHNORM_PERSISTENT_ENV]
        if text.lower() not in _BOOL_TEXT:
            raise UsageError("%s=%s in the environment is not 0, 1, true or false: cuDNN would "
                             "abort the run at its first batch norm; unset it or give "
                             "--[no]batchnorm_persistent" % (BATCHNORM_PERSISTENT_ENV, text))
        kept(BATCHNORM_PERSISTENT_ENV, persistent, "--[no]batchnorm_persistent",
             _BOOL_TEXT[text.lower()] != p.runtime.batchnorm_persistent)
    else:
        out[BATCHNORM_PERSISTENT_ENV] = persistent
    return out, notices


# Threads the legacy script sets aside per GPU for event monitoring and sending and receiving
# tensors when it sizes the tf.data pool (benchmark_cnn.py, num_monitoring_threads).
MONITORING_THREADS_PER_GPU = 2


def private_threads(p: Settings, num_gpus: int, cpu_count: int) -> tuple[Optional[int], str]:
    """(size of tf.data's private thread pool, or None for TensorFlow's shared threads; where
    the size comes from) for a real-data run on `num_gpus` GPUs of a host with `cpu_count`
    CPUs (0 GPUs: a CPU run).

    --datasets_num_private_threads wins (0: the shared threads). Else a GPU run takes the legacy
    default: the CPUs minus the GPU threads (--per_gpu_thread_count or 2 per GPU, whatever the
    thread mode) minus 2 per GPU, at least 1, so that preprocessing runs on threads of its own
    beside the GPU threads and the step's inter-op threads. (The legacy script skips it under
    --nodatasets_use_prefetch, a TF1 flag tfbench ignores: its pipeline always prefetches.) A
    CPU run keeps the shared threads, where the model computes too."""
    given = p.data.datasets_num_private_threads
    if given is not None:
        return (given or None), ("--datasets_num_private_threads=%d" % given)
    if not num_gpus:
        return None, "default"
    gpu_threads = (p.runtime.per_gpu_thread_count or 2) * num_gpus
    monitoring = MONITORING_THREADS_PER_GPU * num_gpus
    size = max(cpu_count - gpu_threads - monitoring, 1)
    return size, ("the legacy default on GPUs: %d usable CPUs - %d GPU threads - %d for monitoring "
                  "and transfers" % (cpu_count, gpu_threads, monitoring))
