"""scripts/scaling_test.sh: device counts and the sweep command it runs."""

import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


# nvidia-smi -L on a 4-GPU host, one GPU in MIG mode (the format of driver 470 and later).
SMI_LISTING = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0a0a0a0a-1111-2222-3333-444444444444)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-1b1b1b1b-1111-2222-3333-444444444444)
GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-2c2c2c2c-1111-2222-3333-444444444444)
  MIG 3g.20gb     Device  0: (UUID: MIG-9d9d9d9d-1111-2222-3333-444444444444)
GPU 3: NVIDIA A100-SXM4-40GB (UUID: GPU-3d3d3d3d-1111-2222-3333-444444444444)
"""


@pytest.fixture
def fake_smi(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat <<'EOF'\n%sEOF\n" % SMI_LISTING)
    smi.chmod(0o755)
    return str(bin_dir)


def run_counting(bin_dir, cuda_visible_devices):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TFBENCH_NUM_GPUS", "CUDA_VISIBLE_DEVICES")}
    env.update(TFBENCH="echo", PATH=bin_dir + os.pathsep + env["PATH"])
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    return subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("visible, counts", [
    (None, "1,2,4"),
    ("0,1", "1,2"),
    ("3", "1"),
    ("2, 0, 1", "1,2,3"),
    ("GPU-3d3d3d3d-1111-2222-3333-444444444444,GPU-0a0a", "1,2"),
    ("MIG-9d9d9d9d-1111-2222-3333-444444444444", "1"),
    ("0,1,7,2", "1,2"),              # CUDA stops at the first index it does not have
    ("1,GPU-ffff,2", "1"),           # ... and at a UUID that names no GPU
])
def test_counts_the_gpus_cuda_visible_devices_leaves(fake_smi, visible, counts):
    proc = run_counting(fake_smi, visible)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[2] == "--sweep=num_gpus=%s" % counts


@pytest.mark.parametrize("visible", ["", "-1", "7", "GPU-ffff"])
def test_cuda_visible_devices_hiding_every_gpu_is_a_clear_error(fake_smi, visible):
    proc = run_counting(fake_smi, visible)
    assert proc.returncode == 2
    assert ("no GPU found visible with CUDA_VISIBLE_DEVICES='%s'; set TFBENCH_NUM_GPUS=N"
            % visible) in proc.stderr
