"""history.series: a series per configuration and machine, failed runs counted and not valued,
the filters, the sparkline, a run's own spread, the environment facts that changed across a
change point, which way a change goes, and the fleet.

Results are added as a store adds them (tests/support/history_results.py: MemoryStore, checked
against a real SQLite store below); the expected medians, percentages and texts are worked out
by hand in each test.
"""

import datetime

import pandas as pd
import pytest

from history_results import A100, H100, START, MemoryStore, add, add_series, environment, \
    open_store
from tfbench import figures
from tfbench.errors import UsageError
from tfbench.history import changes as cp
from tfbench.history import record
from tfbench.history import series as hs

# Runs around 1000 images/sec (median of the eight: 1000), then around 920 (median 920):
# -8.0% from the ninth run.
BEFORE = [1000, 1004, 996, 1002, 998, 1000, 1003, 997]
AFTER = [920, 924, 916, 921, 919, 922, 918, 920]


def built(store, figure="images_per_sec", **filters):
    return hs.build(hs.filtered(store.frame(), **filters), figure)


def by_name(found):
    return {s.name: s for s in found}


# --- the store's frame -----------------------------------------------------------------------

@pytest.mark.slow
def test_the_memory_store_reads_as_a_sqlite_store(tmp_path):
    real, memory = open_store(tmp_path / "h.sqlite"), MemoryStore()
    try:
        add_series(memory, [1000.0, None, 990.5], prefix="r", spreads=[2.0, None, 1.0],
                   drivers=["570.86.15", "570.86.15", "580.65.06"])
        add(memory, "v", 4, 12.5, model="vit_b16", mode="forward_only", gpu=A100,
            figure="latency_ms_p50", host="gpu-node-2")
        add(memory, "early", -1, 980.0)                 # added last, ran first
        real.add_many(memory.recorded[:3])
        for result in memory.recorded[3:]:
            real.add(result)
        a, b = real.frame(), memory.frame()
        assert list(b["run_id"]) == ["early", "r-00", "r-01", "r-02", "v"]
        assert list(a.columns) == list(b.columns)
        pd.testing.assert_frame_equal(a.drop(columns="recorded_at"),
                                      b.drop(columns="recorded_at"), check_dtype=False)
        assert real.environment() == memory.environment()
        assert real.environment(["r-02"]) == memory.environment(["r-02"]) == {
            "r-02": {"GPUs on the host (NVML)": H100, "NVIDIA driver": "580.65.06",
                     "TensorFlow": "2.21.0"}}
        assert list(memory.frame(columns=["run_id", "status"]).columns) == ["run_id", "status"]
    finally:
        real.close()


# --- series ----------------------------------------------------------------------------------

def test_a_series_is_one_configuration_on_one_machine():
    s = MemoryStore()
    add(s, "a2", 2, 1010.0)
    add(s, "a1", 1, 1000.0)                        # added later, ran earlier
    add(s, "b1", 1, 990.0, host="gpu-node-2")
    add(s, "c1", 1, 1500.0, batch_size=32)
    add(s, "d1", 1, 7900.0, devices=8)
    add(s, "e1", 1, 400.0, model="vit_b16")
    found = by_name(built(s))
    assert sorted(found) == [
        "resnet50 training fp16 bs32 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1",
        "resnet50 training fp16 bs64 224px on 8 x NVIDIA H100 80GB HBM3 @ gpu-node-1",
        "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1",
        "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-2",
        "vit_b16 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1"]
    two = found["resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1"]
    assert list(two.rows["run_id"]) == ["a1", "a2"] and two.values == [1000.0, 1010.0]
    assert [s.name for s in built(s)] == sorted(found)


def test_a_cpu_series_among_gpu_ones_is_named_by_its_device():
    # No GPU model: pandas leaves the cell NaN (a float, and true) where other results have one.
    s = MemoryStore()
    add_series(s, [1000.0, 1001.0], prefix="r")
    for day in range(2):
        add(s, "c-%d" % day, day, 50.0, host="cpu-node", device_kind="cpu", device_name="CPU",
            env={"hostname": "cpu-node"})
    assert sorted(by_name(built(s))) == [
        "resnet50 training fp16 bs64 224px on CPU @ cpu-node",
        "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1"]
    assert hs.describe({"model": "resnet50", "gpu_model": float("nan"), "device_name": A100,
                        "machine": float("nan"), "hostname": "a100-node-1"}) == \
        "resnet50 on NVIDIA A100-SXM4-80GB @ a100-node-1"


