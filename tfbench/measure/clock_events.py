"""NVML's clock event reasons (once "clocks throttle reasons"): why a GPU's clocks are below
their maximum, as one bitmask per reading.

nvmlDeviceGetCurrentClocksEventReasons(handle) (nvidia-ml-py 12.535 and later) and the older
nvmlDeviceGetCurrentClocksThrottleReasons(handle) (marked deprecated in 13.x, to be removed in
CUDA 14) return the same mask. The bits are nvml.h's nvmlClocksEventReasons group, the same
values in nvidia-ml-py 12.535.161 and 13.615.71 (nvmlClocksEventReason* 0x1 to 0x100); 13.x
names 0x200 and 0x400 only as nvmlClocksThrottleReasonBoardLimit and ...Reliability. A bit
outside the table is shown by its value, never dropped. What a reason means for a GPU's
health is decided in tfbench.measure.health.
"""

from __future__ import annotations

from typing import Optional

REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
# Reasons that lower clocks under load. Idle, user/application clock settings, sync boost and
# display clocks are configuration or idleness, not throttling.
THROTTLING_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80 | 0x200 | 0x400


def decode(mask: Optional[int]) -> list[str]:
    """Bitmask -> reason names, e.g. 0x44 -> ["sw_power_cap", "hw_thermal_slowdown"]."""
    if not mask:
        return []
    names = [name for bit, name in REASONS if mask & bit]
    unknown = mask & ~sum(bit for bit, _ in REASONS)
    if unknown:
        names.append("unknown_0x%x" % unknown)
    return names
