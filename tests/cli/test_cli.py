"""The `tfbench` command's own answers (tfbench.cli): `--version`."""

import os
import subprocess
import sys

import pytest

from helpers import ROOT


@pytest.mark.slow
def test_tfbench_version_prints_the_versions_without_importing_tensorflow(tmp_path):
    code = ("import sys; from tfbench import cli; cli.main(['tfbench', '--version']); "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout.splitlines()
    fields = dict(part.strip().split(" ", 1) for part in out[0].split("|"))
    assert list(fields) == ["tfbench", "TensorFlow", "Keras", "Python"]
    assert fields["tfbench"].startswith("0.1.0") and fields["TensorFlow"][:2] == "2."
    assert out[1] == "False"
