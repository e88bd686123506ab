"""The fast subset stays fast and honest: a test that starts a process and is not marked slow
fails (tests/support/process_guard.py, which tests/conftest.py takes), shown on planted tests run
by pytest in this process."""

import pytest

pytest_plugins = "pytester"
pytestmark = pytest.mark.slow   # the planted tests start processes

PLANTED = '''
import multiprocessing
import os
import subprocess
import sys

import pytest

import zygote


def _python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_python():
    _python()


@pytest.mark.slow
def test_marked_python():
    _python()


@pytest.mark.parametrize("slow", [pytest.param(1, marks=pytest.mark.slow), 0])
def test_parametrized(slow):
    _python()


@pytest.fixture(scope="module")
def cluster():
    _python()


def test_unmarked_fixture(cluster):
    pass


def test_unmarked_shell():
    assert os.system("true") == 0


def test_unmarked_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_unmarked_pool():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(abs, [-1]) == [1]


def test_unmarked_zygote_child(tmp_path):
    script = tmp_path / "child.py"
    script.write_text("pass")
    assert zygote.run([], tmp_path, dict(os.environ), 120, script=str(script)).returncode == 0


def test_the_packages_glimpse_of_git_is_no_process_of_the_test():
    subprocess.run(["git", "--version"], stdout=subprocess.DEVNULL, check=True)


def test_no_process():
    assert sum([1, 2]) == 3
'''


def test_an_unmarked_test_that_starts_a_process_fails_naming_it(pytester):
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts a process\n")
    pytester.makepyfile(test_planted=PLANTED)
    result = pytester.runpytest_inprocess(
        "-p", "process_guard", "-p", "no:cacheprovider", "-rfE",
        "-W", "ignore::pytest.PytestAssertRewriteWarning")   # the suite imported it first
    outcomes = {r.nodeid.split("::")[1]: (r.when, r.outcome)
                for r in result.reprec.getreports("pytest_runtest_logreport")
                if r.outcome != "passed"}
    assert outcomes == {
        "test_unmarked_python": ("call", "failed"),
        "test_parametrized[0]": ("call", "failed"),
        "test_unmarked_fixture": ("setup", "failed"),
        "test_unmarked_shell": ("call", "failed"),
        "test_unmarked_fork": ("call", "failed"),
        "test_unmarked_pool": ("call", "failed"),
        "test_unmarked_zygote_child": ("call", "failed"),
    }
    result.assert_outcomes(passed=4, failed=6, errors=1)
    for line in [
        "*test_unmarked_python starts a process in its call but is not marked slow*"
        "subprocess *python* -c pass",
        "*test_unmarked_fixture starts a process in its setup but is not marked slow*",
        "*test_unmarked_shell*os.system('true')",
        "*test_unmarked_fork*os.fork()",
        "*test_unmarked_pool*a multiprocessing process (ForkProcess)*",
        "*test_unmarked_zygote_child*a zygote child: python *child.py*"]:
        result.stdout.fnmatch_lines([line])
