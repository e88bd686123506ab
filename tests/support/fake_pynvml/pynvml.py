"""A stand-in for NVIDIA's pynvml (nvidia-ml-py) over scripted GPUs: the calls tfbench makes to
number and identify GPUs, to read their links (tests/support/data/nvml_links.json's readings) and their
health (tests/support/data/nvml_health.json's).

In another process (scripts/scaling_test.sh) put this directory first on PYTHONPATH and describe
the host in FAKE_NVML_GPUS, a JSON list of GPUs in NVML's index order (and the driver in
FAKE_NVML_SYSTEM, as FakeNvml's `system` below):
  {"uuid": "GPU-...", "bus": 1, "mig": [{"uuid": "MIG-...", "gi": 1, "ci": 0}, ...]}
("mig" only for a GPU in MIG mode). In this process, FakeNvml(gpus) is the same module as an
object (tests/support/helpers.py: fake_nvml).

Links: a GPU's "pcie" is [current gen, current width, max gen, max width, the GPU's own max gen]
and "nvlink" {"version": nvmlNvlinkVersion_t, "states": [state of link 0, 1, ...], "p2p":
[NVML_NVLINK_CAP_P2P_SUPPORTED of each link], "remote": [PCI bus of the device at the other end
of each link], "remote_type": [nvmlNvLinkDeviceType_t of it]} (no "nvlink": NOT_SUPPORTED, as on
PCIe boards; a list missing: that call NOT_SUPPORTED); "arch" is nvmlDeviceGetArchitecture's
value and "cc" [major, minor] the compute capability; FakeNvml's `topology` is the matrix of
nvmlDeviceGetTopologyCommonAncestor levels by NVML index. Every reading is an int, as
nvidia-ml-py returns them (c_uint.value).

Health (tests/support/data/nvml_health.json's readings; a key missing: that call NOT_SUPPORTED):
"name" (nvmlDeviceGetName), "persistence" (nvmlEnableState_t), "ecc" [current, pending],
"ecc_errors" {"volatile": [corrected, uncorrected], "aggregate": [...]}, "retired_pages"
{"single_bit": count, "double_bit": count, "pending": 0 or 1}, "remapped_rows" [correctable,
uncorrectable, pending, failure occurred], "clocks_event_reasons" (the mask; "clocks_api":
"throttle" for a driver without nvmlDeviceGetCurrentClocksEventReasons: FUNCTION_NOT_FOUND),
"clocks" {"sm": [current, max], "mem": [current, max]} (MHz), "temperature" and "thresholds"
{"shutdown", "slowdown"} (°C), "power_mw" [usage, enforced limit, default limit]; "lost": every
call on the GPU answers GPU_IS_LOST; "errors" {call name: NVML error code} makes that call fail.
FakeNvml's `system` holds "driver" (nvmlSystemGetDriverVersion) and "cuda"
(nvmlSystemGetCudaDriverVersion_v2, e.g. 12040).
"""

import json
import os
import types

NVML_DEVICE_MIG_ENABLE = 1


# nvmlErrorString's texts, which nvidia-ml-py's NVMLError prints.
_ERROR_STRINGS = {2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
                  6: "Not Found", 13: "Function Not Found", 15: "GPU is lost",
                  999: "Unknown Error"}


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return _ERROR_STRINGS.get(self.value, "Unknown Error")


