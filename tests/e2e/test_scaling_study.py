"""The documented scaling study (docs/studies.md) through the real CLI on a CPU: the preset's
points all run on logical CPU devices, and a point whose flags cannot run on the devices asked
(NCCL on a CPU) stops the study before any child starts."""

import os
import re

import pytest

from helpers import ROOT, read_rows, run_cli

pytestmark = pytest.mark.slow   # the sweep and its children are processes

# What keeps each point small enough for a test; the preset's other flags stay as they are.
SMALL = ["--model=trivial", "--batch_size=4", "--num_batches=3", "--num_warmup_batches=1",
         "--csv_file="]


def _documented_cpu_command():
    with open(os.path.join(ROOT, "docs", "studies.md")) as handle:
        lines = [ln for ln in handle if "scaling_study.flags" in ln and "--device=cpu" in ln]
    assert len(lines) == 1, lines
    return re.sub(r"\s+#.*", "", lines[0]).split()[1:]   # without `tfbench`


def test_the_documented_scaling_study_runs_its_two_device_point_on_a_cpu(tmp_path):
    command = _documented_cpu_command()
    assert command == ["sweep", "--flagfile=flags/scaling_study.flags", "--sweep=num_gpus=1,2",
                       "--explain_scaling", "--device=cpu"]
    code, out, err = run_cli(command + SMALL + ["--out_dir=study"], tmp_path, merged=False)
    assert code == 0, err[-3000:]
    rows = read_rows(tmp_path / "study" / "sweep.csv")
    assert [(r["num_devices"], r["status"], r["variable_update"]) for r in rows] == [
        ("1", "ok", "replicated"), ("2", "ok", "replicated")]
    assert "## Where the scaling efficiency goes" in out


def test_nccl_on_a_cpu_stops_the_study_before_any_child_starts(tmp_path):
    code, out, err = run_cli(_documented_cpu_command() + SMALL + [
        "--all_reduce_spec=nccl", "--out_dir=study"], tmp_path, merged=False)
    assert code == 2
    assert err.splitlines() == [
        "tfbench: error: point 001_num_gpus-2: --all_reduce_spec=nccl needs GPUs (NCCL does not "
        "run on CPU); on CPU use --all_reduce_spec=pscpu or hierarchical_copy"]
    assert out == "" and not (tmp_path / "study").exists()
