import pytest

from tfbench.output import csv_out
from tfbench.output import console
from tfbench.measure import stats
from tfbench.results import FIELD_NAMES


def test_latency_summary_values_in_ms():
    times = [i / 1000.0 for i in range(1, 101)]  # 1..100 ms
    s = stats.latency_summary(times)
    assert s["latency_ms_p50"] == pytest.approx(50.5)
    assert s["latency_ms_p90"] == pytest.approx(90.1)
    assert s["latency_ms_p99"] == pytest.approx(99.01)
    assert s["latency_ms_mean"] == pytest.approx(50.5)
    assert s["latency_ms_min"] == pytest.approx(1.0)
    assert s["latency_ms_max"] == pytest.approx(100.0)


def test_latency_summary_linear_interpolation_small_sample():
    s = stats.latency_summary([0.010, 0.020])
    assert s["latency_ms_p50"] == pytest.approx(15.0)
    assert s["latency_ms_p90"] == pytest.approx(19.0)


def test_latency_summary_empty_is_none():
    s = stats.latency_summary([])
    assert set(s) >= {"latency_ms_p50", "latency_ms_p99", "latency_ms_max"}
    assert all(v is None for v in s.values())
    assert console.latency_lines(s) == []


def test_summary_keys_are_csv_columns_where_they_exist():
    columns = set(csv_out.COLUMN_NAMES)
    lat = stats.latency_summary([0.01])
    assert {"latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_mean"} <= set(lat)
    assert {"latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_mean"} <= columns
    rep = stats.repeat_summary([1.0, 2.0])
    for key in ("images_per_sec_median", "images_per_sec_min", "images_per_sec_max",
                "spread_pct", "unstable", "num_runs"):
        assert key in rep and key in columns
    cold = stats.cold_start_summary([1.0], [0.1])
    # first_step_sec and warmup_sec are RunResult fields: the summary never redefines them.
    assert not set(cold) & FIELD_NAMES


def test_cold_start_with_warmup():
    s = stats.cold_start_summary([2.0, 0.5, 0.5], [0.1, 0.3])
    assert s["num_warmup_steps"] == 3
    assert s["steady_step_sec_mean"] == pytest.approx(0.2)
    assert s["first_step_vs_steady"] == pytest.approx(10.0)
    # warmup_sec is the warm-up's wall time (RunResult), here above the sum of its steps.
    assert console.cold_start_lines(dict(s, first_step_sec=2.0, warmup_sec=3.25)) == [
        "Cold start: first step 2.000 s, warm-up 3.250 s (3 steps), steady state 200.00 ms/step"]
    one = stats.cold_start_summary([2.0], [0.1])
    assert console.cold_start_lines(dict(one, first_step_sec=2.0, warmup_sec=2.0)) == [
        "Cold start: first step 2.000 s, warm-up 2.000 s (1 step), steady state 100.00 ms/step"]


def test_cold_start_without_warmup_uses_first_timed_step():
    s = stats.cold_start_summary([], [0.5, 0.1])
    assert s["num_warmup_steps"] == 0 and s["first_step_vs_steady"] == pytest.approx(5 / 3)
    assert console.cold_start_lines(dict(s, first_step_sec=0.5, warmup_sec=None)) == [
        "Cold start: first step 0.500 s, steady state 300.00 ms/step"]


def test_cold_start_no_steps():
    s = stats.cold_start_summary([], [])
    assert s["steady_step_sec_mean"] is None and s["first_step_vs_steady"] is None
    assert console.cold_start_lines(dict(s, first_step_sec=None)) == []


def test_repeat_summary_stable():
    s = stats.repeat_summary([100.0, 102.0, 98.0, 101.0, 99.0])
    assert s["num_runs"] == 5
    assert s["images_per_sec_median"] == 100.0
    assert s["images_per_sec_min"] == 98.0
    assert s["images_per_sec_max"] == 102.0
    assert s["spread_pct"] == pytest.approx(4.0)
    assert s["unstable"] is False
    assert console.repeat_lines(s) == [
        "Repeats: 5 runs, median 100.00 images/sec, min 98.00, max 102.00, spread 4.0%"]


