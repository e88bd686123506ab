"""Each device alone (tfbench.validate.devices_step) from hand-made --validate_devices entries:
the ratio to the median device, the tolerance, the median over repeats, a failed check and a
device that computes wrong results."""

import math

import pytest

from tfbench.validate import devices_step


def entry(device, alone=10.0, matmul=100.0, conv=50.0, agrees=True, diff=0.0, errors=None):
    return {"device": device, "alone_ms": alone, "together_ms": None, "matmul_tflops": matmul,
            "conv_tflops": conv, "digest": "d", "loss": 1.0, "bit_exact": agrees and diff == 0,
            "max_rel_diff": diff, "within_bound": agrees, "agrees": agrees,
            "errors": errors or {}}


NUMERIC = {"reference": "GPU 0", "deterministic": True, "bound": 1e-5}


def _run(*entries, numeric=NUMERIC):
    return {"device_checks": list(entries), "device_checks_numeric": numeric}


def _row(rows, device, check):
    (row,) = [r for r in rows if (r.subject, r.check) == (device, check)]
    return row


def test_a_device_13_pct_slower_than_the_median_is_a_straggler_at_5_pct_not_at_50():
    # alone 10, 10, 10, 13 ms: median 10, GPU 3 at 1.3x
    run = _run(entry("GPU 0"), entry("GPU 1"), entry("GPU 2"), entry("GPU 3", alone=13.0))
    row = _row(devices_step.judge([run], "h", 5.0), "GPU 3", "step_alone")
    assert (row.status, row.reason, row.value, row.expected) == ("FAIL", "straggler",
                                                                 pytest.approx(1.3), 1.05)
    assert row.figure == "step alone 1.30x the median of 4 devices (13 vs 10 ms)"
    assert row.expectation == "at most 1.05x the median device's (tolerance 5%)"
    assert _row(devices_step.judge([run], "h", 50.0), "GPU 3", "step_alone").status == "PASS"
    assert _row(devices_step.judge([run], "h", 5.0), "GPU 0", "step_alone").reason == "ok"


def test_kernels_compare_tflops_the_other_way_round():
    # matmul 100, 100, 80 TFLOP/s: median 100, GPU 2 takes 100/80 = 1.25x the time
    # conv 50, 40, 50: GPU 1 at 1.25x
    run = _run(entry("GPU 0"), entry("GPU 1", conv=40.0), entry("GPU 2", matmul=80.0))
    rows = devices_step.judge([run], "h", 10.0)
    matmul = _row(rows, "GPU 2", "matmul")
    assert (matmul.status, matmul.reason, matmul.value) == ("FAIL", "slow_matmul", 1.25)
    assert matmul.figure == "matmul time 1.25x the median of 3 devices (80 vs 100 TFLOP/s)"
    assert (_row(rows, "GPU 1", "conv").reason, _row(rows, "GPU 2", "conv").reason) == (
        "slow_conv", "ok")
    assert _row(rows, "GPU 1", "matmul").status == "PASS"


def test_one_device_is_its_own_median():
    rows = devices_step.judge([_run(entry("GPU 0"))], "h", 0.0)
    assert [(r.check, r.status, r.value) for r in rows] == [
        ("step_alone", "PASS", 1.0), ("matmul", "PASS", 1.0), ("conv", "PASS", 1.0),
        ("gradients", "PASS", 0.0)]


def test_over_repeats_each_device_is_judged_on_its_median():
    # Medians: GPU 0 and 3 10 ms; GPU 1 30 ms once, 10 and 11 otherwise: 11; GPU 2 13 in 2 of
    # 3: 13. The median device's: (10 + 11) / 2 = 10.5; GPU 1 at 11 / 10.5, GPU 2 13 / 10.5.
    runs = [_run(entry("GPU 0"), entry("GPU 1", alone=a), entry("GPU 2", alone=b),
                 entry("GPU 3")) for a, b in ((30.0, 13.0), (10.0, 13.0), (11.0, 9.0))]
    rows = devices_step.judge(runs, "h", 20.0)
    one, two = _row(rows, "GPU 1", "step_alone"), _row(rows, "GPU 2", "step_alone")
    assert (one.status, one.value) == ("PASS", pytest.approx(11 / 10.5))
    assert one.figure.endswith("(11 vs 10.5 ms) (median of 3 runs)")
    assert (two.status, two.reason, two.value) == ("FAIL", "straggler", pytest.approx(13 / 10.5))


def test_a_failed_check_is_that_devices_check_failed_row():
    run = _run(entry("GPU 0"), entry("GPU 1", alone=None, errors={"step": "out of memory"}),
               entry("GPU 2", matmul=None, conv=None, errors={"kernels": "InternalError: x"}))
    rows = devices_step.judge([run, run], "h", 5.0)
    step = _row(rows, "GPU 1", "step_alone")
    assert (step.status, step.reason, step.figure) == (
        "FAIL", "check_failed", "in run 1 of 2: out of memory")
    assert _row(rows, "GPU 2", "conv").figure == "in run 1 of 2: InternalError: x"
    # The others are judged among the devices that measured: GPU 0 and GPU 2, median 10.
    assert _row(rows, "GPU 2", "step_alone").figure.startswith(
        "step alone 1.00x the median of 2 devices")


def test_a_device_that_disagrees_computes_wrong_results():
    run = _run(entry("GPU 0"), entry("GPU 1"), entry("GPU 2", agrees=False, diff=2 ** -10))
    rows = devices_step.judge([run], "h", 5.0)
    wrong = _row(rows, "GPU 2", "gradients")
    assert (wrong.status, wrong.reason, wrong.value) == ("FAIL", "wrong_results", 2 ** -10)
    assert wrong.figure == "max_rel_diff 0.000977, not bit-exact"
    assert wrong.expectation == "bit-exact with GPU 0 (op determinism on)"
    assert _row(rows, "GPU 1", "gradients").reason == "ok"
    # Without determinism, judged by the bound; a non-finite difference says so; once in 3.
    loose = dict(NUMERIC, deterministic=False, bound=0.01)
    runs = [_run(entry("GPU 0"), entry("GPU 1"), numeric=loose)] * 2 + [
        _run(entry("GPU 0"), entry("GPU 1", agrees=False, diff=math.inf), numeric=loose)]
    row = _row(devices_step.judge(runs, "h", 5.0), "GPU 1", "gradients")
    assert (row.reason, row.figure, row.expectation) == (
        "wrong_results", "max_rel_diff not finite, not bit-exact (in 1 of 3 runs)",
        "max_rel_diff within 0.01 of GPU 0")


def test_a_numeric_check_without_a_reference_did_not_complete():
    run = _run(entry("GPU 0", agrees=None), entry("GPU 1", agrees=None))
    assert _row(devices_step.judge([run], "h", 5.0), "GPU 1", "gradients").figure == \
        "not compared (no reference device had a result)"
