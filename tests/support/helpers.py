"""Helpers for end-to-end tests: run the real CLI in a child (tests/support/zygote.py) or
in-process."""

from __future__ import annotations

import csv
import io
import os
import socket
import sys

import zygote
from fake_pynvml.pynvml import FakeNvml, NVMLError, Ticks  # noqa: F401 - tests import NVMLError from here
from paths import DATA, FAKE_PYNVML_DIR, ROOT, SUPPORT  # noqa: F401 - tests import them from here


def run_cli(args, cwd, timeout=300, env_extra=None, merged=True):
    """Runs `python -m tfbench ARGS` (a fork of tests/support/zygote.py's server); returns (exit
    code, stdout, stderr) or merged output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(env_extra or {})
    proc = zygote.run(args, cwd, env, timeout, merged=merged)
    if merged:
        return proc.returncode, proc.stdout
    return proc.returncode, proc.stdout, proc.stderr


def run_check_script(name: str, *args: str, timeout: float = 300) -> dict:
    """Runs tests/support/NAME (a script that builds TensorFlow state of its own, in a fresh
    process) and returns the JSON of its last `RESULT ` line; fails with its output's tail
    otherwise."""
    import json
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = zygote.run(args, os.getcwd(), env, timeout, script=os.path.join(SUPPORT, name))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def run_inprocess(args, cwd):
    """Runs the benchmark in this process; returns (exit code, emitted lines)."""
    from tfbench.cli import run
    lines: list[str] = []
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = run.run_benchmark(["tfbench"] + list(args), emit=lines.append)
    finally:
        os.chdir(old)
    return code, lines


def csv_rows(text: str) -> list[dict[str, str]]:
    """The rows of CSV text (header first), each {column: text}."""
    return list(csv.DictReader(io.StringIO(text, newline="")))


def read_rows(path) -> list[dict[str, str]]:
    """The rows of the CSV file at `path` (a results CSV, a study's table), each {column: text}."""
    with open(path, newline="") as handle:
        return csv_rows(handle.read())


def only_row(path) -> dict[str, str]:
    """The one row of the CSV file at `path`; fails when it holds none or several."""
    rows = read_rows(path)
    assert len(rows) == 1, "%s holds %d rows, not one" % (path, len(rows))
    return rows[0]


class FakeGpu:
    """A stand-in for tf.config's PhysicalDevice of GPU `index` (and its model, when given)."""

    def __init__(self, index: int = 0, model: str | None = None):
        self.name = "/physical_device:GPU:%d" % index
        self.model = model


def free_ports(n: int) -> list[int]:
    """n TCP ports on 127.0.0.1 that were free a moment ago (for localhost clusters)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class FakeHorovod:
    """horovod.tensorflow as tfbench uses it, for process `rank` of `size` (horovod is not
    installable here). allreduce is the identity; calls are recorded, and each broadcast also
    records the optimizer step it sends."""

    Average = "average"

    def __init__(self, rank: int = 0, size: int = 1, local_rank=None):
        self._rank, self._size = rank, size
        self._local_rank = rank if local_rank is None else local_rank
        self.calls: list = []
        self.broadcast_steps: list = []

    def init(self):
        self.calls.append("init")

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def local_rank(self):
        return self._local_rank

    def allreduce(self, tensor, op=None, device_dense=""):
        import tensorflow as tf
        self.calls.append(("allreduce", op, device_dense))
        return tf.identity(tensor)

    def broadcast_variables(self, variables, root_rank):
        self.calls.append(("broadcast", len(variables), root_rank))
        self.broadcast_steps.append([int(v.numpy()) for v in variables
                                     if getattr(v, "path", "").endswith("/iteration")])


def install_fake_horovod(monkeypatch, **kwargs) -> FakeHorovod:
    """A FakeHorovod importable as horovod.tensorflow for the rest of the test."""
    import types
    hvd = FakeHorovod(**kwargs)
    monkeypatch.setitem(sys.modules, "horovod", types.SimpleNamespace(tensorflow=hvd))
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", hvd)
    return hvd


def a100(uuid: str = "GPU-aaaa", energy: bool = True, nvlinks: int = 12) -> dict:
    """An A100-SXM4-40GB for FakeNvml (tests/support/fake_pynvml), sampled three times by a
    monitor (start, steady_start, end): power, utilization, temperature, SM clock, the clock
    event mask and (with `energy`) the energy counter change between the samples."""
    gpu = {"name": "NVIDIA A100-SXM4-40GB", "uuid": uuid, "cc": [8, 0],
           "pcie": [4, 16, 4, 16, 4], "memory": [30 << 30, 40 << 30],
           "power_mw": [Ticks(60000, 300000, 400000), 400000, None],
           "utilization": [Ticks(0, 100, 100), 40], "temperature": Ticks(35, 50, 60),
           "clocks": {"sm": [Ticks(1410, 1410, 1290), 1410, 1095]},
           "clocks_event_reasons": Ticks(0x1, 0x0, 0x4)}
    if nvlinks:
        gpu["nvlink"] = {"states": [1] * nvlinks}
    if energy:
        gpu["energy_mj"] = Ticks(5_000_000, 6_000_000, 9_500_000)
    return gpu


# CUDA numbers GPUs in PCI bus order under this (tfbench.config.startup_env sets it).
PCI = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def on_bus(uuid: str, bus: int, **extra) -> dict:
    """An a100() at PCI bus `bus`, with `extra` keys (name, mig) over it."""
    return dict(a100(uuid), bus=bus, **extra)


def mig(uuid: str, gi: int, ci: int) -> dict:
    """A MIG instance of an A100 for on_bus(..., mig=[...])."""
    return {"uuid": uuid, "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "gi": gi, "ci": ci}


# The driver FakeNvml's a100 hosts run, as NVML reports it.
A100_DRIVER = {"driver": "550.54.15", "cuda": 12040, "nvml": "12.550.54.15"}


def ticking_clock(step: float = 1.0):
    """A monitor's clock that reads step, 2 * step, ... one tick per sample."""
    import itertools
    counter = itertools.count()
    return lambda: next(counter) * step


def run_without_thread(monitor) -> None:
    """A monitor's start, steady_start and end samples, taken in this thread."""
    monitor.start()
    monitor.mark_steady()
    monitor.stop()


def health_host(name, changes=None):
    """tests/support/data/nvml_health.json's host `name` (a base host with its "changes" applied, then
    `changes`: {NVML index: {key: reading}}) as a FakeNvml."""
    import copy
    import json
    with open(os.path.join(DATA, "nvml_health.json")) as handle:
        hosts = json.load(handle)["hosts"]
    host = copy.deepcopy(hosts[name])
    edits = [host.get("changes") or {}, changes or {}]
    if "base" in host:
        host = dict(copy.deepcopy(hosts[host["base"]]), changes=host["changes"])
    for edit in edits:
        for index, readings in edit.items():
            host["gpus"][int(index)].update(copy.deepcopy(readings))
    return FakeNvml(host["gpus"], system=host["system"])


def environment_record(**virt) -> dict:
    """A captured environment (tfbench.measure.environment.capture's record): a Docker container
    of NVIDIA's TensorFlow image on an 8-core AMD host without a GPU driver; `virt` sets its
    virtualization facts."""
    GB = 1 << 30
    return {
        "tfbench": {"version": "0.1.0", "git_hash": "0123456789abcdef", "git_dirty": True},
        "tensorflow": {"version": "2.21.0", "git_version": "v2.21.0-0-gabc",
                       "build": {"cuda_version": "12.5.1", "cudnn_version": "9"}},
        "keras": {"version": "3.15.1"}, "python": {"version": "3.11.7"},
        "nvidia": {"available": False, "reason": "no NVIDIA driver: NVML library not found"},
        "cpu": {"model": "AMD EPYC 7B13", "logical_cores": 8, "physical_cores": 4,
                "usable_cores": 8},
        "memory": {"total_bytes": 32 * GB},
        "os": {"system": "Linux", "kernel": "6.1.0", "distribution": "Ubuntu 22.04.4 LTS"},
        "virtualization": {"is_vm": False, "hypervisor": None, "cloud": None, **virt},
        "container": {"in_container": True, "runtime": "docker", "nvidia_image": "25.02-tf2"},
        "env_vars": {"TF_GPU_THREAD_MODE": "gpu_private"},
    }


def write_fake_cifar10(directory, per_file: int = 16, seed: int = 0):
    """CIFAR-10's python pickle batches (data_batch_1..5, test_batch) of `per_file` random
    images each in `directory`; returns the test images, NHWC uint8, in file order."""
    import pickle
    import numpy as np
    rng = np.random.default_rng(seed)
    test = None
    for name in ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]:
        images = rng.integers(0, 256, (per_file, 3072)).astype(np.uint8)
        with open(os.path.join(str(directory), name), "wb") as handle:
            pickle.dump({b"data": images, b"labels": list(rng.integers(0, 10, per_file))},
                        handle)
        test = images.reshape(per_file, 3, 32, 32).transpose(0, 2, 3, 1)
    return test
