"""CUDA_DEVICE_ORDER=PCI_BUS_ID and TF_CPP_MIN_LOG_LEVEL=1 are set before TensorFlow starts,
inherited, and recorded."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT
from tfbench.config import startup_env
from tfbench.children import process as child_process

pytestmark = pytest.mark.slow


BOTH = ["CUDA_DEVICE_ORDER", "TF_CPP_MIN_LOG_LEVEL"]


def test_set_where_the_user_has_not_and_marked():
    env = {}
    assert startup_env.apply(env) == BOTH
    assert env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "TF_CPP_MIN_LOG_LEVEL": "1",
                   "TFBENCH_SET_ENV": "CUDA_DEVICE_ORDER,TF_CPP_MIN_LOG_LEVEL"}
    assert startup_env.apply(env) == [] and startup_env.set_by_tfbench(env) == BOTH


def test_the_users_value_is_kept_and_not_marked():
    env = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    assert startup_env.apply(env) == ["TF_CPP_MIN_LOG_LEVEL"]
    assert env["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    assert startup_env.set_by_tfbench(env) == ["TF_CPP_MIN_LOG_LEVEL"]


def _python(code, env):
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, text=True,
                          capture_output=True, timeout=120)


def _clean_env(**extra):
    """This environment without what tfbench sets at start-up (and its record of it)."""
    env = {k: v for k, v in os.environ.items()
           if k not in BOTH + [startup_env.SET_BY_TFBENCH]}
    env.update(PYTHONPATH=ROOT, **extra)
    return env


def test_the_entry_point_sets_it_before_tensorflow_is_imported():
    # What `python -m tfbench` and the console scripts run, up to the first TensorFlow import.
    code = ("import sys, os\n"
            "from tfbench import cli\n"
            "assert 'tensorflow' not in sys.modules\n"
            "cli.main = lambda argv: print(os.environ.get('CUDA_DEVICE_ORDER'),\n"
            "                              'tensorflow' in sys.modules) or 0\n"
            "cli.entry_point()\n")
    proc = _python(code, _clean_env(TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["PCI_BUS_ID", "False"]


def test_every_variable_the_entry_point_sets_is_named_as_tfbenchs():
    # Whatever the entry point adds to the environment before the command runs (and so before
    # TensorFlow starts), set_by_tfbench names: no variable set beside startup_env's list.
    code = ("import json, os\n"
            "from tfbench import cli\n"
            "from tfbench.config import startup_env\n"
            "before = dict(os.environ)\n"
            "cli.main = lambda argv: print(json.dumps([\n"
            "    sorted(k for k in os.environ if os.environ[k] != before.get(k)),\n"
            "    startup_env.set_by_tfbench()])) or 0\n"
            "cli.entry_point()\n")
    proc = _python(code, _clean_env())
    assert proc.returncode == 0, proc.stderr
    changed, named = json.loads(proc.stdout)
    assert changed == sorted(BOTH + [startup_env.SET_BY_TFBENCH])
    assert sorted(named) == BOTH


def test_the_manifest_records_that_tfbench_set_it(tmp_path):
    # `tfbench env` lists TF_CPP_MIN_LOG_LEVEL: its set_by_tfbench names it too.
    code, env = "from tfbench import cli; cli.entry_point()", _clean_env()
    for user, value, by_tfbench in [(None, "PCI_BUS_ID", BOTH),
                                    ("FASTEST_FIRST", "FASTEST_FIRST", [])]:
        if user:
            env.update(CUDA_DEVICE_ORDER=user, TF_CPP_MIN_LOG_LEVEL="2")
        proc = subprocess.run([sys.executable, "-c", code, "env", "--format=json"], env=env,
                              cwd=tmp_path, text=True, capture_output=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        manifest = json.loads(proc.stdout)
        assert manifest["env_vars"]["CUDA_DEVICE_ORDER"] == value
        assert manifest["env_vars"]["TF_CPP_MIN_LOG_LEVEL"] == ("2" if user else "1")
        assert manifest["set_by_tfbench"] == by_tfbench


def test_sweep_children_inherit_it(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "environ", _clean_env())
    startup_env.apply()     # what the sweep's own entry point did
    log = tmp_path / "child.log"
    child = [sys.executable, "-c", "import os; print(os.environ.get('CUDA_DEVICE_ORDER'), "
             "os.environ.get('TFBENCH_SET_ENV'))"]
    assert child_process.run_child(child, str(log)).exit_code == 0
    assert log.read_text().split() == ["PCI_BUS_ID", "CUDA_DEVICE_ORDER,TF_CPP_MIN_LOG_LEVEL"]
