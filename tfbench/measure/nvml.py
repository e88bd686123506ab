"""What NVML (the `pynvml` module of NVIDIA's nvidia-ml-py package) says about the GPUs.

open_nvml() loads and initialises NVML, or says why it cannot ("not available": no driver, no
GPU); nothing is printed. GpuReader takes one sample of a GPU; static_info() (from
gpu_static_info() and system_info()) describes the GPUs for the environment manifest. The NVML
module is a parameter everywhere, so tests inject a fake.

GPU numbering: tfbench's GPU indices are CUDA's, i.e. positions in CUDA_VISIBLE_DEVICES when it
is set, read by tfbench.measure.cuda_visible (the driver's rules: where the list stops, repeats,
ordinals read like strtoul). resolve_handles() maps them to NVML devices: an ordinal is a
position in CUDA's enumeration, which follows the PCI bus id under CUDA_DEVICE_ORDER=PCI_BUS_ID
(tfbench sets it at start-up) and is otherwise "fastest first", an order NVML cannot reproduce
(so only a single GPU maps); 'GPU-<uuid>' (or a unique prefix) is looked up by UUID; a MIG
slice, 'MIG-<uuid>' (R470+) or 'MIG-GPU-<uuid>/<gi>/<ci>' (R450), maps to the slice's own NVML
handle, whose readings (memory) are the slice's and whose whole-GPU readings (power) NVML
refuses. A GPU that cannot be matched for certain makes the monitor "not available" with the
reason, never a reading of another GPU. `python -m tfbench.measure.nvml` prints how many GPUs
CUDA will number (scripts/scaling_test.sh reads it).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Mapping, Optional, Sequence

from tfbench.measure import cuda_visible
from tfbench.measure.cuda_visible import NoDevice


_ERROR_NOT_SUPPORTED = 3
_ERROR_LIBRARY_NOT_FOUND = 12
_ERROR_FUNCTION_NOT_FOUND = 13
_ERROR_DRIVER_NOT_LOADED = 9
_NEVER_AGAIN = (_ERROR_NOT_SUPPORTED, _ERROR_FUNCTION_NOT_FOUND)


def text(value: Any) -> str:
    """A string NVML returned (bytes in older nvidia-ml-py) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def reason(exc: BaseException) -> str:
    """Why NVML cannot be used, in a few words, from the error it raised."""
    if isinstance(exc, UnmappedGpu):
        return str(exc)
    code = getattr(exc, "value", None)
    if code == _ERROR_LIBRARY_NOT_FOUND:
        return "no NVIDIA driver: NVML library not found"
    if code == _ERROR_DRIVER_NOT_LOADED:
        return "NVIDIA driver not loaded"
    return "NVML: %s" % (text(exc) or type(exc).__name__)


def open_nvml(nvml: Any = None) -> tuple[Any, Optional[str]]:
    """(initialised NVML module, None) or (None, why not). Never raises, never prints."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            return None, "nvidia-ml-py is not installed"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError, OSError from a broken driver install
        return None, reason(exc)
    return nvml, None


def close_nvml(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - shutting down a half-broken driver is not our problem
        pass


class UnmappedGpu(Exception):
    """A CUDA GPU that cannot be matched to one NVML device for certain."""


_MIG_R450 = re.compile(r"^MIG-(GPU-[0-9A-Fa-f-]+)/(\d+)/(\d+)$")


def _uuid(nvml: Any, handle: Any) -> str:
    return text(nvml.nvmlDeviceGetUUID(handle))


def _gpus(nvml: Any) -> list[Any]:
    return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]


def _cuda_order(nvml: Any, environ: Mapping[str, str]) -> list[Any]:
    """NVML handles of the GPUs in the order CUDA numbers them (before CUDA_VISIBLE_DEVICES)."""
    gpus = _gpus(nvml)
    order = environ.get("CUDA_DEVICE_ORDER")
    if order == "PCI_BUS_ID":
        # NVML's own index order is not guaranteed to be the bus order: sort by the bus id.
        def bus_id(handle):
            info = nvml.nvmlDeviceGetPciInfo(handle)
            return (info.domain, info.bus, info.device)
        return sorted(gpus, key=bus_id)
    if len(gpus) <= 1:
        return gpus
    raise UnmappedGpu(
        "CUDA numbers GPUs fastest first (CUDA_DEVICE_ORDER=%s), an order NVML cannot tell; "
        "set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPUs by UUID in CUDA_VISIBLE_DEVICES"
        % (order if order is not None else "unset"))


def _slices(nvml: Any, gpu: Any) -> tuple[bool, list[Any]]:
    """(is the GPU in MIG mode, the NVML handles of the MIG slices this process can see)."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(gpu)
    except (nvml.NVMLError, AttributeError):   # no MIG on this GPU, or an old nvidia-ml-py
        return False, []
    if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return False, []
    slices = []
    for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            slices.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i))
        except nvml.NVMLError:
            continue   # no slice at this index
    return True, slices