def test_repeat_summary_unstable_and_threshold():
    values = [50.0, 100.0, 104.0]
    s = stats.repeat_summary(values)
    assert s["spread_pct"] == pytest.approx(54.0)
    assert s["unstable"] is True
    (line,) = console.repeat_lines(s)
    assert line.endswith("spread 54.0% UNSTABLE (spread > 10%)")
    relaxed = stats.repeat_summary(values, unstable_threshold_pct=60)
    assert relaxed["unstable"] is False
    assert "UNSTABLE" not in console.repeat_lines(relaxed)[0]
    assert console.repeat_lines(stats.repeat_summary(values, 2.5))[0].endswith(
        "UNSTABLE (spread > 2.5%)")


def test_repeat_summary_exactly_at_threshold_is_stable():
    s = stats.repeat_summary([95.0, 100.0, 105.0])
    assert s["spread_pct"] == pytest.approx(10.0)
    assert s["unstable"] is False


def test_repeat_summary_single_and_empty():
    one = stats.repeat_summary([123.0])
    assert one["spread_pct"] == 0.0 and one["unstable"] is False and one["num_runs"] == 1
    assert console.repeat_lines(one) == []
    none = stats.repeat_summary([])
    assert none["num_runs"] == 0 and none["images_per_sec_median"] is None
    assert console.repeat_lines(none) == []


# The Step line's figures (legacy get_perf_timing, benchmark_cnn.py), worked out by hand: batch 4
# and step times 0.1, 0.2, 0.4 s are speeds 40, 20, 10 images/sec.
def test_step_line_figures_by_hand():
    mean, plusminus, jitter = stats.perf_stats(4, [0.1, 0.2, 0.4])
    assert mean == pytest.approx(4 / (0.7 / 3))              # B / mean time, not mean speed
    # population std of (40, 20, 10) = sqrt(1400 / 9), over sqrt(3)
    assert plusminus == pytest.approx((1400 / 9) ** 0.5 / 3 ** 0.5)
    assert jitter == pytest.approx(1.4826 * 10)             # |40-20|, |20-20|, |10-20| -> 10


def test_step_line_figures_even_count_and_ewma():
    # Speeds 40, 20, 10, 5: median 15, deviations 25, 5, 5, 10 -> median 7.5.
    assert stats.perf_stats(4, [0.1, 0.2, 0.4, 0.8])[2] == pytest.approx(1.4826 * 7.5)
    # EWMA 0.5: weights 0.25, 0.5, 1 on 0.1, 0.2, 0.4 s -> 0.525 / 1.75 = 0.3 s.
    assert stats.perf_stats(4, [0.1, 0.2, 0.4], ewma=0.5)[0] == pytest.approx(4 / 0.3)
    assert stats.perf_stats(8, [0.5]) == (16.0, 0.0, 0.0)


def test_repeat_median_of_an_even_count_is_the_mean_of_the_middle_two():
    s = stats.repeat_summary([10.0, 40.0, 20.0, 80.0])
    assert s["images_per_sec_median"] == 30.0 and s["spread_pct"] == pytest.approx(70 / 30 * 100)
    assert s["images_per_sec_runs"] == [10.0, 40.0, 20.0, 80.0]


def test_summaries_at_zero():
    """A step or a repeat measured at zero (a fake clock, a run that did nothing) gives no ratio
    and no spread, not a division by zero."""
    assert stats.cold_start_summary([], [0.0])["first_step_vs_steady"] is None
    zero = stats.repeat_summary([0.0, 0.0])
    assert zero["spread_pct"] is None and zero["unstable"] is False
    small = stats.repeat_summary([0.25, 0.75])
    assert small["images_per_sec_median"] == 0.5 and small["spread_pct"] == pytest.approx(100.0)
    assert set(stats.repeat_summary([])) == {
        "num_runs", "images_per_sec_median", "images_per_sec_min", "images_per_sec_max",
        "spread_pct", "unstable", "unstable_threshold_pct", "images_per_sec_runs"}


def test_timed_calls_leave_the_warm_up_untimed():
    made, ticks = [], iter(range(100))
    times = stats.timed_calls(lambda: made.append(1), repeats=3, warmup=2,
                              clock=lambda: float(next(ticks)) ** 2)
    assert len(made) == 5
    # The clock is read only around the timed calls: (0, 1), (2, 3), (4, 5) squared.
    assert times == [1.0, 5.0, 9.0]
