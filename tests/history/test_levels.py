"""history.levels: `tfbench history` keeps each series' current level in the store
(series_levels) and finds change points again only in the series whose results changed; what
it lists is what every series' own Series.current() gives, filters or not, on SQLite and
PostgreSQL, on a read-only store and on one made before the table.

The reference is the full path: every column of every result read, each series building its own
frame and finding its own level (views.list_table without levels); the expected cells themselves
are pinned by test_views.
"""

import datetime
import io
import sqlite3

import pytest
import sqlalchemy as sa

from history_results import A100, START, MemoryStore, add, add_series, environment
from history_stores import read_only, store, store_url  # noqa: F401 - fixtures
from tfbench.cli import history as history_cli
from tfbench.history import changes, levels, record, schema, views
from tfbench.history import series as hs
from tfbench.history.store import Store

BEFORE = [1000, 1004, 996, 1002, 998, 1000, 1003, 997]
AFTER = [920, 924, 916, 921, 919, 922, 918, 920]
LOW = [950, 952, 948, 951, 949, 950, 953, 947, 950, 950]
HIGH = [1007, 1009, 1005, 1008, 1006, 1007]
SERIES_WITH_VALUES = 8      # of fill()'s images/sec series (vit_b16's too); a ninth only failed


def fill(s):
    """Series of every kind a listing meets (s: a store or a MemoryStore)."""
    add_series(s, BEFORE + AFTER + [None], prefix="w", host="gpu-node-1",
               drivers=["570.86.15"] * 8 + ["580.65.06"] * 9)
    add_series(s, LOW + HIGH, prefix="b", host="gpu-node-2", spreads=[1.0, None] * 8)
    # A CPU: no GPU model, a NaN cell among the GPU results' (named by its device).
    add_series(s, [50.0, 51.0, 49.5, 50.5], prefix="c", host="cpu-node", device_kind="cpu",
               device_name="CPU")
    # A result written with another UTC offset: its text sorts before the one written at noon
    # UTC that day, it ran three hours after it (the last value is its).
    add_series(s, [800, 801, 799], prefix="z", host="gpu-node-7")
    add(s, "z-04", 4.5, 803.0, host="gpu-node-7")
    add(s, "z-tz", 5, 802.0, host="gpu-node-7", timestamp="2026-10-05T10:00:00-05:00")
    add_series(s, [None, None], prefix="oom", host="gpu-node-6")
    # NVML named its GPU otherwise in its last result: the series is named after that one.
    add_series(s, [700, 701], prefix="p", host="gpu-node-8")
    add(s, "p-02", 2, 702.0, host="gpu-node-8", env=environment("gpu-node-8",
                                                                 gpu="NVIDIA H100 NVL"))
    add_series(s, [5200, 5190, 5210], prefix="a", host="a100-node-1", gpu=A100)
    for day in range(3):    # a run on two hosts: one result of the series of both
        rows = [{"run_id": "m%d" % day, "status": "ok", "model": "resnet50",
                 "mode": "training", "precision": "fp16", "batch_size": "64",
                 "image_size": "224", "num_devices": "8", "num_workers": "2",
                 "device_kind": "gpu", "device_name": "NVIDIA H100 80GB HBM3",
                 "hostname": host, "images_per_sec": "7000.0",
                 "timestamp": (START + datetime.timedelta(days=day)).isoformat()}
                for host in ("gpu-node-4", "gpu-node-5")]
        for result in record.from_rows(rows, "launch", {"m%d" % day: {"environment": {
                "before": environment("gpu-node-4", gpus=8)}}}):
            s.add(result)
    for day, value in enumerate([4.1, 4.12, 4.08, 4.4, 4.42, 4.38]):
        add(s, "lat-%d" % day, day + 0.5, value, model="vit_b16", mode="forward_only",
            figure="latency_ms_p50", images_per_sec=64000.0 / value)
    return s


def filled(s):
    """A real store holding fill()'s results (added together: one transaction)."""
    s.add_many(fill(MemoryStore()).recorded)
    return s