def _as_cuda_sees(nvml: Any, gpu: Any, label: str) -> Any:
    """A whole GPU, or the one slice CUDA uses on a GPU in MIG mode."""
    mig, slices = _slices(nvml, gpu)
    if not mig:
        return gpu
    if len(slices) == 1:
        return slices[0]
    raise UnmappedGpu("%s is in MIG mode with %d slices visible and CUDA uses one of them: name "
                      "it in CUDA_VISIBLE_DEVICES (MIG-<uuid>, see nvidia-smi -L)"
                      % (label, len(slices)))


def _by_uuid(nvml: Any, entry: str, candidates: Callable[[], list[Any]]) -> Any:
    """The GPU or MIG slice with this UUID, or with this unique UUID prefix (CUDA takes both);
    NoDevice when none or several match."""
    try:
        return nvml.nvmlDeviceGetHandleByUUID(entry)   # takes GPU and MIG UUIDs
    except nvml.NVMLError:
        pass
    found = [h for h in candidates() if _uuid(nvml, h).lower().startswith(entry.lower())]
    if len(found) != 1:
        raise NoDevice("matches %s" % ("no device NVML sees" if not found
                                       else "%d devices" % len(found)))
    return found[0]


def _identified(nvml: Any, entry: str) -> Any:
    """The NVML handle a GPU-/MIG- entry of CUDA_VISIBLE_DEVICES names: the whole GPU for a GPU
    UUID, the slice for a MIG id; NoDevice when none does."""
    r450 = _MIG_R450.match(entry)
    if r450:
        gpu = _by_uuid(nvml, r450.group(1), lambda: _gpus(nvml))
        gi, ci = int(r450.group(2)), int(r450.group(3))
        for mig in _slices(nvml, gpu)[1]:
            if (nvml.nvmlDeviceGetGpuInstanceId(mig),
                    nvml.nvmlDeviceGetComputeInstanceId(mig)) == (gi, ci):
                return mig
        raise NoDevice("no MIG slice with GPU instance %d, compute instance %d" % (gi, ci))
    if entry.startswith(cuda_visible.MIG):
        return _by_uuid(nvml, entry,
                        lambda: [m for g in _gpus(nvml) for m in _slices(nvml, g)[1]])
    return _by_uuid(nvml, entry, lambda: _gpus(nvml))


def _lookup(nvml: Any, order: Callable[[], list[Any]]) -> Callable[[cuda_visible.Entry], Any]:
    """cuda_visible.read's lookup: an ordinal is a position in `order` (CUDA's numbering)."""
    def lookup(entry: cuda_visible.Entry) -> Any:
        if not isinstance(entry, int):
            return _identified(nvml, entry)
        gpus = order()
        if entry >= len(gpus):
            raise NoDevice("CUDA numbers %d GPU(s)" % len(gpus))
        return gpus[entry]
    return lookup


def cuda_device_count(nvml: Any, environ: Optional[Mapping[str, str]] = None) -> int:
    """How many devices CUDA will number (a GPU in MIG mode counts as one), with
    CUDA_VISIBLE_DEVICES read by tfbench.measure.cuda_visible. Unset: every GPU this process
    may open. The order of the GPUs does not matter for a count."""
    environ = os.environ if environ is None else environ
    spec = environ.get(cuda_visible.VARIABLE)
    if spec is None:
        return len(_openable(nvml))
    total = int(nvml.nvmlDeviceGetCount())

    def lookup(entry: cuda_visible.Entry) -> Any:
        if not isinstance(entry, int):
            return _uuid(nvml, _identified(nvml, entry))
        if entry >= total:   # no handle needed: a cgroup may deny opening some GPUs
            raise NoDevice("CUDA numbers %d GPU(s)" % total)
        return entry
    return len(cuda_visible.read(spec, lookup).devices)


def _openable(nvml: Any) -> list[Any]:
    """The GPUs this process may open: NVML counts GPUs a cgroup or container denies it too."""
    handles = []
    for i in range(int(nvml.nvmlDeviceGetCount())):
        try:
            handles.append(nvml.nvmlDeviceGetHandleByIndex(i))
        except nvml.NVMLError:
            continue
    return handles


