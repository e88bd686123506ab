"""scripts/sbatch_scaling.sh: the srun steps it runs (1, 2, 4, ... nodes), each task's flags, CSV
and log, and the report; with stand-ins for srun and tfbench."""

import os
import subprocess

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(ROOT, "scripts", "sbatch_scaling.sh")

# srun: records its options, then runs the task command as task 0 (SLURM_PROCID=0), its output
# to --output with %t = 0, as srun does.
FAKE_SRUN = """#!/bin/bash
out=""
opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --output=*) out="${1#--output=}"; opts+=("$1"); shift ;;
    --*) opts+=("$1"); shift ;;
    *) break ;;
  esac
done
echo "srun ${opts[*]}" >> "$CALLS"
SLURM_PROCID=0 "$@" > "${out//%t/0}" 2>&1
"""
FAKE_TFBENCH = """#!/bin/bash
echo "tfbench $*" >> "$CALLS"
printf -- '----\\ntotal images/sec: 12.5\\n----\\n'
"""


@pytest.fixture
def stand_ins(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("tfbench", FAKE_TFBENCH)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run(tmp_path, bin_dir, nodes, *flags):
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]),
               SLURM_JOB_ID="48213", SLURM_JOB_NUM_NODES=str(nodes),
               CALLS=str(tmp_path / "calls.txt"))
    proc = subprocess.run(["bash", SCRIPT, *flags], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    return proc, (tmp_path / "calls.txt").read_text().splitlines()


def test_steps_of_one_two_four_and_all_nodes_one_task_each(tmp_path, stand_ins):
    proc, calls = run(tmp_path, stand_ins, 6, "--model=resnet50", "--batch_size=256")
    assert proc.returncode == 0, proc.stderr
    out = "tfbench_scaling_48213"
    steps = [c for c in calls if c.startswith("srun ")]
    assert steps == ["srun --nodes=%d --ntasks=%d --ntasks-per-node=1 --kill-on-bad-exit=1 "
                     "--output=%s/nodes%d_task%%t.log" % (n, n, out, n) for n in (1, 2, 4, 6)]
    runs = [c for c in calls if c.startswith("tfbench --")]
    # The one-node step is a one-worker cluster: every point runs MultiWorkerMirroredStrategy.
    assert runs[0] == ("tfbench --variable_update=collective_all_reduce --job_name=worker "
                       "--worker_hosts=127.0.0.1:%d --task_index=0 --model=resnet50 "
                       "--batch_size=256 --csv_file=%s/task0.csv" % (12000 + 48213 % 20000, out))
    assert runs[1:] == ["tfbench --variable_update=collective_all_reduce --model=resnet50 "
                        "--batch_size=256 --csv_file=%s/task0.csv" % out] * 3
    assert calls[-1] == "tfbench report %s/task0.csv --out %s/report" % (out, out)
    assert proc.stdout.splitlines()[:2] == ["== 1 node(s)", "total images/sec: 12.5"]


def test_outside_a_job_it_says_so(tmp_path, stand_ins):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(["bash", SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "run this with sbatch or inside salloc" in proc.stderr