FILTERS = [
    [],
    ["--model=RES*"],
    ["--host=gpu-node-5"],                  # the second host of the two-host run
    ["--host=gpu-node-?", "--model=resnet50"],
    ["--gpu=*a100*"],
    ["--gpu=*H100*"],
    ["--after=2026-10-05"],                 # cuts series in time
    ["--before=2026-10-05T14:00:00"],       # the -05:00 result ran after that
    ["--after=2026-10-03", "--before=2026-10-10"],
    ["--figure=latency_ms_p50"],
    ["--host=nowhere"],
]


def listing(s, *argv):
    """What `tfbench history ARGV --format=csv` prints (views.main: the listing's own path)."""
    out = io.StringIO()
    args = history_cli._parser().parse_args(["list", "--format=csv", *argv])
    assert views.main(s, args, out) == 0
    return out.getvalue()


def reference(s, *argv):
    """The same table by the full path: every column read, each series' own current()."""
    args = history_cli._parser().parse_args(["list", "--format=csv", *argv])
    found = hs.build(hs.filtered(s.frame(), args.model, args.host, args.gpu, args.after,
                                 args.before), args.figure)
    out = io.StringIO()
    views._write(out, views.list_table(found), "csv", "no results%s" % (
        " match the filters" if any((args.model, args.host, args.gpu, args.after, args.before))
        else " yet"))
    return out.getvalue()


@pytest.fixture
def calls(monkeypatch):
    """The values of each series whose change points were found, in call order."""
    found = []
    real = changes.find_changes

    def counted(values, *args, **kwargs):
        found.append(list(values))
        return real(values, *args, **kwargs)
    monkeypatch.setattr(changes, "find_changes", counted)
    return found


def kept(s, figure="images_per_sec"):
    return {k: (r["inputs"], r["level"], r["change_pct"]) for k, r in s.levels(figure).items()}


# --- the listing is the full one -------------------------------------------------------------

@pytest.mark.parametrize("argv", FILTERS, ids=lambda a: " ".join(a) or "all")
def test_the_listing_is_the_full_ones_cached_or_not(argv):
    s = fill(MemoryStore())
    expected = reference(s, *argv)
    assert listing(s, *argv) == expected        # found, and kept
    assert listing(s, *argv) == expected        # read back


def test_the_listing_orders_by_time_and_names_a_series_after_its_last_result():
    rows = listing(fill(MemoryStore())).splitlines()
    # 49.5 to 51 in eight bands of 0.1875: 50 in the third, 50.5 in the sixth.
    assert "resnet50 training fp16 bs64 224px on CPU @ cpu-node,4,0,2026-10-01,2026-10-04,50.5," \
        "50.25,,\u2583\u2588\u2581\u2586" in rows
    assert any(r.startswith("resnet50 training fp16 bs64 224px on NVIDIA H100 NVL @ gpu-node-8,3,")
               for r in rows)
    (z,) = [r for r in rows if "@ gpu-node-7," in r]
    assert z.split(",")[:6] == ["resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 "
                                "@ gpu-node-7", "5", "0", "2026-10-01", "2026-10-05", "802.0"]


@pytest.mark.slow   # a store made and filled, every filter listed twice: seconds
def test_the_listing_of_a_real_store_is_the_full_ones(store):
    filled(store)
    for argv in FILTERS:
        expected = reference(store, *argv)
        assert listing(store, *argv) == expected, argv
        assert listing(store, *argv) == expected, argv


# --- found again only where the results changed ----------------------------------------------

