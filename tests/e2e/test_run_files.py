"""What a run leaves behind: the files docs/output.md lists and nothing else, in the current
directory and in $TMPDIR; the repository's .gitignore covers every default output path."""

import os
import re
import shutil
import subprocess

import pytest

from helpers import ROOT, only_row, run_cli

pytestmark = pytest.mark.slow

TINY = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=2",
        "--num_batches=2", "--num_warmup_batches=1"]


def _listing(top):
    return sorted(os.path.relpath(os.path.join(d, f), top)
                  for d, _, names in os.walk(top) for f in names)


def test_a_run_leaves_only_the_documented_files(tmp_path):
    """The console script's own exit (os._exit, which skips TensorFlow's clean-up) included."""
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    code, out = run_cli(TINY, work, env_extra={"TMPDIR": str(temp)})
    assert code == 0, out
    run_id = only_row(work / "tfbench_results.csv")["run_id"]
    assert _listing(work) == ["tfbench_results.csv", "tfbench_runs/%s.json" % run_id]
    assert _listing(temp) == []
    with open(os.path.join(ROOT, "docs", "output.md")) as handle:
        doc = " ".join(handle.read().split())
    assert ("a run with the default flags leaves exactly `tfbench_results.csv` and "
            "`tfbench_runs/<run_id>.json` in the current directory, and nothing in the "
            "temporary directory") in doc


def _default_outputs():
    """Paths tfbench writes by default, as the code names them."""
    from tfbench.cli import evaluate, report, sweep
    from tfbench.config import flagdefs
    from tfbench.launch import run as launch_run
    _, engine = sweep.build(["--sweep=batch_size=1,2"])
    return [flagdefs.BY_NAME["csv_file"].default, flagdefs.BY_NAME["json_dir"].default + "/x",
            engine.config.out_dir + "/sweep.csv", launch_run.default_out_dir() + "/rows.csv",
            evaluate.DEFAULT_OUT_DIR + "/evaluation.csv",
            report._parser().get_default("out") + "/report.md",
            "tfbench_scaling_1234/task0.csv", "tfbench-scaling-1234.out"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_covers_every_default_output():
    paths = _default_outputs()
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin", "-v", "-n"],
                          input="\n".join(paths) + "\n", cwd=ROOT, text=True,
                          stdout=subprocess.PIPE)
    missed = [line.split("\t")[1] for line in done.stdout.splitlines()
              if re.match(r"::\t", line)]
    assert missed == []
