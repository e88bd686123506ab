"""The figures judged without a baseline (tfbench.validate.figures.published): images/sec
against a published band computed by hand, the scaling efficiency against its least, and the
stability rule that makes an unstable figure a WARN, never a PASS; with --baseline=history
(with_history), the history's level judged by the baseline file's rules."""

import pytest

from tfbench.history import location, record, store
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


# --- --baseline=history: the history's level, judged by the baseline file's rules -------------

H100 = "NVIDIA H100 80GB HBM3"
H100_KEY = {"model": "resnet50", "mode": "training", "precision": "fp16", "batch_size": 64,
            "num_devices": 1, "device_kind": "gpu", "device_name": H100}


def _row(run_id, host, ips=None, day=0, **cells):
    """A results row of H100_KEY's configuration (but for `cells`) run on `host`."""
    row = {"run_id": run_id, "status": "ok", "model": "resnet50", "mode": "training",
           "precision": "fp16", "batch_size": "64", "global_batch_size": "64",
           "image_size": "224", "num_devices": "1", "device_kind": "gpu", "device_name": H100,
           "hostname": host, "timestamp": "2026-03-%02dT10:00:00+00:00" % (day + 1)}
    if ips is not None:
        row["images_per_sec"] = repr(float(ips))
    row.update(cells)
    return row


@pytest.fixture
def history(tmp_path):
    s = store.Store(location.url_for(str(tmp_path / "history.sqlite")))
    yield s
    s.close()


def _add(history, host, values, **cells):
    for day, value in enumerate(values):
        rows = [_row("%s-%d" % (host, day), host, value, day, **cells)]
        for result in record.from_rows(rows, "run"):
            history.add(result)


def _measured(host, figs, run_id="now"):
    return figures.Measured(host, H100_KEY, figs, rows=[_row(run_id, host)])


def _by_history(history, host, figs, said=None, tolerance=5.0, least=None):
    judge = figures.with_history(history, tolerance, least,
                                 say=(said.append if said is not None else lambda t: None))
    return {r.check: r for r in judge(_measured(host, figs))}


@pytest.mark.slow   # 5 results committed to SQLite and a baseline file read: about 1 s
def test_history_this_host_s_level_is_judged_as_a_baseline_file_judges(history, tmp_path):
    # This host's series holds 1000 images/sec: a run at 900 is 10% below; the limit is
    # 0.95 x 1000 = 950, as a baseline file holding 1000 sets it.
    _add(history, "node-1", [1000.0] * 5)
    row = _by_history(history, "node-1", {"images_per_sec": [900.0]})["images_per_sec"]
    assert (row.status, row.reason, row.value) == ("FAIL", "below_baseline", 900.0)
    assert row.expected == pytest.approx(950.0)
    assert row.figure == "900 images/sec (one run), 10.0% below"
    assert row.expectation == ("(95% of 1000 in the history (this host's level: the median of "
                               "its current segment, 5 runs))").join([">= 950 ", ""])
    # The same verdict as the baseline file's rules give against a file holding 1000.
    from tfbench.output import csv_out
    from tfbench.validate import baseline as baseline_lib
    path = str(tmp_path / "base.csv")
    csv_out.append_rows(path, [dict(_row("b", "node-1", 1000.0), schema_version="9")])
    [filed] = baseline_lib.judge({"images_per_sec": [900.0]}, baseline_lib.load_baseline(path),
                                 run=figures.run_key(H100_KEY), host="node-1")
    assert (filed.status, filed.reason, filed.figure, filed.value, filed.expected) == (
        row.status, row.reason, row.figure, row.value, row.expected)
    assert _by_history(history, "node-1", {"images_per_sec": [960.0]})[
        "images_per_sec"].status == "PASS"


@pytest.mark.slow   # 4 results committed to SQLite, the fleet read: about half a second
def test_history_a_host_without_its_own_gets_the_fleet_median(history):
    # Other hosts' latest: 1000, 1100, 1200 -> 1100; the limit 0.95 x 1100 = 1045.
    _add(history, "node-2", [1000.0])
    _add(history, "node-3", [900.0, 1100.0])
    _add(history, "node-4", [1200.0])
    said = []
    row = _by_history(history, "new-node", {"images_per_sec": [1000.0]}, said)[
        "images_per_sec"]
    assert (row.status, row.reason) == ("FAIL", "below_baseline")
    assert row.expected == pytest.approx(1045.0)
    assert "(95% of 1100 in the history (the fleet's median: 3 hosts' latest on " \
           "NVIDIA H100 80GB HBM3))" in row.expectation
    assert said == []


def test_history_with_neither_says_so_in_one_line_and_judges_as_without(history):
    _add(history, "node-1", [5000.0], num_devices="8")    # another configuration
    said = []
    m = {"images_per_sec": [900.0], "efficiency_pct": [70.0]}
    got = _by_history(history, "node-1", m, said)
    # The published rule's rows (no published figure at batch 64 on one H100 in fp16 is a
    # SKIP; a one-device run has no efficiency row).
    expected = {r.check: r for r in figures.published(5.0)(figures.Measured(
        "node-1", H100_KEY, m))}
    assert got == expected
    assert said == ["tfbench validate: --baseline=history: the history at %s holds no level "
                    "of resnet50 fp16 batch 64 on 1x H100 80GB SXM, neither this host's "
                    "(node-1) nor another host's: judged as without a baseline"
                    % history.where()]


def test_history_judges_what_it_has_and_the_rest_as_without(history):
    # images/sec against the history; the scaling efficiency, which the history does not keep,
    # against the least on GPUs (80%).
    _add(history, "node-1", [1000.0] * 3, num_devices="2", global_batch_size="128")
    judge = figures.with_history(history, 5.0)
    rows = judge(figures.Measured("node-1", dict(H100_KEY, num_devices=2),
                                  {"images_per_sec": [990.0], "efficiency_pct": [70.0]},
                                  rows=[_row("now", "node-1", num_devices="2",
                                             global_batch_size="128")]))
    assert [(r.check, r.status, r.reason) for r in rows] == [
        ("images_per_sec", "PASS", "ok"), ("efficiency_pct", "FAIL", "efficiency_low")]
    assert rows[0].expected == pytest.approx(950.0) and rows[1].expected == 80.0


def test_history_that_cannot_be_read_says_why_and_judges_as_without():
    import sqlalchemy

    class Locked:
        def where(self):
            return "/shared/history.sqlite"

        def frame(self, where=None):
            raise sqlalchemy.exc.OperationalError("SELECT", {}, Exception("database is locked"))
    said = []
    judge = figures.with_history(Locked(), 5.0, say=said.append)
    rows = judge(_measured("node-1", {"images_per_sec": [900.0]}))
    assert [(r.check, r.status, r.reason) for r in rows] == [
        ("images_per_sec", "SKIP", "no_expectation")]
    assert said == ["tfbench validate: --baseline=history: the history at "
                    "/shared/history.sqlite cannot be read (another process held it locked for "
                    "over 60 s); judged as without a baseline"]
