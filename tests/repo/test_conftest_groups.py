"""tests/conftest.py: a module-scoped fixture of a test module runs once per suite run under
xdist, not once per worker (it ran twice while xdist read the group marks before conftest set
them: test_matrix's traced matrix cost 2 x 55 s)."""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow

_MODULE = '''
import os
import pytest


@pytest.fixture(scope="module")
def shared():
    with open(os.path.join(os.path.dirname(__file__), "setups.txt"), "a") as handle:
        handle.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")


def test_a(shared):
    pass


def test_b():
    pass


def test_c(shared):
    pass


def test_d(shared):
    pass
'''


def test_a_module_fixture_runs_once_with_several_workers(tmp_path):
    (tmp_path / "tests").mkdir()
    shutil.copy(os.path.join(ROOT, "tests", "conftest.py"), tmp_path / "tests")
    shutil.copy(os.path.join(ROOT, "pytest.ini"), tmp_path)
    (tmp_path / "tests" / "test_shared.py").write_text(_MODULE)
    (tmp_path / "tests" / "test_other.py").write_text(
        "import time\n\n\n" + "".join("def test_%d():\n    time.sleep(0.2)\n\n\n" % i
                                       for i in range(4)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "8 passed" in done.stdout
    setups = (tmp_path / "tests" / "setups.txt").read_text().split()
    assert len(setups) == 1, setups