def resolve_handles(nvml: Any, gpu_indices: Optional[Sequence[int]] = None,
                    environ: Optional[Mapping[str, str]] = None) -> list[tuple[int, Any]]:
    """[(CUDA index, NVML handle)] for the GPUs to watch; None = every GPU CUDA sees.

    Raises UnmappedGpu when one of them cannot be matched for certain.
    """
    environ = os.environ if environ is None else environ
    spec = environ.get(cuda_visible.VARIABLE)
    cached: list[list[Any]] = []

    def order() -> list[Any]:
        if not cached:
            cached.append(_cuda_order(nvml, environ))
        return cached[0]

    visible = cuda_visible.read(spec, _lookup(nvml, order), key=lambda h: _uuid(nvml, h))
    devices = order() if visible is None else visible.devices   # CUDA GPU 0, 1, ...
    wanted = range(len(devices)) if gpu_indices is None else gpu_indices
    for index in wanted:
        if not 0 <= index < len(devices):
            why = "; %s" % visible.stopped if visible is not None and visible.stopped else ""
            raise UnmappedGpu("GPU %d: CUDA sees %d GPU(s) (CUDA_VISIBLE_DEVICES=%r%s)"
                              % (index, len(devices), spec, why))
    if spec is not None and cuda_visible.form(spec) == cuda_visible.MIG:
        return [(index, devices[index]) for index in wanted]   # slices already
    return [(index, _as_cuda_sees(nvml, devices[index], "GPU %d" % index)) for index in wanted]


