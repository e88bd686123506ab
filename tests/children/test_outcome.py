"""How a child ended, in a row's terms (tfbench.children.outcome.classify_failure), and how a
study of many children ends (study_end)."""

import pytest

from tfbench import errors
from tfbench.children.outcome import classify_failure, study_end
from tfbench.children.process import ChildOutcome


@pytest.mark.parametrize("code, tail, status", [
    (3, "whatever", "oom"),
    (1, "Traceback\nMemoryError", "oom"),
    (-6, "terminate called after throwing an instance of 'std::bad_alloc'", "oom"),
    (-9, "", "oom"),
    (4, "loss is NaN", "nan"),
    (130, "", "interrupted"),
    (-15, "", "interrupted"),
    (1, "RuntimeError: boom", "error"),
    (-11, "", "error"),
])
def test_classify_failure(code, tail, status):
    assert classify_failure(ChildOutcome(code, 1.0), tail)[0] == status


@pytest.mark.parametrize("code", [-9, -2, 130, 1])
def test_a_child_stopped_with_an_interrupted_study_is_interrupted_not_oom(code):
    outcome = ChildOutcome(code, 1.0, interrupted=KeyboardInterrupt())
    status, error = classify_failure(outcome, "Running warm up\n")
    assert status == "interrupted"
    assert error.startswith("stopped with the interrupted study (")
    assert error.endswith("); last output: Running warm up")
    assert ("killed by SIGKILL" in error) == (code == -9)


def test_abort_under_a_memory_cap_is_oom():
    tail = "terminate called after throwing an instance of 'dnnl::error'\n  what():  could not" \
        " create a primitive"
    outcome = ChildOutcome(-6, 1.0)
    assert classify_failure(outcome, tail)[0] == "error"
    status, error = classify_failure(outcome, tail, memory_capped=True)
    assert status == "oom"
    assert error == "killed by SIGABRT under the memory cap (allocation failure): what():  " \
                    "could not create a primitive"


def test_classify_failure_message_has_last_line_and_exit_code():
    status, error = classify_failure(ChildOutcome(1, 1.0), "a\nRuntimeError: x\n\n")
    assert (status, error) == ("error", "RuntimeError: x (exit code 1)")


def test_a_sigkill_that_may_be_the_launchers_own_says_nothing_of_memory():
    # A remote task killed by SIGKILL (tfbench launch's own kill after SIGTERM, say).
    outcome = ChildOutcome(-9, 1.0)
    assert classify_failure(outcome, "Step 10\n", sigkill_is_oom=False) == (
        "error", "killed by SIGKILL: Step 10")
    # ... unless its log ends like an OOM.
    assert classify_failure(outcome, "ResourceExhaustedError: OOM when allocating tensor",
                            sigkill_is_oom=False)[0] == "oom"


def test_a_signal_without_a_name_is_named_by_its_number():
    # errors.signal_name, the one spelling of a signal in every row (sweep and launch).
    assert classify_failure(ChildOutcome(-77, 1.0), "x") == ("error", "killed by signal 77: x")


def test_a_study_ends_0_when_every_point_finished_ok():
    assert study_end(["ok", "ok"], "points", "rows in s.csv") == (errors.EXIT_OK, "")
    assert study_end([], "points") == (errors.EXIT_OK, "")


def test_a_study_with_failed_points_ends_with_its_own_code_and_counts_them():
    assert errors.EXIT_INCOMPLETE == 6
    assert study_end(["ok", "oom", "error", "ok", "oom", "ok"], "points",
                     "rows in s.csv, logs in logs") == (
        6, "3 of 6 points did not finish ok (2 oom, 1 error); rows in s.csv, logs in logs")


def test_a_study_where_nothing_finished_ok_is_a_run_error():
    assert study_end(["error", "nan"], "runs", "logs in l") == (
        errors.EXIT_RUN_ERROR, "no run finished ok (1 error, 1 nan); logs in l")
