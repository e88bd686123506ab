"""Peak memory: per device (TensorFlow's allocator statistics) and host resident memory.

GB here is 2**30 bytes, the unit nvidia-smi and TensorFlow's own messages use.

Device peaks come from tf.config.experimental.get_memory_info, which tracks TensorFlow's
allocator on GPUs (and TPUs). CPU devices have no such statistics (TF returns zeros or raises),
so they report None, "not available", and the CSV falls back to the host peak RSS.
"""

from __future__ import annotations

import resource
import sys
from typing import Iterable, Optional

GB = float(1 << 30)


def _is_accelerator(device_name: str) -> bool:
    kind = device_name.rsplit("/", 1)[-1].split(":")[0].upper()
    if kind == "DEVICE":  # "/job:x/replica:0/task:0/device:GPU:0"
        kind = device_name.rsplit("/", 1)[-1].split(":")[1].upper()
    return kind in ("GPU", "TPU")


def _tf_device(device_name: str) -> str:
    """"/job:localhost/replica:0/task:0/device:GPU:1" -> "GPU:1" (what get_memory_info takes)."""
    tail = device_name.rsplit("/", 1)[-1]
    return tail[len("device:"):] if tail.lower().startswith("device:") else tail


def reset_peak(device_names: Iterable[str]) -> None:
    """Resets the allocator peak of each accelerator, so the next peak covers this run only."""
    import tensorflow as tf
    for name in device_names:
        if not _is_accelerator(name):
            continue
        try:
            tf.config.experimental.reset_memory_stats(_tf_device(name))
        except (ValueError, RuntimeError, tf.errors.OpError):
            pass  # no stats on this device: peak_device_bytes reports None


def peak_device_bytes(device_names: Iterable[str]) -> dict[str, Optional[int]]:
    """{device name: peak bytes allocated by TensorFlow, or None when not available}."""
    import tensorflow as tf
    peaks: dict[str, Optional[int]] = {}
    for name in device_names:
        peaks[name] = None
        if not _is_accelerator(name):
            continue
        try:
            info = tf.config.experimental.get_memory_info(_tf_device(name))
        except (ValueError, RuntimeError, tf.errors.OpError):
            continue
        peak = info.get("peak") if isinstance(info, dict) else None
        peaks[name] = int(peak) if peak else None
    return peaks


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
    """Throughput per GB of memory used; None when either figure is missing or zero."""
    if not images_per_sec or not memory_gb:
        return None
    return images_per_sec / memory_gb


def memory_summary(device_peaks: dict[str, Optional[int]],
                   host_rss_bytes: Optional[int],
                   images_per_sec: Optional[float] = None) -> dict:
    """The memory figures of one run, keyed by CSV column where one exists.

    peak_mem_gb is the largest per-device peak (the figure that limits batch size) when any
    device reports one, else the host peak RSS. images_per_sec_per_gb divides images/sec by the
    memory all devices used together (the sum of their peaks), so it does not grow with the
    number of GPUs; with one device that is images/sec / peak_mem_gb. (NVML's used memory,
    which includes the CUDA context and TF's reserved pool, is in the NVML monitor's summary.)
    """
    known = {name: b for name, b in device_peaks.items() if b}
    host_gb = host_rss_bytes / GB if host_rss_bytes else None
    if known:
        peak_gb = max(known.values()) / GB
        total_gb = sum(known.values()) / GB
        source = "device"
    else:
        peak_gb = total_gb = host_gb
        source = "host" if host_gb is not None else None
    return {
        "peak_mem_gb": peak_gb,
        "peak_mem_source": source,
        "host_peak_rss_gb": host_gb,
        "images_per_sec_per_gb": images_per_sec_per_gb(images_per_sec, total_gb),
        "device_peak_mem_gb": {name: (b / GB if b else None) for name, b in device_peaks.items()},
    }


def console_lines(summary: dict) -> list[str]:
    """`Memory: peak 12.34 GB per device (device), host peak RSS 3.21 GB, 123.4 images/sec/GB`"""
    if summary.get("peak_mem_gb") is None:
        return ["Memory: not available"]
    line = "Memory: peak %.2f GB" % summary["peak_mem_gb"]
    if summary.get("peak_mem_source") == "device":
        line += " per device"
        if summary.get("host_peak_rss_gb") is not None:
            line += ", host peak RSS %.2f GB" % summary["host_peak_rss_gb"]
    else:
        line += " host RSS (no device memory statistics)"
    if summary.get("images_per_sec_per_gb") is not None:
        line += ", %.1f images/sec/GB" % summary["images_per_sec_per_gb"]
    return [line]