class GpuReader:
    """Reads one sample of one GPU; a field the GPU does not support is None and not asked again."""

    def __init__(self, nvml: Any, handle: Any):
        self.nvml = nvml
        self.handle = handle
        self._unsupported: set[str] = set()
        self.failures: dict[str, BaseException] = {}   # field -> why it read None, last time

    def get(self, field: str, call: Callable[[], Any]) -> Any:
        if field in self._unsupported:
            return None
        try:
            return call()
        except self.nvml.NVMLError as exc:
            self.failures[field] = exc
            if getattr(exc, "value", None) in _NEVER_AGAIN:
                self._unsupported.add(field)
            return None
        except AttributeError as exc:  # an older nvidia-ml-py without this call
            self.failures[field] = exc
            self._unsupported.add(field)
            return None

    def _throttle_mask(self) -> Optional[int]:
        mask = self.get("clocks_event_reasons",
                         lambda: self.nvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle))
        if mask is None and "clocks_event_reasons" in self._unsupported:
            mask = self.get(
                "throttle_reasons",
                lambda: self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle))
        return None if mask is None else int(mask)

    def read(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        power_mw = self.get("power", lambda: n.nvmlDeviceGetPowerUsage(h))
        energy_mj = self.get("energy", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h))
        util = self.get("utilization", lambda: n.nvmlDeviceGetUtilizationRates(h))
        mem = self.get("memory", lambda: n.nvmlDeviceGetMemoryInfo(h))
        mask = self._throttle_mask()
        return {
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "energy_j": None if energy_mj is None else energy_mj / 1000.0,
            "gpu_util_pct": None if util is None else util.gpu,
            "mem_util_pct": None if util is None else util.memory,
            "mem_used_bytes": None if mem is None else int(mem.used),
            "temp_c": self.get("temperature",
                                lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            "sm_clock_mhz": self.get("sm_clock", lambda: n.nvmlDeviceGetClockInfo(
                h, n.NVML_CLOCK_SM)),
            "throttle_mask": mask,
        }


def gpu_static_info(nvml: Any, handle: Any) -> dict[str, Any]:
    """Name, memory, PCIe link, NVLink links, power limit and clocks of one GPU (None: unknown)."""
    get = GpuReader(nvml, handle).get
    n, h = nvml, handle
    mem = get("memory", lambda: n.nvmlDeviceGetMemoryInfo(h))
    cc = get("cc", lambda: n.nvmlDeviceGetCudaComputeCapability(h))
    limit_mw = get("power_limit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
    name = get("name", lambda: n.nvmlDeviceGetName(h))
    uuid = get("uuid", lambda: n.nvmlDeviceGetUUID(h))
    return {
        "name": None if name is None else text(name),
        "uuid": None if uuid is None else text(uuid),
        "memory_total_bytes": None if mem is None else int(mem.total),
        "compute_capability": None if cc is None else "%d.%d" % tuple(cc),
        "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
        "sm_clock_max_mhz": get("max_sm", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
        "applications_sm_clock_mhz": get(
            "app_sm", lambda: n.nvmlDeviceGetApplicationsClock(h, n.NVML_CLOCK_SM)),
        "pcie_gen_max": get("pcie_gen_max", lambda: n.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "pcie_width_max": get("pcie_width_max", lambda: n.nvmlDeviceGetMaxPcieLinkWidth(h)),
        # The current link drops to a lower generation when the GPU idles.
        "pcie_gen_current": get("pcie_gen", lambda: n.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "pcie_width_current": get("pcie_width", lambda: n.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "nvlink_active_links": nvlink_active_links(nvml, handle),
        "energy_counter": get(
            "energy", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h)) is not None,
    }


def nvlink_active_links(nvml: Any, handle: Any) -> Optional[int]:
    """Active NVLink links, or None when the GPU has no NVLink (PCIe-only boards)."""
    states = nvlink_states(nvml, handle)
    return None if states is None else sum(states)


def nvlink_states(nvml: Any, handle: Any) -> Optional[list[bool]]:
    """Whether each NVLink link is up, link 0 first; None when the GPU has no NVLink. The list
    ends at the first link NVML refuses: nvidia-ml-py 13 counts to 36 links, a GPU has 18."""
    states: list[bool] = []
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            states.append(bool(nvml.nvmlDeviceGetNvLinkState(handle, link)))
        except nvml.NVMLError as exc:
            if link == 0 and getattr(exc, "value", None) in _NEVER_AGAIN:
                return None
            break  # past the last link of this GPU
        except AttributeError:
            return None
    return states


def system_info(nvml: Any) -> dict[str, Any]:
    """Driver, the CUDA version the driver supports, NVML version."""
    def get(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (nvml.NVMLError, AttributeError):
            return None
    cuda = get(nvml.nvmlSystemGetCudaDriverVersion)
    driver = get(nvml.nvmlSystemGetDriverVersion)
    version = get(nvml.nvmlSystemGetNVMLVersion)
    return {
        "driver_version": None if driver is None else text(driver),
        "cuda_driver_version": None if not cuda else "%d.%d" % (cuda // 1000, cuda % 1000 // 10),
        "nvml_version": None if version is None else text(version),
    }


def static_info(nvml: Any = None) -> dict[str, Any]:
    """The environment manifest's `nvidia`: driver, CUDA driver version and every GPU NVML
    lists (`available` False with the `reason` when NVML cannot be used)."""
    module, why = open_nvml(nvml)
    if module is None:
        return {"available": False, "reason": why, "gpus": []}
    try:
        info: dict[str, Any] = {"available": True, "reason": None}
        info.update(system_info(module))
        gpus = []
        for index in range(module.nvmlDeviceGetCount()):
            handle = module.nvmlDeviceGetHandleByIndex(index)
            gpus.append({"nvml_index": index, **gpu_static_info(module, handle)})
        info["gpus"] = gpus
        return info
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "reason": reason(exc), "gpus": []}
    finally:
        close_nvml(module)


def cuda_gpus(environ: Optional[Mapping[str, str]] = None, nvml: Any = None
              ) -> tuple[int, str]:
    """(NVIDIA GPUs CUDA will number, why none: '' when there are some), read without starting
    TensorFlow or CUDA: NVML's GPUs this process may open, narrowed by CUDA_VISIBLE_DEVICES."""
    spec = (os.environ if environ is None else environ).get(cuda_visible.VARIABLE)
    visible = cuda_visible.entries(spec)
    if visible == []:
        return 0, "CUDA_VISIBLE_DEVICES=%r hides every GPU" % spec
    module, why = open_nvml(nvml)
    if module is None:
        return 0, why or "NVML not available"
    try:
        count = cuda_device_count(module, environ)   # not the entries written
    except Exception as exc:  # noqa: BLE001 - a broken driver means no usable GPU
        return 0, reason(exc)
    finally:
        close_nvml(module)
    if count:
        return count, ""
    if visible:
        return 0, ("CUDA_VISIBLE_DEVICES=%r leaves CUDA none of the GPUs NVML lists (its first "
                   "entry matches none, or one repeats)" % spec)
    return 0, "NVML lists no GPU this process may open"


def main(nvml: Any = None) -> int:
    """`python -m tfbench.measure.nvml`: prints how many GPUs CUDA will number (cuda_gpus) and
    nothing else on stdout, for scripts; why none, when none, goes to stderr."""
    number, why = cuda_gpus(nvml=nvml)
    print(number)
    if why:
        print(why, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
