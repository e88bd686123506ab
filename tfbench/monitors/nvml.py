"""The NVML sampler beside the timed loop: power, energy, utilisation, memory, temperature,
SM clock and throttling of NVIDIA GPUs (what NVML reports: tfbench.measure.nvml).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

from tfbench.measure import nvml as nvml_lib
from tfbench.measure.nvml import (GpuReader, close_nvml, gpu_static_info, open_nvml,
                                  resolve_handles)
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
            reason = nvml_lib.reason(exc)
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
        out["gpus"] = self.devices   # each GPU's static facts, its name among them
        return out
