"""A stand-in for NVIDIA's pynvml (nvidia-ml-py) over scripted GPUs: the calls tfbench makes to
number and identify GPUs, nothing else.

In another process (scripts/scaling_test.sh) put this directory first on PYTHONPATH and describe
the host in FAKE_NVML_GPUS, a JSON list of GPUs in NVML's index order:
  {"uuid": "GPU-...", "bus": 1, "mig": [{"uuid": "MIG-...", "gi": 1, "ci": 0}, ...]}
("mig" only for a GPU in MIG mode). In this process, FakeNvml(gpus) is the same module as an
object (tests/helpers.py: fake_nvml).
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

    def __init__(self, gpus):
        self.gpus = [dict(g, bus=g.get("bus", i)) for i, g in enumerate(gpus)]

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


_HOST = FakeNvml(json.loads(os.environ.get("FAKE_NVML_GPUS", "[]")))
globals().update({name: getattr(_HOST, name) for name in dir(FakeNvml)
                  if name.startswith("nvml")})
