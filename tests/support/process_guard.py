"""The fast subset's promise, kept by the run itself: a test not marked `slow` that starts a
process (a subprocess, a fork, a multiprocessing worker, a child of tests/support/zygote.py's
server) fails, naming what it started. tests/conftest.py takes these hooks, so every run holds
every test to it: `-m "not slow"` stays fast, and the whole suite finds a test that should be
marked slow and is not.

Fixtures count as the test that sets them up (a module-scoped one that starts a cluster, for
the first test that asks for it). The package's own glimpses of the machine while it records a
run's environment (QUICK_TOOLS) are no process a test starts.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from typing import Optional

import pytest

# Programs the package runs for a moment while it records any run's environment: git and
# systemd-detect-virt (tfbench.measure.environment), uname -p (platform.processor(), once per
# interpreter: in whichever test asks first); and lscpu, which numpy < 2.0 runs once when
# numpy.testing is first imported (its check_support_sve(), on the TF 2.17 container's numpy 1.26).
QUICK_TOOLS = frozenset({"git", "systemd-detect-virt", "uname", "lscpu"})

_started: Optional[list[str]] = None   # what the running unmarked test started; None: not watched
_installed = False


def _note(what: str) -> None:
    if _started is not None:
        _started.append(what)


def _wrap(owner, name: str, describe) -> None:
    original = getattr(owner, name)

    def watched(*args, **kwargs):
        what = describe(*args, **kwargs)
        if what:
            _note(what)
        return original(*args, **kwargs)
    setattr(owner, name, watched)


def _popen(self, args, executable, *rest, **kwargs) -> Optional[str]:
    if isinstance(args, (str, bytes)):   # a command line, run by a shell or as one program
        argv = [os.fsdecode(args)]
        first = argv[0].split()[0] if argv[0].split() else ""
    else:
        argv = [os.fsdecode(a) for a in args]
        first = argv[0]
    program = os.path.basename(os.fsdecode(executable) if executable else first)
    return None if program in QUICK_TOOLS else "subprocess %s" % " ".join(argv)


def install() -> None:
    """Watches every way a test starts a process (once per interpreter)."""
    global _installed
    if _installed:
        return
    _installed = True
    _wrap(subprocess.Popen, "_execute_child", _popen)
    _wrap(os, "fork", lambda: "os.fork()")
    _wrap(os, "system", lambda command: "os.system(%r)" % command)
    _wrap(multiprocessing.process.BaseProcess, "start",
          lambda self: "a multiprocessing process (%s)" % type(self).__name__)
    try:
        import zygote
    except ImportError:   # run outside this suite
        return
    _wrap(zygote.Child, "__init__",
          lambda self, program, args, *rest: "a zygote child: python %s" % " ".join(
              list(program) + list(args)))


def _watched(item: pytest.Item, phase: str):
    global _started
    outer, _started = _started, None if item.get_closest_marker("slow") else []
    try:
        result = yield
    finally:
        started, _started = _started, outer
    if started:
        pytest.fail("%s starts a process in its %s but is not marked slow (pytest.mark.slow, or "
                    "pytestmark = pytest.mark.slow in its module): %s"
                    % (item.nodeid, phase, "; ".join(started[:3])), pytrace=False)
    return result


def pytest_configure(config) -> None:
    install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _watched(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _watched(item, "call"))
