import pytest

from tfbench.measure import estimate
from tfbench.config import flagdefs
from tfbench.errors import UsageError
from tfbench.output import console
from tfbench.config.params import make_params


def test_formula():
    # 1,281,167 ImageNet images x 90 epochs at 2000 images/sec x 0.7
    hours = estimate.estimate_hours(2000.0, 1281167, 90, 0.7)
    assert hours == pytest.approx(1281167 * 90 / (2000.0 * 0.7) / 3600)
    assert hours == pytest.approx(22.8780, abs=1e-4)
    assert estimate.estimate_hours(100.0, 360000, 1, 1.0) == pytest.approx(1.0)


@pytest.mark.parametrize("args,message", [
    ((100.0, 0, 1, 0.7), "--estimate_dataset_size must be positive"),
    ((100.0, 10, 0, 0.7), "--estimate_epochs must be positive"),
    ((100.0, 10, 1, 0.0), "--estimate_utilization must be in (0, 1]"),
    ((100.0, 10, 1, 1.5), "--estimate_utilization must be in (0, 1]"),
])
def test_bad_values_are_usage_errors(args, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("]", r"\]")):
        estimate.estimate_hours(*args)


def test_summary_and_console_line():
    s = estimate.estimate_summary(2345.6, 1281167, 90, 0.7)
    assert s["estimated_train_hours"] == pytest.approx(1281167 * 90 / (2345.6 * 0.7) / 3600)
    assert console.estimate_lines(s) == [
        "Training-time estimate: 1281167 samples x 90 epochs at 2345.60 images/sec x 0.70 "
        "utilization = 19.51 hours"]


def test_console_units():
    short = estimate.estimate_summary(1000.0, 50000, 1, 1.0)
    assert console.estimate_lines(short)[0].endswith("= 0.8 minutes")
    long = estimate.estimate_summary(100.0, 1281167, 90, 0.7)
    assert console.estimate_lines(long)[0].endswith("= 457.6 hours (19.1 days)")


def test_off_and_failed_run():
    assert estimate.estimate_summary(100.0, 0, 1, 0.7) == {}
    assert console.estimate_lines({}) == []
    failed = estimate.estimate_summary(0.0, 1000, 1, 0.7)
    assert failed["estimated_train_hours"] is None
    assert console.estimate_lines(failed) == []


def test_flags_defaults_and_bounds():
    p = make_params({})
    assert (p.estimate_dataset_size, p.estimate_epochs, p.estimate_utilization) == (0, 1.0, 0.7)
    assert flagdefs.BY_NAME["estimate_utilization"].role == "T"
    with pytest.raises(UsageError, match="estimate_utilization"):
        make_params({"estimate_utilization": 1.2})
    with pytest.raises(UsageError, match="estimate_dataset_size"):
        make_params({"estimate_dataset_size": -5})


def test_repeat_and_monitor_flags():
    p = make_params({})
    assert (p.num_runs, p.cooldown_secs, p.unstable_threshold_pct) == (1, 0.0, 10.0)
    assert p.monitor_interval_ms == 250
    with pytest.raises(UsageError, match="num_runs"):
        make_params({"num_runs": 0})
    with pytest.raises(UsageError, match="cooldown_secs"):
        make_params({"cooldown_secs": -1.0})


def test_boundaries_and_messages():
    # One sample and one image/sec are estimates; zero images/sec is no estimate, not a crash.
    assert estimate.estimate_hours(1.0, 1, 1, 1.0) == pytest.approx(1 / 3600)
    assert estimate.estimate_hours(0.5, 1800, 1, 1.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="^images_per_sec must be positive to estimate a "
                                         "training time$"):
        estimate.estimate_hours(0.0, 10, 1, 0.7)
    assert estimate.estimate_summary(0.5, 1800, 1, 1.0)["estimated_train_hours"] == \
        pytest.approx(1.0)
    assert estimate.estimate_summary(-1.0, 1800, 1, 1.0)["estimated_train_hours"] is None
    for args, message in [((1.0, 0, 1, 0.7), "--estimate_dataset_size must be positive, got 0"),
                          ((1.0, 1, 0, 0.7), "--estimate_epochs must be positive, got 0"),
                          ((1.0, 1, 1, 2.0), "--estimate_utilization must be in (0, 1], got 2.0")]:
        with pytest.raises(UsageError) as info:
            estimate.estimate_hours(*args)
        assert str(info.value) == message
