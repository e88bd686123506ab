"""A stand-in for NVIDIA's pynvml (nvidia-ml-py) over scripted GPUs: every call tfbench makes, to
number and identify GPUs, read their links (tests/support/data/nvml_links.json's readings), their
health (tests/support/data/nvml_health.json's) and what a monitor samples while a run trains.

In this process, FakeNvml(gpus) is the module as an object (tests import it from
tests/support/helpers.py). In another process (scripts/scaling_test.sh) put this directory first
on PYTHONPATH and describe the host in FAKE_NVML_GPUS, a JSON list of GPUs in NVML's index order,
and the driver in FAKE_NVML_SYSTEM (FakeNvml's `system` below).

A GPU is a dict of readings; a key missing: that call answers NOT_SUPPORTED. Every reading is an
int, as nvidia-ml-py returns them (c_uint.value), unless said otherwise.
- Identity: "uuid", "bus" (PCI bus; default the NVML index), "name" (nvmlDeviceGetName), "mig"
  (a GPU in MIG mode: its slices by MIG device index, each {"uuid": "MIG-...", "gi": GPU instance,
  "ci": compute instance} or None for an empty slot), "arch" (nvmlDeviceGetArchitecture), "cc"
  [major, minor] (compute capability).
- Links: "pcie" [current gen, current width, max gen, max width, the GPU's own max gen];
  "nvlink" {"version": nvmlNvlinkVersion_t, "states": [state of link 0, 1, ...], "p2p":
  [NVML_NVLINK_CAP_P2P_SUPPORTED of each link], "remote": [PCI bus of the device at the other
  end of each link], "remote_type": [nvmlNvLinkDeviceType_t of it]} (no "nvlink": a PCIe board;
  a list or the version missing: that call NOT_SUPPORTED). FakeNvml's `topology` is the matrix
  of nvmlDeviceGetTopologyCommonAncestor levels by NVML index.
- Health: "persistence" (nvmlEnableState_t), "ecc" [current, pending], "ecc_errors"
  {"volatile": [corrected, uncorrected], "aggregate": [...]}, "retired_pages" {"single_bit":
  count, "double_bit": count, "pending": 0 or 1}, "remapped_rows" [correctable, uncorrectable,
  pending, failure occurred], "thresholds" {"shutdown", "slowdown"} (°C); "lost": every call on
  the GPU answers GPU_IS_LOST; "errors" {call name: NVML error code} makes that call fail.
- Readings a monitor samples: "power_mw" [usage, enforced limit, default limit] (a None: that
  call NOT_SUPPORTED), "energy_mj" (nvmlDeviceGetTotalEnergyConsumption), "utilization" [gpu %,
  memory %], "memory" [used, total] (bytes), "temperature" (°C), "clocks" {"sm": [current, max,
  applications], "mem": [current, max]} (MHz; a value missing: NOT_SUPPORTED),
  "clocks_event_reasons" (the mask; "clocks_api": "throttle" for a driver without
  nvmlDeviceGetCurrentClocksEventReasons: FUNCTION_NOT_FOUND, read through
  nvmlDeviceGetCurrentClocksThrottleReasons).
Any of these values may be a Ticks: its values one per sample; each nvmlDeviceGetPowerUsage call
(the first reading of a monitor's sample) moves that GPU to its next value, the last one staying.

FakeNvml's `system` holds "driver" (nvmlSystemGetDriverVersion), "cuda" (nvmlSystemGetCudaDriverVersion
and _v2, e.g. 12040), "nvml" (nvmlSystemGetNVMLVersion) and "errors" {call name: code};
`init_error` makes nvmlInit fail with that code. `inits` and `shutdowns` count those calls;
`calls` lists every GPU reading made, as (call name, the GPU's uuid).
"""

import json
import os
import types

NVML_DEVICE_MIG_ENABLE = 1
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_NVLINK_MAX_LINKS = 18

# nvmlErrorString's texts, which nvidia-ml-py's NVMLError prints.
_ERROR_STRINGS = {2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
                  6: "Not Found", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found",
                  13: "Function Not Found", 15: "GPU is lost", 999: "Unknown Error"}


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return _ERROR_STRINGS.get(self.value, "Unknown Error")


class Ticks(list):
    """A reading that changes while a monitor samples: its values, one per sample."""

    def __init__(self, *values):
        super().__init__(values)


