"""The vocabulary of a health verdict: the statuses, every reason code and what it says, one
row of the verdict table (Verdict) and a host's rows with their overall status (Judgement).
tfbench.measure.health decides the rows; docs/validate.md says what to do about each code.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
_RANK = {SKIP: 0, PASS: 1, WARN: 2, FAIL: 3}

# Every reason code and what it says (docs/validate.md: what to do about it).
REASONS: dict[str, str] = {
    "ok": "the fact is as expected",
    "not_reported": "NVML does not report this fact on this GPU or driver",
    "nvml_error": "NVML failed to read this fact",
    "gpu_lost": "NVML says the GPU has fallen off the bus",
    "driver_cuda_too_old": "the driver's CUDA major version is below what TensorFlow needs",
    "driver_cuda_older_minor": "the driver's CUDA version is of TensorFlow's major version but "
                               "an older minor one",
    "cuda_library_missing": "NVML answers but CUDA's driver library (libcuda) is not found",
    "persistence_mode_off": "persistence mode is off",
    "ecc_off": "ECC is off on a GPU that has it",
    "ecc_mode_pending": "ECC changes at the next reboot",
    "ecc_uncorrected_volatile": "uncorrected ECC errors since the driver loaded",
    "ecc_uncorrected_aggregate": "uncorrected ECC errors over the GPU's life",
    "ecc_uncorrected_rising": "uncorrected ECC errors rose since the earlier reading",
    "retired_pages_pending": "a memory page waits for a reboot to be retired",
    "retired_pages": "memory pages retired",
    "row_remap_pending": "a memory row remapping waits for a GPU reset",
    "row_remap_failed": "a memory row remapping has failed",
    "thermal_throttle": "HW thermal slowdown: clocks cut for temperature",
    "power_brake": "HW power brake slowdown: the power supply cut the clocks",
    "hw_slowdown": "HW slowdown with no thermal or power-brake reason",
    "sw_thermal_slowdown": "clocks lowered to stay under the maximum operating temperature",
    "board_limit": "clocks held by the board limit",
    "reliability": "clocks held by the reliability limit",
    "unknown_clock_event": "a clock event reason this tfbench does not know",
    "clocks_below_max": "clocks below their maximum under load with no setting that explains it",
    "pcie_width_degraded": "the PCIe link runs with fewer lanes than it can",
    "pcie_gen_degraded": "the PCIe link runs below its generation under load",
    "pcie_slot_gen_limited": "the slot runs an older PCIe generation than the GPU takes",
    "no_nvlink": "the GPU has no NVLink",
    "nvlink_down": "NVLink links down that are up on the host's other GPUs of this model",
    "nvlink_none_up": "no NVLink link up on any GPU of this model",
    "temperature_at_slowdown": "the GPU is at its slowdown temperature",
    "temperature_near_slowdown": "the GPU is near its slowdown temperature",
    "power_limit_lowered": "the enforced power limit is below the default",
}
@dataclasses.dataclass(frozen=True)
class Verdict:
    """One row of the verdict table."""
    gpu: Optional[int]          # CUDA index; None: the host
    check: str
    status: str                 # PASS, WARN, FAIL or SKIP
    reason: str                 # a code of REASONS
    figure: str
    expectation: str

    @property
    def label(self) -> str:
        """'pcie_width_degraded: x4 of x16'."""
        return "%s: %s" % (self.reason, self.figure)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Judgement:
    rows: tuple[Verdict, ...]

    @property
    def status(self) -> str:
        """FAIL if any row fails, else WARN if any warns, else PASS (SKIP rows do not count)."""
        worst = max((_RANK[r.status] for r in self.rows), default=_RANK[PASS])
        return {0: PASS, 1: PASS, 2: WARN, 3: FAIL}[worst]

    def of(self, gpu: Optional[int]) -> list[Verdict]:
        return [r for r in self.rows if r.gpu == gpu]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "rows": [r.to_json() for r in self.rows]}
