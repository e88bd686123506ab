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
