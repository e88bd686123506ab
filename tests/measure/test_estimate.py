import pytest

from tfbench.measure import estimate
from tfbench.errors import UsageError
from tfbench.output import console


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


def test_off_and_failed_run():
    assert estimate.estimate_summary(100.0, 0, 1, 0.7) == {}
    assert console.estimate_lines({}) == []
    failed = estimate.estimate_summary(0.0, 1000, 1, 0.7)
    assert failed["estimated_train_hours"] is None
    assert console.estimate_lines(failed) == []


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
