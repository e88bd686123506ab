"""A stand-in for NVIDIA's pynvml (nvidia-ml-py) over scripted GPUs: the calls tfbench makes to
number and identify GPUs, and to read their links (tests/data/nvml_links.json's readings).

In another process (scripts/scaling_test.sh) put this directory first on PYTHONPATH and describe
the host in FAKE_NVML_GPUS, a JSON list of GPUs in NVML's index order:
  {"uuid": "GPU-...", "bus": 1, "mig": [{"uuid": "MIG-...", "gi": 1, "ci": 0}, ...]}
("mig" only for a GPU in MIG mode). In this process, FakeNvml(gpus) is the same module as an
object (tests/helpers.py: fake_nvml).

Links: a GPU's "pcie" is [current gen, current width, max gen, max width, the GPU's own max gen]
and "nvlink" {"version": nvmlNvlinkVersion_t, "states": [state of link 0, 1, ...], "p2p":
[NVML_NVLINK_CAP_P2P_SUPPORTED of each link], "remote": [PCI bus of the device at the other end
of each link], "remote_type": [nvmlNvLinkDeviceType_t of it]} (no "nvlink": NOT_SUPPORTED, as on
PCIe boards; a list missing: that call NOT_SUPPORTED); "arch" is nvmlDeviceGetArchitecture's
value and "cc" [major, minor] the compute capability; FakeNvml's `topology` is the matrix of
nvmlDeviceGetTopologyCommonAncestor levels by NVML index. Every reading is an int, as
nvidia-ml-py returns them (c_uint.value).
"""

import json
import os
import types

NVML_DEVICE_MIG_ENABLE = 1


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value


class FakeNvml:
    NVMLError = NVMLError
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE

    def __init__(self, gpus, topology=None):
        self.gpus = [dict(g, bus=g.get("bus", i)) for i, g in enumerate(gpus)]
        self.topology = topology

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


_HOST = FakeNvml(json.loads(os.environ.get("FAKE_NVML_GPUS", "[]")))
globals().update({name: getattr(_HOST, name) for name in dir(FakeNvml)
                  if name.startswith("nvml")})
