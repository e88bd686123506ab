"""What NVML says about each GPU's health: the readings tfbench.measure.health judges.

The calls, their arguments and return types as in nvidia-ml-py's pynvml.py 12.535.161 and
13.615.71 (the same in both):
  nvmlSystemGetDriverVersion()               the driver, a str
  nvmlSystemGetCudaDriverVersion_v2()        the CUDA version the loaded libcuda gives
        (cuDriverGetVersion: 12040 = 12.4; a container's forward-compatibility libcuda
        counts), LIBRARY_NOT_FOUND without libcuda; the v1 call is not used, since without
        libcuda it answers "a known supported version number" (nvml.h), not a reading
  nvmlDeviceGetPersistenceMode(h)            nvmlEnableState_t (Linux only)
  nvmlDeviceGetEccMode(h)                    [current, pending] nvmlEnableState_t
  nvmlDeviceGetTotalEccErrors(h, e, c)       a count; e 0 corrected, 1 uncorrected; c 0 volatile
        (since the driver loaded), 1 aggregate (the GPU's life); NOT_SUPPORTED with ECC off
  nvmlDeviceGetRetiredPages(h, cause)        the addresses of retired pages; cause 0 multiple
        single-bit errors, 1 a double-bit error; before Ampere only (NOT_SUPPORTED after)
  nvmlDeviceGetRetiredPagesPendingStatus(h)  nvmlEnableState_t: a page waits for a reboot
  nvmlDeviceGetRemappedRows(h)               (correctable rows, uncorrectable rows, pending,
        failure occurred); Ampere and later, NOT_SUPPORTED under MIG with instances
  nvmlDeviceGetCurrentClocksEventReasons(h)  the clock event mask (tfbench.measure.nvml's
        GpuReader; nvmlDeviceGetCurrentClocksThrottleReasons where a driver lacks it)
  nvmlDeviceGetClockInfo(h, t), nvmlDeviceGetMaxClockInfo(h, t)   MHz; t 1 SM, 2 memory
  nvmlDeviceGetTemperature(h, 0)             °C of the GPU die
  nvmlDeviceGetTemperatureThreshold(h, t)    °C; t 0 shutdown, 1 slowdown (nvml.h: no longer
        the preferred call on Ada and later, and may stop answering there: then not reported)
  nvmlDeviceGetPowerUsage(h), nvmlDeviceGetEnforcedPowerLimit(h),
  nvmlDeviceGetPowerManagementDefaultLimit(h)                     mW
PCIe and each NVLink link's state are read by tfbench.measure.links and .nvml. The readings of
a MIG slice are its GPU's (nvmlDeviceIsMigDeviceHandle, which returns a c_uint object in both
bindings, and nvmlDeviceGetDeviceHandleFromMigDeviceHandle): every fact here is the whole GPU's.

A call that fails leaves its reading None and says why in `unread` ('nvmlDeviceGetEccMode: not
supported': NOT_SUPPORTED, FUNCTION_NOT_FOUND or a binding without the call; else NVML's error);
GPU_IS_LOST ("the GPU has fallen off the bus", nvml.h) marks the GPU lost.

`python -m tfbench.measure.health_read --json=FILE` writes the readings as JSON (host_from_json
reads them back), with the CUDA version the installed TensorFlow was built with: `tfbench
validate` reads the health facts in a process of their own, so a driver call that hangs or
crashes is one failed check.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any, Mapping, Optional, Sequence

from tfbench.measure import links
from tfbench.measure import nvml as nvml_mod

NOT_SUPPORTED = "not supported"
# nvmlSystemGetCudaDriverVersion_v2's LIBRARY_NOT_FOUND: NVML answers, CUDA's library is missing.
LIBCUDA_NOT_FOUND = "libcuda.so.1 not found"
_ERROR_LIBRARY_NOT_FOUND = 12
_ERROR_GPU_IS_LOST = 15
_CLOCK_SM, _CLOCK_MEM = 1, 2                        # nvmlClockType_t
_ERROR_TYPE_CORRECTED, _ERROR_TYPE_UNCORRECTED = 0, 1   # nvmlMemoryErrorType_t
_VOLATILE, _AGGREGATE = 0, 1                        # nvmlEccCounterType_t
_MULTIPLE_SINGLE_BIT, _DOUBLE_BIT = 0, 1            # nvmlPageRetirementCause_t
_THRESHOLD_SHUTDOWN, _THRESHOLD_SLOWDOWN = 0, 1     # nvmlTemperatureThresholds_t
_TEMPERATURE_GPU = 0                                # nvmlTemperatureSensors_t


@dataclasses.dataclass(frozen=True)
class GpuHealth:
    """One GPU's health readings (None: not reported; `unread` says why)."""
    gpu: int                                   # CUDA index, as --gpu_indices counts
    name: Optional[str] = None
    uuid: Optional[str] = None
    lost: bool = False                         # NVML: GPU_IS_LOST
    persistence: Optional[bool] = None
    ecc: Optional[bool] = None                 # ECC mode now
    ecc_pending: Optional[bool] = None         # ECC mode after the next reboot
    ecc_uncorrected_volatile: Optional[int] = None
    ecc_uncorrected_aggregate: Optional[int] = None
    ecc_corrected_volatile: Optional[int] = None
    ecc_corrected_aggregate: Optional[int] = None
    retired_pages_pending: Optional[bool] = None
    retired_double_bit: Optional[int] = None
    retired_single_bit: Optional[int] = None
    remapped_correctable: Optional[int] = None
    remapped_uncorrectable: Optional[int] = None
    remap_pending: Optional[bool] = None
    remap_failed: Optional[bool] = None
    clocks_event_mask: Optional[int] = None
    sm_clock_mhz: Optional[int] = None
    sm_clock_max_mhz: Optional[int] = None
    mem_clock_mhz: Optional[int] = None
    mem_clock_max_mhz: Optional[int] = None
    link: Optional[links.GpuLink] = None       # PCIe as tfbench.measure.links reads it
    nvlink_states: Optional[tuple[bool, ...]] = None   # link 0 first; None: no NVLink
    temperature_c: Optional[int] = None
    slowdown_c: Optional[int] = None
    shutdown_c: Optional[int] = None
    power_w: Optional[float] = None
    power_limit_w: Optional[float] = None      # enforced
    default_power_limit_w: Optional[float] = None
    unread: Mapping[str, str] = dataclasses.field(default_factory=dict)  # reading -> why not


