"""scripts/scaling_test.sh: device counts and the sweep command it runs."""

import json
import os
import subprocess

import pytest

from paths import FAKE_PYNVML_DIR, ROOT as REPO

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(REPO, "scripts", "scaling_test.sh")


def run(gpus, *args):
    env = dict(os.environ, TFBENCH="echo", TFBENCH_NUM_GPUS=str(gpus))
    return subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("gpus, counts", [(1, "1"), (2, "1,2"), (4, "1,2,4"), (6, "1,2,4,6"),
                                          (8, "1,2,4,8"), (16, "1,2,4,8,16")])
def test_counts_from_one_to_all(gpus, counts):
    proc = run(gpus)
    assert proc.returncode == 0
    assert proc.stdout.split() == [
        "sweep", "--flagfile=%s/flags/scaling_study.flags" % REPO,
        "--sweep=num_gpus=%s" % counts, "--scaling=weak"]


def test_strong_and_passthrough_flags():
    proc = run(4, "--model=resnet50", "--strong", "--batch_size=256")
    assert proc.stdout.split()[2:] == ["--sweep=num_gpus=1,2,4", "--scaling=strong",
                                       "--model=resnet50", "--batch_size=256"]


def test_no_gpu_is_a_clear_error():
    proc = run(0)
    assert proc.returncode == 2
    assert "no GPU found; set TFBENCH_NUM_GPUS=N" in proc.stderr


# A 4-GPU host as NVML lists it (tests/support/fake_pynvml), one GPU in MIG mode with one slice: the
# script counts GPUs with tfbench's own reader of CUDA_VISIBLE_DEVICES
# (tfbench.measure.cuda_visible, whose rules test_cuda_visible.py pins).
HOST = [
    {"uuid": "GPU-0a0a0a0a-1111-2222-3333-444444444444"},
    {"uuid": "GPU-1b1b1b1b-1111-2222-3333-444444444444"},
    {"uuid": "GPU-2c2c2c2c-1111-2222-3333-444444444444",
     "mig": [{"uuid": "MIG-9d9d9d9d-1111-2222-3333-444444444444", "gi": 1, "ci": 0}]},
    {"uuid": "GPU-3d3d3d3d-1111-2222-3333-444444444444"},
]


def run_counting(cuda_visible_devices, host=HOST):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TFBENCH_NUM_GPUS", "CUDA_VISIBLE_DEVICES")}
    env.update(TFBENCH="echo", FAKE_NVML_GPUS=json.dumps(host),
               PYTHONPATH=os.pathsep.join([FAKE_PYNVML_DIR] + [
                   p for p in [env.get("PYTHONPATH")] if p]))
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    return subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("visible, counts", [
    (None, "1,2,4"),
    ("0,1", "1,2"),
    ("3", "1"),
    (" 2, 0,1gpu", "1,2,3"),         # ordinals read as strtoul reads them
    ("GPU-3d3d3d3d-1111-2222-3333-444444444444,GPU-0a0a", "1,2"),
    ("MIG-9d9d9d9d-1111-2222-3333-444444444444", "1"),
    ("0,1,7,2", "1,2"),              # CUDA stops at the first index it does not have
    ("1,x,2", "1"),                  # ... and at an entry that is no index, not skipping it
    ("1,GPU-0a0a,2", "1"),           # ... and at an entry of another form
])
def test_counts_the_gpus_cuda_visible_devices_leaves(visible, counts):
    proc = run_counting(visible)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[2] == "--sweep=num_gpus=%s" % counts


@pytest.mark.parametrize("visible", ["", "-1", "7", "GPU-ffff", "1,1"])
def test_cuda_visible_devices_hiding_every_gpu_is_a_clear_error(visible):
    proc = run_counting(visible)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "scaling_test.sh: no GPU found visible with CUDA_VISIBLE_DEVICES='%s'; set "
        "TFBENCH_NUM_GPUS=N (with --device=cpu for N logical CPU devices)" % visible]


def test_no_driver_counts_no_gpu():
    proc = run_counting(None, host=[])
    assert proc.returncode == 2 and "no GPU found; set TFBENCH_NUM_GPUS=N" in proc.stderr
