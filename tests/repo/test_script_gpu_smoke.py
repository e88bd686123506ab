"""scripts/gpu_smoke.sh: where no GPU is visible it says so in one line and fails fast; inside
NVIDIA's container it installs as the README says; its TF-TRT checks read the manifest tfbench
writes."""

import os
import re
import json
import subprocess
import sys

import pytest

from helpers import ROOT
from tftrt_runs import (  # noqa: F401 - stand_in: fixture
    row_and_manifest, run_logged, stand_in)
from tftrt_stand_in import StandInConverter

pytestmark = pytest.mark.slow

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


def test_the_container_install_line_is_the_readmes():
    """Inside NVIDIA's container a plain `pip install .` may replace its TensorFlow: the script
    gives the README's line that pins it (tfbench.pins)."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    (line,) = set(re.findall(r"`(python -m tfbench\.pins [^`]*pip install \. [^`]*)`", readme))
    script = open(SCRIPT).read()
    assert line in script
    assert "`pip install .`" not in script


def _smoke_checks(prefix):
    """The script's `manifest NAME 'EXPRESSION' ...` checks of runs named prefix*."""
    script = open(SCRIPT).read()
    return re.findall(r"manifest (%s\w*) '([^']+)'" % prefix, script)


def _evaluate(expression, manifest):
    m, x = manifest, manifest["extra"]
    return eval(expression)


@pytest.mark.parametrize("failed, passes", [(frozenset(), True),
                                            (frozenset({"TRTEngineOp_000_001"}), False)])
def test_the_tftrt_engine_checks_read_the_manifest_tfbench_writes(stand_in, tmp_path, monkeypatch,
                                                                 failed, passes):
    """On a TF-TRT run (the stand-in converter), the script's engine-count checks pass when
    every segment has its engine and fail when one fell back to TensorFlow."""
    monkeypatch.setattr(StandInConverter, "FAILED_ENGINES", failed)
    assert run_logged(["--trt_mode=FP16"], stand_in) == 0
    _, manifest = row_and_manifest(tmp_path)
    checks = [(name, e) for name, e in _smoke_checks("tftrt_") if "trt_engines" in e]
    assert {name for name, _ in checks} == {"tftrt_fp16", "tftrt_int8", "tftrt_legacy"}
    for _, expression in checks:
        assert _evaluate(expression, manifest) is passes


def _validate_check():
    """The script's check of `tfbench validate --level=quick`'s validate.json."""
    script = open(SCRIPT).read()
    return script.split("\"$OUT/validate_quick\" \"$NGPU\" <<'PY'\n", 1)[1].split(
        "\nPY\n", 1)[0]


def _validate_dir(tmp_path, status="ok", busbw="ok", basis=None, manifest=None):
    (tmp_path / "validate.json").write_text(json.dumps({
        "plan": [{"name": "devices", "estimate_s": 111.3}, {"name": "allreduce",
                                                            "estimate_s": 0.0}],
        "estimate_basis": basis,
        "steps": [{"name": "devices", "status": status, "seconds": 97.25},
                  {"name": "allreduce", "status": "ok", "seconds": 0.0}],
        "rows": [{"check": "allreduce_busbw", "reason": busbw}] if busbw else []}))
    if manifest is not None:
        (tmp_path / "runs" / "devices").mkdir(parents=True)
        (tmp_path / "runs" / "devices" / "run.json").write_text(json.dumps(manifest))
    return str(tmp_path)


def _run_check(directory, gpus=8):
    return subprocess.run([sys.executable, "-", directory, str(gpus)], input=_validate_check(),
                          text=True, capture_output=True, cwd=ROOT)


@pytest.mark.parametrize("status, busbw, gpus, passes", [
    ("ok", "busbw_below_expected", 8, True),   # a host's FAIL is a verdict, not a broken step
    ("ok", "check_failed", 8, False),          # the training child did not time the all-reduce
    ("hung", "ok", 8, False),
    ("ok", None, 1, True),                     # one GPU: no all-reduce to time
    ("ok", None, 2, False)])
def test_the_validate_check_reads_validate_json(tmp_path, status, busbw, gpus, passes):
    proc = _run_check(_validate_dir(tmp_path, status, busbw), gpus)
    assert proc.returncode == (0 if passes else 1), proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "  devices        %-8s   97.2 s, estimate  111.3 s" % status)


def test_the_validate_check_prints_what_the_gpu_measured_against_the_constants(tmp_path):
    from tfbench.validate import estimate, plan
    every, added = plan.benchmark_flags("quick", ["--batch_size=64"], 1)
    basis = plan.build("quick", every, plan.Host("gpu", 1, "NVIDIA H100 80GB HBM3"), "out",
                       ["tfbench"], ["health_read"], None, added).basis()
    manifest = {"step_times": [0.05] * 10, "warmup_times": [3.55, 0.06]}
    proc = _run_check(_validate_dir(tmp_path, basis=basis, manifest=manifest), 1)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (
        "  measured against the plan's constants: " + estimate.measured_against(basis, manifest))
    assert proc.stdout.splitlines()[-1].startswith(
        "  measured against the plan's constants: step 50.0 ms measured (median of 10), "
        "estimate 15.0 ms: ")
