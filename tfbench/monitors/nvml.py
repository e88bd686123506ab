"""The NVML sampler beside the timed loop: power, energy, utilisation, memory, temperature,
SM clock and throttling of NVIDIA GPUs (what NVML reports: tfbench.measure.nvml).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

from tfbench.measure.nvml import (GpuReader, close_nvml, gpu_static_info, open_nvml,
                                  resolve_handles, _reason)
from tfbench.monitors import aggregate
from tfbench.monitors.base import Monitor


class NvmlMonitor(Monitor):
    """Power, energy, utilisation, memory, temperature, SM clock and throttling of NVIDIA GPUs.

    gpu_indices: CUDA indices to watch (None = all visible). Without a driver or GPU,
    `available` is False, summary() says "not available" and nothing is raised or printed.
    """

    name = "nvml"

    def __init__(self, gpu_indices: Optional[Sequence[int]] = None, interval_sec: float = 0.25,
                 nvml: Any = None, clock: Callable[[], float] = time.monotonic,
                 environ: Optional[Mapping[str, str]] = None):
        super().__init__(interval_sec, clock)
        self.devices: list[dict[str, Any]] = []
        self._readers: list[tuple[int, GpuReader]] = []
        self._nvml, reason = open_nvml(nvml)
        if self._nvml is None:
            self.available, self.unavailable_reason = False, reason
            return
        try:
            handles = resolve_handles(self._nvml, gpu_indices, environ)
            for index, handle in handles:
                info = gpu_static_info(self._nvml, handle)
                self.devices.append({"gpu": index, **info})
                self._readers.append((index, GpuReader(self._nvml, handle)))
        except Exception as exc:  # noqa: BLE001 - e.g. NVMLError from nvmlDeviceGetCount
            self._readers = []
            reason = _reason(exc)
        if not self._readers:
            self.available = False
            self.unavailable_reason = reason or "no NVIDIA GPU visible"
            close_nvml(self._nvml)
            self._nvml = None

    def _read(self) -> list[dict]:
        out = []
        for index, reader in self._readers:
            sample = reader.read()
            sample["throttle_reasons"] = aggregate.decode_throttle(sample["throttle_mask"])
            out.append({"gpu": index, **sample})
        return out

    def _close(self) -> None:
        if self._nvml is not None:
            close_nvml(self._nvml)
            self._nvml = None

    def _empty_summary(self) -> dict[str, Any]:
        return dict.fromkeys(aggregate.GPU_COLUMNS)

    def _summarize(self, samples, images, images_per_sec):
        out = aggregate.gpu_summary(samples, images, images_per_sec)
        out["gpus"] = self.devices
        return out

    def _names(self) -> dict[Any, str]:
        return {d["gpu"]: d.get("name") for d in self.devices}

    def warnings(self) -> list[str]:
        if not self.available:
            return []
        line = aggregate.throttle_warning(self.samples(), self._names())
        return [line] if line else []

    def console_lines(self, images: Optional[int] = None,
                      images_per_sec: Optional[float] = None) -> list[str]:
        """`GPU power: mean 312.4 W, max 398.2 W, energy 3123.5 J (0.0305 J/image), ...`"""
        if not self.available:
            return ["GPU power: not available (%s)" % self.unavailable_reason]
        s = self.summary(images, images_per_sec)
        if s.get("power_w_mean") is None and s.get("gpu_util_pct_mean") is None:
            return ["GPU power: no readings"]
        parts = []
        if s.get("power_w_mean") is not None:
            parts.append("mean %.1f W, max %.1f W" % (s["power_w_mean"], s["power_w_max"]))
        else:
            parts.append("power n/a")
        if s.get("energy_j") is not None:
            energy = "energy %.1f J" % s["energy_j"]
            if s.get("joules_per_image") is not None:
                energy += " (%.4g J/image)" % s["joules_per_image"]
            parts.append(energy)
        if s.get("images_per_sec_per_watt") is not None:
            parts.append("%.3g images/sec/W" % s["images_per_sec_per_watt"])
        detail = []
        if s.get("gpu_util_pct_mean") is not None:
            detail.append("util %.0f%%" % s["gpu_util_pct_mean"])
        if s.get("temp_c_max") is not None:
            detail.append("temp max %.0f C" % s["temp_c_max"])
        if s.get("sm_clock_mhz_mean") is not None:
            detail.append("SM clock %.0f MHz" % s["sm_clock_mhz_mean"])
        line = "GPU power: " + ", ".join(parts)
        if detail:
            line += "; " + ", ".join(detail)
        if s.get("num_gpus_monitored", 1) > 1:
            line += " (%d GPUs; power and energy are totals)" % s["num_gpus_monitored"]
        return [line]