@dataclasses.dataclass(frozen=True)
class HostHealth:
    """The driver and every GPU read."""
    driver_version: Optional[str]
    cuda_driver_version: Optional[tuple[int, int]]
    gpus: tuple[GpuHealth, ...]
    unread: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The readings as plain data (PCIe under each GPU's `link`)."""
        return dataclasses.asdict(self)


def _why(exc: BaseException) -> str:
    never = nvml_mod._NEVER_AGAIN  # noqa: SLF001 - NOT_SUPPORTED, FUNCTION_NOT_FOUND
    if isinstance(exc, AttributeError) or getattr(exc, "value", None) in never:
        return NOT_SUPPORTED
    return nvml_mod.reason(exc)


def _whole_gpu(nvml: Any, handle: Any) -> Any:
    """The GPU that holds a MIG slice, or the handle itself."""
    try:
        mig = nvml.nvmlDeviceIsMigDeviceHandle(handle)
        if int(getattr(mig, "value", mig)):
            return nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    except (nvml.NVMLError, AttributeError):
        pass
    return handle


class _Reader:
    """Reads NVML calls on one GPU; a failed call's reading is None and its reason is kept
    under the reading's name."""

    def __init__(self, nvml: Any, handle: Any):
        self.nvml, self.handle = nvml, handle
        self.reader = nvml_mod.GpuReader(nvml, handle)
        self.unread: dict[str, str] = {}
        self.lost = False

    def _note(self, reading: str, call: str, field: str) -> None:
        exc = self.reader.failures.get(field)
        if exc is None:
            return
        self.lost = self.lost or getattr(exc, "value", None) == _ERROR_GPU_IS_LOST
        self.unread.setdefault(reading, "%s: %s" % (call, _why(exc)))

    def call(self, reading: str, name: str, *args: Any) -> Any:
        field = "%s%r" % (name, args)
        value = self.reader.get(field, lambda: getattr(self.nvml, name)(self.handle, *args))
        if value is None:
            self._note(reading, name, field)
        return value

    def clock_event_mask(self) -> Optional[int]:
        mask = self.reader._throttle_mask()  # noqa: SLF001 - the monitors' own fallback
        if mask is None:
            self._note("clock_events", "nvmlDeviceGetCurrentClocksThrottleReasons",
                       "throttle_reasons")
            self._note("clock_events", "nvmlDeviceGetCurrentClocksEventReasons",
                       "clocks_event_reasons")
        return mask


def _int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def _flag(value: Any) -> Optional[bool]:
    return None if value is None else bool(value)


def _watts(milliwatts: Any) -> Optional[float]:
    return None if milliwatts is None else milliwatts / 1000.0


def _count(pages: Any) -> Optional[int]:
    return None if pages is None else len(pages)


def read_gpu(nvml: Any, handle: Any, gpu: int) -> GpuHealth:
    """One GPU's readings (a MIG slice's are its GPU's); never raises for a call that fails."""
    handle = _whole_gpu(nvml, handle)
    r = _Reader(nvml, handle)
    ecc = r.call("ecc_mode", "nvmlDeviceGetEccMode") or (None, None)
    rows = r.call("remapped_rows", "nvmlDeviceGetRemappedRows") or (None,) * 4
    name, uuid = r.call("name", "nvmlDeviceGetName"), r.call("uuid", "nvmlDeviceGetUUID")

    def errors(kind: int, counter: int) -> Optional[int]:
        return _int(r.call("ecc_errors", "nvmlDeviceGetTotalEccErrors", kind, counter))
    states = nvml_mod.nvlink_states(nvml, handle)
    return GpuHealth(
        gpu=gpu, name=None if name is None else nvml_mod.text(name),
        uuid=None if uuid is None else nvml_mod.text(uuid),
        persistence=_flag(r.call("persistence", "nvmlDeviceGetPersistenceMode")),
        ecc=_flag(ecc[0]), ecc_pending=_flag(ecc[1]),
        ecc_uncorrected_volatile=errors(_ERROR_TYPE_UNCORRECTED, _VOLATILE),
        ecc_uncorrected_aggregate=errors(_ERROR_TYPE_UNCORRECTED, _AGGREGATE),
        ecc_corrected_volatile=errors(_ERROR_TYPE_CORRECTED, _VOLATILE),
        ecc_corrected_aggregate=errors(_ERROR_TYPE_CORRECTED, _AGGREGATE),
        retired_pages_pending=_flag(r.call("retired_pages",
                                           "nvmlDeviceGetRetiredPagesPendingStatus")),
        retired_double_bit=_count(r.call("retired_pages", "nvmlDeviceGetRetiredPages",
                                         _DOUBLE_BIT)),
        retired_single_bit=_count(r.call("retired_pages", "nvmlDeviceGetRetiredPages",
                                         _MULTIPLE_SINGLE_BIT)),
        remapped_correctable=_int(rows[0]), remapped_uncorrectable=_int(rows[1]),
        remap_pending=_flag(rows[2]), remap_failed=_flag(rows[3]),
        clocks_event_mask=r.clock_event_mask(),
        sm_clock_mhz=_int(r.call("clocks", "nvmlDeviceGetClockInfo", _CLOCK_SM)),
        sm_clock_max_mhz=_int(r.call("clocks", "nvmlDeviceGetMaxClockInfo", _CLOCK_SM)),
        mem_clock_mhz=_int(r.call("clocks", "nvmlDeviceGetClockInfo", _CLOCK_MEM)),
        mem_clock_max_mhz=_int(r.call("clocks", "nvmlDeviceGetMaxClockInfo", _CLOCK_MEM)),
        link=links.gpu_link(nvml, handle, gpu),
        nvlink_states=None if states is None else tuple(states),
        temperature_c=_int(r.call("temperature", "nvmlDeviceGetTemperature",
                                  _TEMPERATURE_GPU)),
        slowdown_c=_int(r.call("thresholds", "nvmlDeviceGetTemperatureThreshold",
                               _THRESHOLD_SLOWDOWN)),
        shutdown_c=_int(r.call("thresholds", "nvmlDeviceGetTemperatureThreshold",
                               _THRESHOLD_SHUTDOWN)),
        power_w=_watts(r.call("power", "nvmlDeviceGetPowerUsage")),
        power_limit_w=_watts(r.call("power_limit", "nvmlDeviceGetEnforcedPowerLimit")),
        default_power_limit_w=_watts(r.call("power_limit",
                                            "nvmlDeviceGetPowerManagementDefaultLimit")),
        lost=r.lost, unread=r.unread)


def _system(nvml: Any, call: str, unread: dict[str, str], reading: str) -> Any:
    try:
        return getattr(nvml, call)()
    except (nvml.NVMLError, AttributeError) as exc:
        why = _why(exc)
        if getattr(exc, "value", None) == _ERROR_LIBRARY_NOT_FOUND:   # of the call, not NVML
            why = LIBCUDA_NOT_FOUND
        unread.setdefault(reading, "%s: %s" % (call, why))
        return None


def read_host(nvml: Any, handles: Sequence[tuple[int, Any]]) -> HostHealth:
    """The driver's readings and those of the GPUs `handles` ([(CUDA index, NVML handle)],
    tfbench.measure.nvml's resolve_handles)."""
    unread: dict[str, str] = {}
    driver = _system(nvml, "nvmlSystemGetDriverVersion", unread, "driver")
    cuda = _system(nvml, "nvmlSystemGetCudaDriverVersion_v2", unread, "cuda")
    return HostHealth(
        driver_version=None if driver is None else nvml_mod.text(driver),
        cuda_driver_version=None if not cuda else (int(cuda) // 1000, int(cuda) % 1000 // 10),
        gpus=tuple(read_gpu(nvml, h, i) for i, h in handles), unread=unread)


def gpu_health(gpu_indices: Optional[Sequence[int]] = None, nvml: Any = None,
               environ: Optional[Mapping[str, str]] = None,
               ) -> tuple[Optional[HostHealth], str]:
    """(the readings of these CUDA GPUs, every GPU CUDA sees when None, '') or (None, why NVML
    cannot tell: no driver, a GPU that cannot be matched). Never raises."""
    module, reason = nvml_mod.open_nvml(nvml)
    if module is None:
        return None, reason or "NVML not available"
    try:
        indices: Optional[list[int]] = None if gpu_indices is None else list(gpu_indices)
        return read_host(module, nvml_mod.resolve_handles(module, indices, environ)), ""
    except Exception as exc:  # noqa: BLE001 - NVMLError, UnmappedGpu: no readings, and why
        return None, nvml_mod.reason(exc)
    finally:
        nvml_mod.close_nvml(module)



def _pair(value: Any) -> Optional[tuple[int, int]]:
    return None if value is None else (int(value[0]), int(value[1]))


def _link_from_json(data: Optional[Mapping[str, Any]]) -> Optional[links.GpuLink]:
    if data is None:
        return None
    fields = {f.name for f in dataclasses.fields(links.GpuLink)}
    values = {k: v for k, v in data.items() if k in fields}
    values["compute_capability"] = _pair(values.get("compute_capability"))
    if values.get("nvlink_gpus") is not None:   # JSON keys are strings
        values["nvlink_gpus"] = {int(k): int(v) for k, v in values["nvlink_gpus"].items()}
    return links.GpuLink(**values)


def gpu_from_json(data: Mapping[str, Any]) -> GpuHealth:
    fields = {f.name for f in dataclasses.fields(GpuHealth)}
    values = {k: v for k, v in data.items() if k in fields}
    values["link"] = _link_from_json(values.get("link"))
    if values.get("nvlink_states") is not None:
        values["nvlink_states"] = tuple(bool(s) for s in values["nvlink_states"])
    values["unread"] = dict(values.get("unread") or {})
    return GpuHealth(**values)


def host_from_json(data: Mapping[str, Any]) -> HostHealth:
    """HostHealth.to_json()'s data (through JSON: tuples as lists, int keys as strings) read
    back."""
    return HostHealth(driver_version=data.get("driver_version"),
                      cuda_driver_version=_pair(data.get("cuda_driver_version")),
                      gpus=tuple(gpu_from_json(g) for g in data.get("gpus") or ()),
                      unread=dict(data.get("unread") or {}))


def report(gpu_indices: Optional[Sequence[int]] = None, nvml: Any = None) -> dict[str, Any]:
    """What `--json` writes: {"readings": HostHealth.to_json() or None, "why": why NVML cannot
    tell ('' when it can), "tensorflow_cuda": [major, minor] the installed TensorFlow was built
    with or None, "tensorflow_cuda_why": why there is none}."""
    from tfbench.measure import tensorflow_build
    host, why = gpu_health(gpu_indices, nvml=nvml)
    cuda, cuda_why = tensorflow_build.tensorflow_cuda()
    return {"readings": None if host is None else host.to_json(), "why": why,
            "tensorflow_cuda": None if cuda is None else list(cuda),
            "tensorflow_cuda_why": cuda_why}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m tfbench.measure.health_read --json=FILE [--gpu_indices=0,1]`: the readings
    (report()) as JSON into FILE ('-': stdout). Exit 0 whenever the file is written, NVML or
    not; 2 on bad arguments."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m tfbench.measure.health_read",
                                     description="NVML's health readings of the GPUs, as JSON")
    parser.add_argument("--json", required=True, metavar="FILE",
                        help="where the readings go ('-': stdout)")
    parser.add_argument("--gpu_indices", default="",
                        help="the CUDA GPUs to read, comma-separated (default every one)")
    args = parser.parse_args(argv)
    try:
        indices = [int(i) for i in args.gpu_indices.split(",") if i.strip()] or None
    except ValueError:
        parser.error("--gpu_indices: give CUDA indices such as 0,1")
    text = json.dumps(report(indices), indent=1, sort_keys=True) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    else:
        with open(args.json, "w") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