def test_a_multi_host_run_is_one_result_of_the_series_of_its_hosts():
    s = MemoryStore()
    rows = [{"run_id": "m1", "status": "ok", "model": "resnet50", "mode": "training",
             "precision": "fp16", "batch_size": "64", "image_size": "224", "num_devices": "8",
             "num_workers": "2", "device_kind": "gpu", "device_name": H100, "hostname": host,
             "images_per_sec": ips, "timestamp": START.isoformat()}
            for host, ips in (("gpu-node-1", "7000.0"), ("gpu-node-2", "7000.0"))]
    for result in record.from_rows(rows, "launch", {"m1": {"environment": {
            "before": environment("gpu-node-1", gpus=8)}}}):
        s.add(result)
    (only,) = built(s)
    assert only.name.endswith("num_workers=2 on 8 x NVIDIA H100 80GB HBM3 "
                              "@ gpu-node-1,gpu-node-2")
    assert len(only.rows) == 1
    # Either host's name finds it.
    assert len(built(s, host="gpu-node-2")) == 1 and built(s, host="gpu-node-3") == []


def test_failed_runs_are_counted_and_never_valued():
    s = MemoryStore()
    add_series(s, [1000.0, None, 1020.0, None], prefix="r")
    add(s, "partial", 5, 400.0, status="error")    # a failed run that wrote a number
    add_series(s, [None, None], prefix="oom", host="gpu-node-2")
    found = by_name(built(s))
    r = found["resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1"]
    assert (len(r.rows), r.failed, r.values) == (5, 3, [1000.0, 1020.0])
    assert r.current() == (1010.0, None)           # median of 1000 and 1020
    every = found["resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-2"]
    assert (len(every.rows), every.failed, every.values) == (2, 2, [])
    assert every.current() == (None, None)


def test_an_ok_run_without_the_figure_is_not_a_failed_one():
    s = MemoryStore()
    add(s, "m1", 0, 1000.0, peak_mem_gb=61.5)
    add(s, "m2", 1, 1000.0)                        # ok, but its memory was not measured
    add(s, "m3", 2, 1000.0, peak_mem_gb=62.5)
    add(s, "m4", 3, None)
    (one,) = built(s, "peak_mem_gb")
    assert (len(one.rows), one.failed, one.values) == (4, 1, [61.5, 62.5])


def test_a_configuration_that_does_not_measure_the_figure_is_no_series_of_it():
    s = MemoryStore()
    add_series(s, [1000.0, None], prefix="train")
    add(s, "inf", 1, 4.1, model="vit_b16", mode="forward_only", figure="latency_ms_p50")
    assert [x.name for x in built(s, "latency_ms_p50")] == [
        "vit_b16 forward_only fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1"]


# --- filters ---------------------------------------------------------------------------------

def _filter_store():
    s = MemoryStore()
    add(s, "r1", 0, 1000.0, host="gpu-node-1")
    add(s, "r2", 2, 1000.0, host="gpu-node-2")
    add(s, "r3", 4, 1000.0, host="gpu-node-12")
    add(s, "v1", 2, 500.0, host="gpu-node-1", model="vit_b16")
    add(s, "a1", 3, 700.0, host="a100-node-1", gpu=A100)
    return s


@pytest.mark.parametrize("filters, runs", [
    ({"model": "res*"}, {"r1", "r2", "r3", "a1"}),
    ({"model": "RESNET50"}, {"r1", "r2", "r3", "a1"}),          # case does not matter
    ({"model": "vit_*"}, {"v1"}),
    ({"host": "gpu-node-?"}, {"r1", "r2", "v1"}),
    ({"host": "gpu-node-1*"}, {"r1", "r3", "v1"}),
    ({"gpu": "*A100*"}, {"a1"}),
    ({"gpu": "*h100*", "model": "resnet50"}, {"r1", "r2", "r3"}),
    ({"after": "2026-10-03"}, {"r2", "r3", "v1", "a1"}),        # from that day on
    ({"before": "2026-10-03"}, {"r1"}),                         # strictly before it
    ({"after": "2026-10-03", "before": "2026-10-04T12:00"}, {"r2", "v1", "a1"}),
    ({"host": "nowhere"}, set()),
])
def test_filters_are_fnmatch_patterns_and_dates(filters, runs):
    assert set(hs.filtered(_filter_store().frame(), **filters)["run_id"]) == runs


def test_after_takes_days_or_hours_ago():
    s = MemoryStore()
    today = (datetime.datetime.now(datetime.timezone.utc) - START).total_seconds() / 86400
    add(s, "old", today - 10, 1000.0)
    add(s, "new", today - 2, 1000.0)
    add(s, "now", today - 0.25, 1000.0)
    assert set(hs.filtered(s.frame(), after="7d")["run_id"]) == {"new", "now"}
    assert set(hs.filtered(s.frame(), after="12h")["run_id"]) == {"now"}
    assert set(hs.filtered(s.frame(), before="7d")["run_id"]) == {"old"}