class FakeNvml:
    NVMLError = NVMLError
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS

    def __init__(self, gpus, topology=None, system=None, init_error=None):
        self.gpus = [dict(g, bus=g.get("bus", i)) for i, g in enumerate(gpus)]
        self.topology = topology
        self.system = system or {}
        self.init_error = init_error
        self.inits = 0
        self.shutdowns = 0
        self.calls = []
        self._sample = {}   # id(handle) -> index of its current Ticks value

    def _everything(self):
        return self.gpus + [m for g in self.gpus for m in g.get("mig") or [] if m]

    def nvmlInit(self):
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.gpus[index]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for device in self._everything():
            if device["uuid"] == uuid:
                return device
        raise NVMLError(2)   # NVML_ERROR_INVALID_ARGUMENT: not a whole UUID

    def nvmlDeviceGetUUID(self, handle):
        return handle["uuid"]

    def nvmlDeviceGetPciInfo(self, handle):
        bus = handle["bus"]
        return types.SimpleNamespace(domain=0, bus=bus, device=0,
                                     busId=b"00000000:%02X:00.0" % bus)

    def nvmlDeviceGetMigMode(self, handle):
        if "mig" not in handle:
            raise NVMLError(3)   # NVML_ERROR_NOT_SUPPORTED
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        slots = handle["mig"]
        if index >= len(slots) or slots[index] is None:
            raise NVMLError(6)   # NVML_ERROR_NOT_FOUND
        return slots[index]

    def nvmlDeviceGetGpuInstanceId(self, handle):
        return handle["gi"]

    def nvmlDeviceGetComputeInstanceId(self, handle):
        return handle["ci"]

    def nvmlDeviceIsMigDeviceHandle(self, handle):
        return types.SimpleNamespace(value=int("gi" in handle))   # a c_uint, not its value

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        for gpu in self.gpus:
            if any(m is handle for m in gpu.get("mig") or []):
                return gpu
        raise NVMLError(2)

    # One reading of a GPU.
    def _reachable(self, handle, call):
        self.calls.append((call, handle.get("uuid")))
        if handle.get("lost"):
            raise NVMLError(15)   # NVML_ERROR_GPU_IS_LOST
        code = (handle.get("errors") or {}).get(call)
        if code is not None:
            raise NVMLError(int(code))

    def _now(self, handle, value):
        if isinstance(value, Ticks):
            return value[min(max(self._sample.get(id(handle), 0), 0), len(value) - 1)]
        return value

    def _reading(self, handle, key, call, *path):
        """handle[key][path...] at the GPU's current sample; NOT_SUPPORTED where one is missing."""
        self._reachable(handle, call)
        value = handle.get(key)
        for step in path:
            if value is None or (isinstance(step, int) and step >= len(value)) or (
                    isinstance(step, str) and step not in value):
                raise NVMLError(3)
            value = value[step]
        if value is None:
            raise NVMLError(3)
        return self._now(handle, value)

    # Links.
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return int(self._reading(handle, "pcie", "nvmlDeviceGetCurrPcieLinkGeneration", 0))

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return int(self._reading(handle, "pcie", "nvmlDeviceGetCurrPcieLinkWidth", 1))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return int(self._reading(handle, "pcie", "nvmlDeviceGetMaxPcieLinkGeneration", 2))

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return int(self._reading(handle, "pcie", "nvmlDeviceGetMaxPcieLinkWidth", 3))

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle):
        return int(self._reading(handle, "pcie", "nvmlDeviceGetGpuMaxPcieLinkGeneration", 4))

    def _per_link(self, handle, field, link, call):
        readings = self._reading(handle, "nvlink", call, field)
        if link >= len(readings):
            raise NVMLError(2)   # NVML_ERROR_INVALID_ARGUMENT: past the last link
        return int(readings[link])

    def nvmlDeviceGetNvLinkState(self, handle, link):
        return self._per_link(handle, "states", link, "nvmlDeviceGetNvLinkState")

    def nvmlDeviceGetNvLinkVersion(self, handle, link):
        return int(self._reading(handle, "nvlink", "nvmlDeviceGetNvLinkVersion", "version"))

    def nvmlDeviceGetNvLinkCapability(self, handle, link, capability):
        assert capability == 0   # NVML_NVLINK_CAP_P2P_SUPPORTED
        return self._per_link(handle, "p2p", link, "nvmlDeviceGetNvLinkCapability")

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        bus = self._per_link(handle, "remote", link, "nvmlDeviceGetNvLinkRemotePciInfo")
        return types.SimpleNamespace(domain=0, bus=bus, device=0)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return self._per_link(handle, "remote_type", link, "nvmlDeviceGetNvLinkRemoteDeviceType")

    def nvmlDeviceGetArchitecture(self, handle):
        return int(self._reading(handle, "arch", "nvmlDeviceGetArchitecture"))

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return tuple(int(x) for x in self._reading(handle, "cc",
                                                   "nvmlDeviceGetCudaComputeCapability"))

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        if self.topology is None:
            raise NVMLError(3)
        return int(self.topology[self.gpus.index(a)][self.gpus.index(b)])

    # The driver.
    def _system(self, key, call):
        code = (self.system.get("errors") or {}).get(call)
        if code is not None:
            raise NVMLError(int(code))
        if key not in self.system:
            raise NVMLError(3)
        return self.system[key]

    def nvmlSystemGetDriverVersion(self):
        return str(self._system("driver", "nvmlSystemGetDriverVersion"))

    def nvmlSystemGetCudaDriverVersion(self):
        return int(self._system("cuda", "nvmlSystemGetCudaDriverVersion"))

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return int(self._system("cuda", "nvmlSystemGetCudaDriverVersion_v2"))

    def nvmlSystemGetNVMLVersion(self):
        return str(self._system("nvml", "nvmlSystemGetNVMLVersion")).encode()

    # Health.
    def nvmlDeviceGetName(self, handle):
        return str(self._reading(handle, "name", "nvmlDeviceGetName"))

    def nvmlDeviceGetPersistenceMode(self, handle):
        return int(self._reading(handle, "persistence", "nvmlDeviceGetPersistenceMode"))

    def nvmlDeviceGetEccMode(self, handle):
        return [int(x) for x in self._reading(handle, "ecc", "nvmlDeviceGetEccMode")]

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        assert error_type in (0, 1) and counter_type in (0, 1)
        return int(self._reading(handle, "ecc_errors", "nvmlDeviceGetTotalEccErrors",
                                 ("volatile", "aggregate")[counter_type], error_type))

    def nvmlDeviceGetRetiredPages(self, handle, cause):
        count = int(self._reading(handle, "retired_pages", "nvmlDeviceGetRetiredPages",
                                  ("single_bit", "double_bit")[cause]))
        return [0x2000 * (i + 1) for i in range(count)]   # hardware page addresses

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        return int(self._reading(handle, "retired_pages",
                                 "nvmlDeviceGetRetiredPagesPendingStatus", "pending"))

    def nvmlDeviceGetRemappedRows(self, handle):
        rows = self._reading(handle, "remapped_rows", "nvmlDeviceGetRemappedRows")
        return tuple(int(x) for x in rows)

    def nvmlDeviceGetTemperatureThreshold(self, handle, threshold):
        name = {0: "shutdown", 1: "slowdown"}[threshold]   # NVML_TEMPERATURE_THRESHOLD_*
        return int(self._reading(handle, "thresholds", "nvmlDeviceGetTemperatureThreshold", name))

    # What a monitor samples.
    def nvmlDeviceGetPowerUsage(self, handle):
        self._sample[id(handle)] = self._sample.get(id(handle), -1) + 1
        return int(self._reading(handle, "power_mw", "nvmlDeviceGetPowerUsage", 0))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return int(self._reading(handle, "power_mw", "nvmlDeviceGetEnforcedPowerLimit", 1))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return int(self._reading(handle, "power_mw",
                                 "nvmlDeviceGetPowerManagementDefaultLimit", 2))

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int(self._reading(handle, "energy_mj", "nvmlDeviceGetTotalEnergyConsumption"))

    def nvmlDeviceGetUtilizationRates(self, handle):
        call = "nvmlDeviceGetUtilizationRates"
        return types.SimpleNamespace(gpu=int(self._reading(handle, "utilization", call, 0)),
                                     memory=int(self._reading(handle, "utilization", call, 1)))

    def nvmlDeviceGetMemoryInfo(self, handle):
        call = "nvmlDeviceGetMemoryInfo"
        used = int(self._reading(handle, "memory", call, 0))
        total = int(self._reading(handle, "memory", call, 1))
        return types.SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == NVML_TEMPERATURE_GPU
        return int(self._reading(handle, "temperature", "nvmlDeviceGetTemperature"))

    def _clock(self, handle, clock_type, which, call):
        domain = {NVML_CLOCK_SM: "sm", NVML_CLOCK_MEM: "mem"}[clock_type]
        return int(self._reading(handle, "clocks", call, domain, which))

    def nvmlDeviceGetClockInfo(self, handle, clock_type):
        return self._clock(handle, clock_type, 0, "nvmlDeviceGetClockInfo")

    def nvmlDeviceGetMaxClockInfo(self, handle, clock_type):
        return self._clock(handle, clock_type, 1, "nvmlDeviceGetMaxClockInfo")

    def nvmlDeviceGetApplicationsClock(self, handle, clock_type):
        return self._clock(handle, clock_type, 2, "nvmlDeviceGetApplicationsClock")

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        call = "nvmlDeviceGetCurrentClocksEventReasons"
        if handle.get("clocks_api") == "throttle":
            self._reachable(handle, call)
            raise NVMLError(13)   # NVML_ERROR_FUNCTION_NOT_FOUND: a driver before R535
        return int(self._reading(handle, "clocks_event_reasons", call))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return int(self._reading(handle, "clocks_event_reasons",
                                 "nvmlDeviceGetCurrentClocksThrottleReasons"))


_HOST = FakeNvml(json.loads(os.environ.get("FAKE_NVML_GPUS", "[]")),
                 system=json.loads(os.environ.get("FAKE_NVML_SYSTEM", "{}")))
globals().update({name: getattr(_HOST, name) for name in dir(FakeNvml)
                  if name.startswith("nvml")})
