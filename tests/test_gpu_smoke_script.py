"""scripts/gpu_smoke.sh: where no GPU is visible it says so in one line and fails fast."""

import os
import subprocess

import pytest

from helpers import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "gpu_smoke.sh")


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", SCRIPT]).returncode == 0


def test_without_a_gpu_it_fails_with_one_line(tmp_path):
    import tensorflow as tf
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("a GPU is visible: run the script itself")
    env = dict(os.environ, OUT=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(["bash", SCRIPT], env=env, text=True, capture_output=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "results in %s; GPUs visible to TensorFlow: 0" % tmp_path,
        "FAIL no GPU visible to TensorFlow (driver, --gpus all, CUDA_VISIBLE_DEVICES?)"]