@pytest.mark.parametrize("what, value", [("after", "last tuesday"), ("before", "2026-13-45")])
def test_a_bad_date_is_one_line(what, value):
    with pytest.raises(UsageError) as caught:
        hs.filtered(_filter_store().frame(), **{what: value})
    assert str(caught.value) == ("--%s=%s is not a date (YYYY-MM-DD, an ISO time, or 7d / 24h "
                                 "ago)" % (what, value))


def test_an_unknown_figure_is_refused_with_what_it_may_mean():
    with pytest.raises(UsageError) as caught:
        hs.check_figure("latency")
    text = str(caught.value)
    assert text.startswith("--figure=latency is not a numeric figure of the history; did you "
                           "mean latency_ms_p50, latency_ms_p90, latency_ms_p99")
    assert "\n" not in text
    with pytest.raises(UsageError, match=r"^--figure=speed is not a numeric figure of the "
                                         r"history \(docs/csv.md lists them\)$"):
        hs.check_figure("speed")
    with pytest.raises(UsageError):
        hs.check_figure("model")                   # a column, but not a number
    assert hs.check_figure("peak_mem_gb").name == "peak_mem_gb"


# --- the sparkline ---------------------------------------------------------------------------

@pytest.mark.parametrize("values, line", [
    ([1, 2, 3, 4, 5, 6, 7, 8], "▁▂▃▄▅▆▇█"),
    ([10, 20, 10], "▁█▁"),
    ([5.0, 5.0, 5.0], "▄▄▄"),                      # flat: the middle, not the bottom
    ([], ""),
    ([100, 100, 100, 0], "███▁"),
    ([0, 1, 2, 3], "▁▃▆█"),                        # eight bins of equal width: 0, 2.67, 5.33, 8
])
def test_the_sparkline_goes_from_the_lowest_to_the_highest(values, line):
    assert hs.sparkline(values) == line


def test_the_sparkline_shows_the_last_runs_only():
    assert hs.sparkline(list(range(30)), width=24) == hs.sparkline(list(range(6, 30)))
    assert len(hs.sparkline(list(range(30)))) == 24


# --- a run's own spread ----------------------------------------------------------------------

@pytest.mark.parametrize("row, figure, spread", [
    ({"num_runs": 3, "spread_pct": 4.0}, "images_per_sec", 0.02),     # half of 4%
    ({"num_runs": 1, "spread_pct": 4.0, "jitter": 50.0, "step_images_per_sec": 1000.0},
     "images_per_sec", 0.05),                                         # one repeat: the steps
    ({"jitter": 30.0, "step_images_per_sec": 1200.0}, "images_per_sec", 0.025),
    ({"num_runs": 3, "spread_pct": float("nan")}, "images_per_sec", None),
    ({}, "images_per_sec", None),
    ({"num_runs": 3, "spread_pct": 4.0}, "latency_ms_p50", None),     # images/sec's own
])
def test_a_run_s_spread(row, figure, spread):
    assert hs.spread_of(row, figure) == (pytest.approx(spread) if spread is not None else None)


def test_a_shift_within_the_runs_own_spread_is_no_change():
    # -3%: a change for runs that repeat within 1%, none for runs whose repeats spread 10%
    # ((max - min) / median, so 5% each way).
    values = BEFORE + [v * 0.97 for v in BEFORE]
    for spread_pct, found in ((1.0, 1), (10.0, 0)):
        s = MemoryStore()
        add_series(s, values, prefix="r", spreads=[spread_pct] * len(values))
        (one,) = built(s)
        assert len(one.segment().changes) == found


# --- a change and what changed with it -------------------------------------------------------

def _changed(drivers=None, tensorflows=None):
    s = MemoryStore()
    add_series(s, BEFORE + AFTER, prefix="r", drivers=drivers, tensorflows=tensorflows)
    (one,) = built(s)
    return s, one


def test_the_current_level_and_its_change_are_the_medians_of_the_segments():
    _, one = _changed()
    (change,) = one.segment().changes
    assert (change.index, change.before, change.after) == (8, 1000.0, 920.0)
    assert change.pct == pytest.approx(-8.0)
    assert one.current() == (920.0, pytest.approx(-8.0))
    s = MemoryStore()
    add_series(s, BEFORE, prefix="flat")
    (flat,) = built(s)
    assert flat.current() == (1000.0, None)


def test_the_environment_facts_that_changed_are_named():
    s, one = _changed(drivers=["570.86.15"] * 8 + ["580.65.06"] * 8)
    (change,) = one.segment().changes
    assert hs.attribution(one, change, s.environment()) == \
        "NVIDIA driver 570.86.15 -> 580.65.06"
    s, one = _changed(drivers=["570.86.15"] * 8 + ["580.65.06"] * 8,
                      tensorflows=["2.20.0"] * 8 + ["2.21.0"] * 8)
    assert hs.attribution(one, one.segment().changes[0], s.environment()) == \
        "NVIDIA driver 570.86.15 -> 580.65.06; TensorFlow 2.20.0 -> 2.21.0"


