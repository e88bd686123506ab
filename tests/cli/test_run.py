"""`tfbench` (`tfbench run`, tfbench.cli.run): what a run refuses before TensorFlow starts."""

import os
import subprocess
import sys

import pytest

from helpers import ROOT


@pytest.mark.slow
def test_an_unknown_model_is_refused_in_one_line_before_tensorflow_is_imported(tmp_path):
    code = ("import sys; from tfbench import cli; c = cli.main(['tfbench', '--model=resnet51', "
            "'--csv_file=', '--json_dir=']); print(c, 'tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert proc.stdout.split() == ["2", "False"], proc.stderr
    from tfbench.models import catalog   # the whole list, counted from the registry itself
    assert proc.stderr.splitlines() == [
        "tfbench: error: Invalid model name 'resnet51': did you mean resnet56, resnet50 or "
        "resnet152? `tfbench models` lists all %d models" % len(catalog.names())]