class FakeNvml:
    NVMLError = NVMLError
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE

    def __init__(self, gpus, topology=None, system=None):
        self.gpus = [dict(g, bus=g.get("bus", i)) for i, g in enumerate(gpus)]
        self.topology = topology
        self.system = system or {}

    def _everything(self):
        return self.gpus + [m for g in self.gpus for m in g.get("mig") or []]

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

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
        return types.SimpleNamespace(domain=0, bus=handle["bus"], device=0)

    def nvmlDeviceGetMigMode(self, handle):
        if "mig" not in handle:
            raise NVMLError(3)   # NVML_ERROR_NOT_SUPPORTED
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        if index >= len(handle["mig"]):
            raise NVMLError(6)   # NVML_ERROR_NOT_FOUND
        return handle["mig"][index]

    def nvmlDeviceGetGpuInstanceId(self, handle):
        return handle["gi"]

    def nvmlDeviceGetComputeInstanceId(self, handle):
        return handle["ci"]

    def _pcie(self, handle, field):
        self._reachable(handle)
        if "pcie" not in handle:
            raise NVMLError(3)
        return int(handle["pcie"][field])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return self._pcie(handle, 0)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return self._pcie(handle, 1)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return self._pcie(handle, 2)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return self._pcie(handle, 3)

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle):
        return self._pcie(handle, 4)

    def nvmlDeviceGetNvLinkState(self, handle, link):
        self._reachable(handle)
        if "nvlink" not in handle:
            raise NVMLError(3)   # NVML_ERROR_NOT_SUPPORTED: no NVLink on this board
        states = handle["nvlink"]["states"]
        if link >= len(states):
            raise NVMLError(2)   # NVML_ERROR_INVALID_ARGUMENT: past the last link
        return int(states[link])

    def nvmlDeviceGetNvLinkVersion(self, handle, link):
        if "nvlink" not in handle:
            raise NVMLError(3)
        return int(handle["nvlink"]["version"])

    def _per_link(self, handle, field, link):
        readings = (handle.get("nvlink") or {}).get(field)
        if readings is None:
            raise NVMLError(3)
        if link >= len(readings):
            raise NVMLError(2)
        return readings[link]

    def nvmlDeviceGetNvLinkCapability(self, handle, link, capability):
        assert capability == 0   # NVML_NVLINK_CAP_P2P_SUPPORTED
        return int(self._per_link(handle, "p2p", link))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        bus = int(self._per_link(handle, "remote", link))
        return types.SimpleNamespace(domain=0, bus=bus, device=0)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return int(self._per_link(handle, "remote_type", link))

    def nvmlDeviceGetArchitecture(self, handle):
        if "arch" not in handle:
            raise NVMLError(3)
        return int(handle["arch"])

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        if "cc" not in handle:
            raise NVMLError(3)
        return tuple(int(x) for x in handle["cc"])

    def _pair(self, matrix, a, b):
        if matrix is None:
            raise NVMLError(3)
        return int(matrix[self.gpus.index(a)][self.gpus.index(b)])

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self._pair(self.topology, a, b)


    # Health readings.
    def _reachable(self, handle, call=None):
        if handle.get("lost"):
            raise NVMLError(15)   # NVML_ERROR_GPU_IS_LOST
        code = (handle.get("errors") or {}).get(call)
        if code is not None:
            raise NVMLError(int(code))

    def _reading(self, handle, key, call):
        self._reachable(handle, call)
        if key not in handle:
            raise NVMLError(3)
        return handle[key]

    def _system(self, key, call):
        code = (self.system.get("errors") or {}).get(call)
        if code is not None:
            raise NVMLError(int(code))
        if key not in self.system:
            raise NVMLError(3)
        return self.system[key]

    def nvmlSystemGetDriverVersion(self):
        return str(self._system("driver", "nvmlSystemGetDriverVersion"))

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return int(self._system("cuda", "nvmlSystemGetCudaDriverVersion_v2"))

    def nvmlDeviceGetName(self, handle):
        return str(self._reading(handle, "name", "nvmlDeviceGetName"))

    def nvmlDeviceGetPersistenceMode(self, handle):
        return int(self._reading(handle, "persistence", "nvmlDeviceGetPersistenceMode"))

    def nvmlDeviceGetEccMode(self, handle):
        return [int(x) for x in self._reading(handle, "ecc", "nvmlDeviceGetEccMode")]

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        counts = self._reading(handle, "ecc_errors", "nvmlDeviceGetTotalEccErrors")
        assert error_type in (0, 1) and counter_type in (0, 1)
        return int(counts[("volatile", "aggregate")[counter_type]][error_type])

    def nvmlDeviceGetRetiredPages(self, handle, cause):
        pages = self._reading(handle, "retired_pages", "nvmlDeviceGetRetiredPages")
        count = int(pages[("single_bit", "double_bit")[cause]])
        return [0x2000 * (i + 1) for i in range(count)]   # hardware page addresses

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        pages = self._reading(handle, "retired_pages", "nvmlDeviceGetRetiredPagesPendingStatus")
        return int(pages["pending"])

    def nvmlDeviceGetRemappedRows(self, handle):
        rows = self._reading(handle, "remapped_rows", "nvmlDeviceGetRemappedRows")
        return tuple(int(x) for x in rows)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        if handle.get("clocks_api") == "throttle":
            self._reachable(handle)
            raise NVMLError(13)   # NVML_ERROR_FUNCTION_NOT_FOUND: a driver before R535
        return int(self._reading(handle, "clocks_event_reasons",
                                 "nvmlDeviceGetCurrentClocksEventReasons"))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return int(self._reading(handle, "clocks_event_reasons",
                                 "nvmlDeviceGetCurrentClocksThrottleReasons"))

    def _clock(self, handle, clock_type, which, call):
        clocks = self._reading(handle, "clocks", call)
        domain = {1: "sm", 2: "mem"}[clock_type]   # NVML_CLOCK_SM, NVML_CLOCK_MEM
        if domain not in clocks:
            raise NVMLError(3)
        return int(clocks[domain][which])

    def nvmlDeviceGetClockInfo(self, handle, clock_type):
        return self._clock(handle, clock_type, 0, "nvmlDeviceGetClockInfo")

    def nvmlDeviceGetMaxClockInfo(self, handle, clock_type):
        return self._clock(handle, clock_type, 1, "nvmlDeviceGetMaxClockInfo")

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == 0   # NVML_TEMPERATURE_GPU
        return int(self._reading(handle, "temperature", "nvmlDeviceGetTemperature"))

    def nvmlDeviceGetTemperatureThreshold(self, handle, threshold):
        limits = self._reading(handle, "thresholds", "nvmlDeviceGetTemperatureThreshold")
        name = {0: "shutdown", 1: "slowdown"}[threshold]   # NVML_TEMPERATURE_THRESHOLD_*
        if name not in limits:
            raise NVMLError(3)
        return int(limits[name])

    def _power(self, handle, which, call):
        readings = self._reading(handle, "power_mw", call)
        if readings[which] is None:
            raise NVMLError(3)
        return int(readings[which])

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._power(handle, 0, "nvmlDeviceGetPowerUsage")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._power(handle, 1, "nvmlDeviceGetEnforcedPowerLimit")

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return self._power(handle, 2, "nvmlDeviceGetPowerManagementDefaultLimit")

    def nvmlDeviceIsMigDeviceHandle(self, handle):
        return types.SimpleNamespace(value=int("gi" in handle))   # a c_uint, not its value

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        for gpu in self.gpus:
            if any(m is handle for m in gpu.get("mig") or []):
                return gpu
        raise NVMLError(2)


_HOST = FakeNvml(json.loads(os.environ.get("FAKE_NVML_GPUS", "[]")),
                system=json.loads(os.environ.get("FAKE_NVML_SYSTEM", "{}")))
globals().update({name: getattr(_HOST, name) for name in dir(FakeNvml)
                  if name.startswith("nvml")})
