"""Peak memory: per device (TensorFlow's allocator statistics) and host resident memory.

Figures are in GiB (2**30 bytes); nvidia-smi prints MiB (2**20 bytes).

Device peaks come from tf.config.experimental.get_memory_info, which tracks TensorFlow's
allocator on GPUs (and TPUs). CPU devices have no such statistics, so a CPU run reports the
host's peak resident memory instead, labelled as such. A GPU run reports device memory or
nothing: when the statistics cannot be read, the figure is empty and one line says why, so host
memory never appears under a device label.

The runner resets the device peak after warm-up, so the figure is the steady state's: cuDNN's
autotuning tries algorithms with scratch buffers (up to 4 GiB by default) during the first steps.
The warm-up's own peak is kept apart. The peak is read when the timed steps end, before a final
checkpoint or evaluation; an evaluation beside training has its own peak. tfbench.output.console prints the figures.
"""

from __future__ import annotations

import resource
import sys
from typing import Iterable, Optional

GIB = float(1 << 30)


def tf_device(device_name: str) -> Optional[str]:
    """Any TensorFlow device name ("/gpu:0", "/job:localhost/replica:0/task:0/device:GPU:1",
    "GPU:0") as get_memory_info and reset_memory_stats take it ("GPU:0"); None when the name
    has no device type and index."""
    import tensorflow as tf
    spec = tf.DeviceSpec.from_string(device_name)
    if not spec.device_type or spec.device_index is None:
        return None
    return "%s:%d" % (spec.device_type.upper(), spec.device_index)


def _is_accelerator(device_name: str) -> bool:
    device = tf_device(device_name)
    return device is not None and device.split(":")[0] in ("GPU", "TPU")


def _why(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")


def reset_peak(device_names: Iterable[str]) -> Optional[str]:
    """Resets each accelerator's allocator peak to the memory in use now; None, or why a
    device's peak could not be reset (its peak then also covers what ran before)."""
    import tensorflow as tf
    for name in device_names:
        if not _is_accelerator(name):
            continue
        try:
            tf.config.experimental.reset_memory_stats(tf_device(name))
        except (ValueError, RuntimeError, tf.errors.OpError) as exc:
            return "could not reset the peak of %s (%s)" % (tf_device(name), _why(exc))
    return None


def peak_device_bytes(device_names: Iterable[str]
                      ) -> tuple[dict[str, Optional[int]], Optional[str]]:
    """({device name: peak bytes allocated by TensorFlow, None where not available}, None or
    why an accelerator's peak could not be read)."""
    import tensorflow as tf
    peaks: dict[str, Optional[int]] = {}
    reason = None
    for name in device_names:
        peaks[name] = None
        if not _is_accelerator(name):
            continue
        try:
            info = tf.config.experimental.get_memory_info(tf_device(name))
        except (ValueError, RuntimeError, tf.errors.OpError) as exc:
            reason = reason or "%s: %s" % (tf_device(name), _why(exc))
            continue
        peak = info.get("peak")   # TensorFlow's dict: current and peak bytes
        if peak:
            peaks[name] = int(peak)
        else:
            reason = reason or "%s: TensorFlow reported no peak" % tf_device(name)
    return peaks, reason


def host_peak_rss_bytes() -> Optional[int]:
    """Peak resident set size of this process since it started (it cannot be reset)."""
    try:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):
        maxrss = 0
    if maxrss:
        # Linux reports KiB, macOS bytes.
        return int(maxrss) if sys.platform == "darwin" else int(maxrss) * 1024
    try:
        import psutil
        return int(psutil.Process().memory_info().rss)
    except Exception:  # psutil missing or the platform refuses: no figure rather than a crash
        return None


def images_per_sec_per_gb(images_per_sec: Optional[float],
                          memory_gb: Optional[float]) -> Optional[float]:
    """Throughput per GiB of memory used; None when either figure is missing or zero."""
    if not images_per_sec or not memory_gb:
        return None
    return images_per_sec / memory_gb


def memory_summary(device_kind: str, device_peaks: dict[str, Optional[int]],
                   host_rss_bytes: Optional[int], images_per_sec: Optional[float] = None,
                   unavailable: Optional[str] = None,
                   warmup_peaks: Optional[dict[str, Optional[int]]] = None,
                   eval_peaks: Optional[dict[str, Optional[int]]] = None) -> dict:
    """The memory figures of one run, keyed by CSV column where one exists (GiB throughout).

    peak_mem_gb is the largest per-device peak of the timed steps (the figure that limits batch
    size). On a CPU run, which has no device statistics, it is the host's peak RSS
    (peak_mem_source "host"); on an accelerator run it is device memory or empty, with
    `memory_unavailable` saying why (also on a CPU run given no host RSS and a reason: a
    process that ran no step). images_per_sec_per_gb divides images/sec by the memory all
    devices used together (the sum of their peaks), so it does not grow with the number of GPUs.
    warmup_peak_mem_gb is the largest per-device peak of the warm-up steps (autotuning included),
    eval_peak_mem_gb that of the evaluations run beside training (--eval_during_training_*).
    (NVML's used memory, which includes the CUDA context and TF's reserved pool, is in the NVML
    monitor's summary.)
    """
    known = {name: b for name, b in device_peaks.items() if b}
    host_gb = host_rss_bytes / GIB if host_rss_bytes else None
    warm = [b for b in (warmup_peaks or {}).values() if b]
    evals = [b for b in (eval_peaks or {}).values() if b]
    out = {"peak_mem_gb": None, "peak_mem_source": None, "host_peak_rss_gb": host_gb,
           "images_per_sec_per_gb": None,
           "warmup_peak_mem_gb": max(warm) / GIB if warm else None,
           "eval_peak_mem_gb": max(evals) / GIB if evals else None,
           "device_peak_mem_gb": {name: (b / GIB if b else None)
                                  for name, b in device_peaks.items()},
           "memory_unavailable": None}
    if known:
        out.update(peak_mem_gb=max(known.values()) / GIB, peak_mem_source="device",
                   images_per_sec_per_gb=images_per_sec_per_gb(
                       images_per_sec, sum(known.values()) / GIB))
    elif device_kind == "cpu" and (host_gb is not None or not unavailable):
        out.update(peak_mem_gb=host_gb, peak_mem_source="host" if host_gb is not None else None,
                   images_per_sec_per_gb=images_per_sec_per_gb(images_per_sec, host_gb))
    else:
        out["memory_unavailable"] = unavailable or "no device reported a peak"
    return out
