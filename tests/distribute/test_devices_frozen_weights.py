"""oneDNN frozen-weight caching: on for forward-only CPU processes, refused when weights change."""

import json
import os

import pytest

from helpers import run_cli
from tfbench.distribute import devices
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings

pytestmark = pytest.mark.slow

ENV = devices.FROZEN_WEIGHTS_ENV


@pytest.fixture
def params():
    return make_settings({"model": "trivial"})


def test_forward_only_on_cpu_sets_it(monkeypatch, params):
    monkeypatch.delenv(ENV, raising=False)
    devices.set_environment(params, "cpu", weights_change=False)
    assert os.environ[ENV] == "1"


def test_an_explicit_zero_is_kept(monkeypatch, params):
    monkeypatch.setenv(ENV, "0")
    devices.set_environment(params, "cpu", weights_change=False)
    assert os.environ[ENV] == "0"


def test_training_leaves_it_unset(monkeypatch, params):
    monkeypatch.delenv(ENV, raising=False)
    devices.set_environment(params, "cpu", weights_change=True)
    assert ENV not in os.environ


def test_gpu_runs_leave_it_alone(monkeypatch, params):
    monkeypatch.setattr(os, "environ", dict(os.environ))   # the GPU variables stay here
    monkeypatch.delenv(ENV, raising=False)
    devices.set_environment(params, "gpu", weights_change=False)
    assert ENV not in os.environ
    monkeypatch.setenv(ENV, "1")
    devices.set_environment(params, "gpu", weights_change=True)   # oneDNN is not on the GPU path


@pytest.mark.parametrize("value", ["1", "true", "True"])
def test_training_with_it_set_is_refused(monkeypatch, params, value):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(UsageError, match="makes oneDNN reuse the first weights it sees, but "
                                         "this run changes them; unset it, or set it to 0"):
        devices.set_environment(params, "cpu", weights_change=True)


def _env_without_it():
    return {k: v for k, v in os.environ.items() if k != ENV}


def test_forward_only_process_records_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    code, out = run_cli(["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
                         "--num_batches=3", "--num_warmup_batches=1", "--forward_only",
                         "--monitor_interval_ms=0", "--csv_file="], tmp_path)
    assert code == 0, out
    (name,) = os.listdir(tmp_path / "tfbench_runs")
    manifest = json.load(open(tmp_path / "tfbench_runs" / name))
    assert manifest["environment"]["before"]["env_vars"][ENV] == "1"


def test_training_process_with_it_set_fails_with_one_line(tmp_path):
    code, out = run_cli(["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
                         "--num_batches=2", "--num_warmup_batches=0", "--csv_file=",
                         "--json_dir="], tmp_path, env_extra={ENV: "1"})
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.startswith("tfbench: error:")]
    assert len(errors) == 1 and ENV in errors[0]
    assert "Traceback" not in out
