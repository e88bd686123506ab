"""Starting one child (tfbench.children.process): its environment, its log, its timeout."""

import os
import sys

import pytest

from tfbench.children import process
import paths

REPO = paths.ROOT

pytestmark = pytest.mark.slow   # each test starts a child process


def test_the_child_imports_this_tfbench(tmp_path, monkeypatch):
    # The folder holding this tfbench package (not the package folder itself) leads the child's
    # path, so an installed tfbench elsewhere (another checkout) does not run the points.
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "child.log"
    code = "import os, tfbench; print(os.environ['PYTHONPATH']); print(tfbench.__file__)"
    assert process.run_child([sys.executable, "-c", code], str(log)).exit_code == 0
    path, module = log.read_text().splitlines()
    assert path.split(os.pathsep)[0] == REPO
    assert module == os.path.join(REPO, "tfbench", "__init__.py")


def test_a_child_past_its_timeout_is_stopped_and_says_so(tmp_path):
    log = tmp_path / "child.log"
    code = "import time; print('started', flush=True); time.sleep(60)"
    outcome = process.run_child([sys.executable, "-c", code], str(log), timeout_sec=2)
    assert outcome.timed_out and outcome.exit_code == -15 and outcome.seconds < 30
    assert process.last_line(process.log_tail(str(log))) == "started"
