"""Monitors that sample hardware beside the timed loop: NVIDIA GPUs (NVML) and the host (psutil).

Typical use by the runner:

    mons = monitors.create(device_kind, gpu_indices, interval_sec)
    for m in mons: m.start()            # before warm-up
    ...warm-up...
    for m in mons: m.mark_steady()      # the timed steps start
    ...timed loop...
    for m in mons: m.pause()            # a cooldown, an evaluation: outside the window
    for m in mons: m.resume()           # the next repeat
    ...timed loop...
    for m in mons: m.stop()
    extra.update(monitors.summary(mons, images=timed_images, images_per_sec=ips))
    series = monitors.samples(mons)     # {"nvml": [...], "host": [...]} for the JSON

The summary holds figures only; tfbench.output.console prints them (power, host CPU, and the
throttling warning from each GPU's throttle reasons and their fractions).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tfbench.monitors.base import Monitor
from tfbench.monitors.host import HostMonitor
from tfbench.monitors.nvml import NvmlMonitor

__all__ = ["Monitor", "NvmlMonitor", "HostMonitor", "create", "summary", "samples"]


def create(device_kind: str, gpu_indices: Optional[Sequence[int]] = None,
           interval_sec: float = 0.25) -> list[Monitor]:
    """The monitors for a run: the host always, NVIDIA GPUs on GPU runs. Never raises."""
    mons: list[Monitor] = []
    if device_kind.lower() == "gpu":
        mons.append(NvmlMonitor(gpu_indices, interval_sec))
    mons.append(HostMonitor(interval_sec))
    return mons


def summary(mons: Sequence[Monitor], images: Optional[int] = None,
            images_per_sec: Optional[float] = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in mons:
        out.update(m.summary(images=images, images_per_sec=images_per_sec))
    return out


def samples(mons: Sequence[Monitor]) -> dict[str, list[dict]]:
    return {m.name: m.samples() for m in mons}