@pytest.mark.slow   # a store made and written five times
def test_only_the_series_whose_results_changed_are_found_again(store, calls):
    filled(store)
    first = listing(store)
    assert len(calls) == SERIES_WITH_VALUES
    assert len(kept(store)) == SERIES_WITH_VALUES + 1     # the failed series' level: none
    calls.clear()
    assert listing(store) == first and calls == []

    # A new result of gpu-node-2's series: that series alone.
    add(store, "b-16", 16, 1010.0, host="gpu-node-2")
    expected = reference(store)
    calls.clear()
    now = listing(store)
    assert now == expected and now != first
    assert calls == [LOW + HIGH + [1010.0]]
    with store.engine.connect() as conn:
        newest = conn.execute(sa.select(schema.results.c.id).where(
            schema.results.c.run_id == "b-16")).scalar()
    assert [(r["runs"], r["last_id"]) for r in store.levels("images_per_sec").values()
            if r["last_id"] == newest] == [(17, newest)]

    # A result's value changed in place (a worker's row joined it, or an older tfbench wrote
    # it): no new result, the series' last id and count unchanged, and found again.
    with store.engine.begin() as conn:
        conn.execute(schema.results.update().where(schema.results.c.run_id == "w-15")
                     .values(images_per_sec=1001.0))
    expected = reference(store)
    calls.clear()
    changed = listing(store)
    assert changed == expected and changed != now
    assert len(calls) == 1 and calls[0][15] == 1001.0

    # A listing cut in time finds the cut series' levels and keeps none of them.
    before = kept(store)
    calls.clear()
    assert listing(store, "--after=2026-10-12") == reference(store, "--after=2026-10-12")
    assert calls and kept(store) == before
    calls.clear()
    assert listing(store) == changed and calls == []


def test_another_method_finds_every_level_again(calls, monkeypatch):
    s = fill(MemoryStore())
    listing(s)
    calls.clear()
    monkeypatch.setattr(levels, "_method", lambda: b"a tfbench whose changes.py differs")
    listing(s)
    assert len(calls) == SERIES_WITH_VALUES
    calls.clear()
    listing(s)
    assert calls == []


def test_a_kept_row_is_used_only_for_the_values_it_was_found_from():
    # A row kept for other values (the series' results changed since) is never read back.
    s = fill(MemoryStore())
    listing(s)
    key = next(k for k, r in s.levels("images_per_sec").items() if r["change_pct"] is not None)
    s.save_levels([dict(s.levels("images_per_sec")[key], level=1.0, change_pct=50.0,
                        inputs="0" * 40)])
    assert listing(s) == reference(s)


# --- stores that cannot keep it --------------------------------------------------------------

@pytest.mark.slow   # a store made, filled and opened read-only
@pytest.mark.parametrize("made_before_the_table", [False, True])
def test_a_read_only_store_is_listed_without_keeping(tmp_path, calls, made_before_the_table):
    path = tmp_path / "store" / "history.sqlite"
    s = filled(Store("sqlite:///%s" % path))
    s.close()
    if made_before_the_table:
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE series_levels")
    with read_only(str(path)):
        s = Store("sqlite:///%s" % path)
        try:
            expected = reference(s)
            calls.clear()
            assert listing(s) == expected and listing(s) == expected
            assert len(calls) == 2 * SERIES_WITH_VALUES       # nothing kept: found each time
            assert s.levels("images_per_sec") == {}
        finally:
            s.close()
    s = Store("sqlite:///%s" % path)    # writable again: the table is made, then kept
    try:
        assert s.levels("images_per_sec") == {}
        listing(s)
        assert len(kept(s)) == SERIES_WITH_VALUES + 1
    finally:
        s.close()


def test_a_store_made_before_the_table_gets_it_when_opened(store_url):
    Store(store_url).close()
    engine = sa.create_engine(store_url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE series_levels")
    s = Store(store_url)
    try:
        with s.engine.connect() as conn:
            assert "series_levels" in sa.inspect(conn).get_table_names()
        assert s.save_levels([{"series_key": "k", "figure": "images_per_sec", "inputs": "d",
                               "runs": 3, "last_id": 7, "level": 1000.5,
                               "change_pct": -8.25}])
        (row,) = s.levels("images_per_sec").values()
        assert (row["series_key"], row["inputs"], row["runs"], row["last_id"], row["level"],
                row["change_pct"]) == ("k", "d", 3, 7, 1000.5, -8.25)
        assert s.levels("latency_ms_p50") == {}
    finally:
        s.close()
        engine.dispose()
