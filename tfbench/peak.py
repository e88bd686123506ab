"""Peak dense TFLOP/s per device for model-FLOPs utilisation (MFU).

MFU = achieved model TFLOP/s / (peak TFLOP/s per device x devices). Peaks are NVIDIA datasheet
figures for dense math (no structured sparsity) in the precision that does the convolutions:
fp32 runs use TF32 tensor cores on Ampere and newer (TensorFlow's default), fp16/bf16 runs the
16-bit tensor cores. CPUs have no such table: give --peak_tflops (for example from a vendor
sheet, or from the conv ceiling measured on the machine).
"""

from __future__ import annotations

import re
from typing import Optional

# name pattern -> {precision: dense TFLOP/s}; fp32 on Ampere+ is TF32 (TF's default).
_GPU_PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    (r"H200", {"fp32": 494.7, "fp16": 989.4, "bf16": 989.4}),
    (r"H100.*PCIe", {"fp32": 378.0, "fp16": 756.0, "bf16": 756.0}),
    (r"H100", {"fp32": 494.7, "fp16": 989.4, "bf16": 989.4}),
    (r"A100", {"fp32": 156.0, "fp16": 312.0, "bf16": 312.0}),
    (r"\bA10\b", {"fp32": 62.5, "fp16": 125.0, "bf16": 125.0}),
    (r"L40S", {"fp32": 183.0, "fp16": 362.0, "bf16": 362.0}),
    (r"\bL4\b", {"fp32": 60.0, "fp16": 121.0, "bf16": 121.0}),
    (r"RTX A6000", {"fp32": 77.4, "fp16": 154.8, "bf16": 154.8}),
    (r"V100", {"fp32": 15.7, "fp16": 125.0}),
    (r"\bT4\b", {"fp32": 8.1, "fp16": 65.0}),
)


def gpu_peak_tflops(device_name: str, precision: str) -> Optional[float]:
    """The datasheet dense peak of one GPU in `precision`, or None when unknown."""
    for pattern, peaks in _GPU_PEAKS:
        if re.search(pattern, device_name or ""):
            return peaks.get(precision)
    return None


def mfu_pct(tflops_per_sec: Optional[float], peak_per_device: Optional[float],
            num_devices: int) -> Optional[float]:
    if not tflops_per_sec or not peak_per_device or num_devices <= 0:
        return None
    return 100.0 * tflops_per_sec / (peak_per_device * num_devices)
