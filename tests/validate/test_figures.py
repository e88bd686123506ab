"""The figures judged without a baseline (tfbench.validate.figures.published): images/sec
against a published band computed by hand, the scaling efficiency against its least, and the
stability rule that makes an unstable figure a WARN, never a PASS."""

import pytest

from tfbench.validate import figures

V100 = {"model": "resnet50", "mode": "training", "precision": "fp32", "batch_size": 192,
        "num_devices": 8, "device_kind": "gpu", "device_name": "Tesla V100-SXM2-32GB"}


def _judge(figs, key=V100, tolerance=5.0, least=None, splits=()):
    rows = figures.published(tolerance, least)(figures.Measured("h", key, figs, list(splits)))
    return {r.check: r for r in rows}


@pytest.mark.parametrize("values, status, reason", [
    # Lambda's tf_cnn_benchmarks 8x V100 32GB resnet50 fp32 at 192: 3136 images/sec; at 5%
    # the band starts at 3136 x 0.95 = 2979.2
    ([3100.0], "PASS", "ok"), ([2990.0, 2985.0, 3000.0], "PASS", "ok"),
    ([2900.0], "FAIL", "below_expected_range"),
    # spread (3300 - 2990) / 3100 = 10.0% is within the rule; (3400 - 3000) / 3100 = 12.9% not
    ([2990.0, 3100.0, 3300.0], "PASS", "ok"), ([3000.0, 3100.0, 3400.0], "WARN", "unstable"),
    ([2000.0, 2900.0, 3400.0], "FAIL", "below_expected_range")])
def test_images_per_sec_against_the_published_band(values, status, reason):
    row = _judge({"images_per_sec": values})["images_per_sec"]
    assert (row.status, row.reason) == (status, reason)
    assert row.expected == pytest.approx(2979.2)
    assert "3,136 (bs192, synthetic data)" in row.expectation


def test_no_published_figure_is_a_skip_that_still_warns_when_unstable():
    cpu = dict(V100, device_kind="cpu", device_name="Intel Xeon")
    row = _judge({"images_per_sec": [10.0]}, cpu)["images_per_sec"]
    assert (row.status, row.reason, row.figure, row.expectation) == (
        "SKIP", "no_expectation", "10.0 images/sec", "no published figure for CPU devices")
    row = _judge({"images_per_sec": [10.0, 12.0, 10.0]}, cpu)["images_per_sec"]
    assert (row.status, row.reason) == ("WARN", "unstable")
    assert row.figure == "10.0 images/sec (median of 3 runs, spread 20.0%)"
    other = _judge({"images_per_sec": [10.0]}, dict(V100, batch_size=7))["images_per_sec"]
    assert other.status == "SKIP" and "published: " in other.expectation


def test_scaling_efficiency_against_its_least():
    splits = ["60.0% (a)", "61.0% (b)", "64.0% (c)"]
    rows = _judge({"efficiency_pct": [60.0, 61.0, 64.0]}, splits=splits)
    row = rows["efficiency_pct"]
    # median 61 < the default 80 on GPUs; the split is the median run's
    assert (row.status, row.reason, row.value, row.expected) == ("FAIL", "efficiency_low",
                                                                 61.0, 80.0)
    assert row.figure == "61.0% (b) (median of 3 runs, spread 6.6%)"
    assert row.expectation == "at least 80% (the default on GPUs)"
    assert _judge({"efficiency_pct": [60.0, 61.0, 64.0]}, least=55.0)[
        "efficiency_pct"].status == "PASS"
    cpu = dict(V100, device_kind="cpu")
    assert _judge({"efficiency_pct": [30.0]}, cpu)["efficiency_pct"].reason == \
        "no_expectation"
    assert _judge({"efficiency_pct": [30.0]}, cpu, least=25.0)["efficiency_pct"].reason \
        == "ok"
    assert "efficiency_pct" not in _judge({"efficiency_pct": [100.0]},
                                              dict(V100, num_devices=1))