def test_no_recorded_change_when_nothing_changed_near_the_change_point():
    s, one = _changed()
    (change,) = one.segment().changes
    assert hs.attribution(one, change, s.environment()) == "no recorded environment change"
    # TensorFlow changed three runs before the change: most of the 5 runs before it had the new
    # one already (most of all 8 runs before it had the old one).
    s, one = _changed(tensorflows=["2.20.0"] * 5 + ["2.21.0"] * 11)
    assert hs.attribution(one, one.segment().changes[0], s.environment()) == \
        "no recorded environment change"
    # Nothing recorded at all (results imported from CSV files without manifests).
    assert hs.attribution(one, one.segment().changes[0], {}) == "no recorded environment change"


def test_fact_changes_compares_what_most_runs_had_on_each_side():
    old = {"NVIDIA driver": "570.86.15", "TensorFlow": "2.21.0", "Kernel": "6.1"}
    new = {"NVIDIA driver": "580.65.06", "TensorFlow": "2.21.0"}
    assert hs.fact_changes([old, old, dict(old, **{"NVIDIA driver": "580.65.06"})],
                           [new, new, old]) == [("NVIDIA driver", "570.86.15", "580.65.06")]
    # A fact one side never recorded is not known to have changed.
    assert hs.fact_changes([old], [{"TensorFlow": "2.21.0"}]) == []
    assert hs.fact_changes([], [new]) == []


@pytest.mark.parametrize("figure, pct, way", [
    ("images_per_sec", -8.0, "worse"), ("images_per_sec", 5.0, "better"),
    ("latency_ms_p50", -7.0, "better"), ("latency_ms_p50", 7.0, "worse"),
    ("peak_mem_gb", 10.0, "worse"), ("joules_per_image", -3.0, "better"),
])
def test_direction_follows_the_figure_s_declared_better(figure, pct, way):
    assert hs.direction(figure, pct) == way


def test_a_figure_without_a_direction_just_changed():
    undirected = [f for f in hs.numeric_figures() if not figures.BY_NAME[f].better]
    assert "gpu_util_pct_mean" in undirected
    assert hs.direction("gpu_util_pct_mean", -20.0) == "changed"
    assert hs.direction("gpu_util_pct_mean", 20.0) == "changed"


# --- the fleet -------------------------------------------------------------------------------

def test_the_fleet_holds_each_host_s_latest_value_against_their_median():
    s = MemoryStore()
    for n, values in enumerate(([800.0, 1000.0], [1010.0], [990.0], [1000.0, 900.0]), 1):
        add_series(s, values, prefix="h%d" % n, host="gpu-node-%d" % n)
    add(s, "multi", 5, 7000.0, devices=8, host="gpu-node-1")       # another configuration
    add(s, "failed", 6, None, host="gpu-node-2")                    # no value: not its latest
    rows = [r for r in hs.fleet(hs.filtered(s.frame()), "images_per_sec", "host")
            if r.members > 1]
    # Latest: 1000, 1010, 990, 900; median (990 + 1000) / 2 = 995.
    assert {(r.member, r.latest) for r in rows} == {
        ("gpu-node-1", 1000.0), ("gpu-node-2", 1010.0), ("gpu-node-3", 990.0),
        ("gpu-node-4", 900.0)}
    assert {r.median for r in rows} == {995.0} and {r.members for r in rows} == {4}
    four = next(r for r in rows if r.member == "gpu-node-4")
    assert four.pct == pytest.approx((900.0 / 995.0 - 1) * 100)       # -9.55%
    assert four.config == "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3"


def test_the_fleet_by_gpu_takes_single_gpu_results_by_uuid():
    s = MemoryStore()
    for n, (uuid, value) in enumerate((("GPU-a", 1000.0), ("GPU-b", 1020.0), ("GPU-c", 880.0))):
        add(s, "g%d" % n, n, value, host="gpu-node-1",
            env=environment("gpu-node-1", uuid=uuid))
    add(s, "eight", 4, 7900.0, devices=8, host="gpu-node-1")
    rows = hs.fleet(hs.filtered(s.frame()), "images_per_sec", "gpu")
    assert sorted((r.member, r.latest, r.median) for r in rows) == [
        ("GPU-a", 1000.0, 1000.0), ("GPU-b", 1020.0, 1000.0), ("GPU-c", 880.0, 1000.0)]


def test_change_points_come_from_the_published_method():
    # The series hands its values and spreads to history.changes unchanged.
    s = MemoryStore()
    add_series(s, BEFORE + AFTER, prefix="r", spreads=[1.0] * 16)
    (one,) = built(s)
    assert one.segment() == cp.find_changes(BEFORE + AFTER, [0.005] * 16)
