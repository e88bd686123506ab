"""Helpers for end-to-end tests: run the real CLI in a child (tests/support/zygote.py) or
in-process."""

from __future__ import annotations

import os
import socket
import sys

import zygote
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


def fake_nvml(gpus, **kwargs):
    """tests/support/fake_pynvml's FakeNvml over `gpus` (and its `topology`), loaded
    without shadowing the real pynvml."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "fake_pynvml", os.path.join(FAKE_PYNVML_DIR, "pynvml.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FakeNvml(gpus, **kwargs)


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
    return fake_nvml(host["gpus"], system=host["system"])


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
