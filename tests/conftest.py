"""Shared test settings: quiet TensorFlow, run from a temp dir so no result files leak."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No test adds to the user's real results history (~/.local/share/tfbench, or theirs in
# TFBENCH_HISTORY): off for every run and child; the history's tests name their own stores.
os.environ["TFBENCH_HISTORY"] = ""
os.environ.pop("TFBENCH_HISTORY_SOURCE", None)
# TensorFlow reads this once per process, and in-process tests train after forward-only runs:
# keep oneDNN's frozen-weight caching off here (distribute/test_devices_frozen_weights runs it in
# its own process).
os.environ.setdefault("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "0")
# tests/support (helpers, fakes, check scripts: not collected) is imported by module name
# (`import helpers`); the checkout's root goes first, so its tfbench is the one imported.
_TESTS = os.path.dirname(os.path.abspath(__file__))
_SUPPORT = os.path.join(_TESTS, "support")
if os.path.isdir(_SUPPORT):
    sys.path.insert(0, _SUPPORT)
sys.path.insert(0, os.path.dirname(_TESTS))


import pytest  # noqa: E402

if os.path.isdir(_SUPPORT):
    # A test not marked slow that starts a process fails (tests/support/process_guard.py).
    import process_guard
    from process_guard import pytest_runtest_call, pytest_runtest_setup  # noqa: F401

    process_guard.install()


@pytest.fixture(autouse=True)
def _float32_policy_after_each_test():
    """In-process runs set Keras' global dtype policy (bf16, fp16); the next test starts from
    Keras' default again, whatever order the tests run in."""
    yield
    if "keras" in sys.modules:
        sys.modules["keras"].mixed_precision.set_dtype_policy("float32")


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook turns the marks into node ids
def pytest_collection_modifyitems(config, items):
    """A test module whose own module-scoped fixture runs a check script (a traced matrix, a
    cluster) has all its tests run by one xdist worker (--dist loadgroup in pytest.ini): under
    plain load distribution each worker that got one of its tests ran the fixture again."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        module = item.nodeid.split("::")[0]
        shared = info is not None and any(
            d.scope == "module" and d.baseid == module
            for defs in info.name2fixturedefs.values() for d in defs)
        if shared:
            item.add_marker(pytest.mark.xdist_group(module))
