"""A configuration's accepted level in the history (tfbench.history.baseline): the keys the store
gives a row, this host's level (the median of its series' current segment), the fleet's median
for a host without one, neither; the expected levels are computed by hand from the planted
values."""

import datetime
import statistics

import pytest

from tfbench.errors import UsageError
from tfbench.history import baseline as hb
from tfbench.history import location, record, store

H100 = "NVIDIA H100 80GB HBM3"
START = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


def row(run_id="x", host="node-1", ips=None, day=0.0, gpu=H100, **cells):
    """A results row of resnet50 fp16 batch 64 on one GPU, as a results CSV holds it."""
    out = {"run_id": run_id, "status": "ok" if ips is not None else "error", "model": "resnet50",
           "mode": "training", "precision": "fp16", "batch_size": "64", "image_size": "224",
           "num_devices": "1", "device_kind": "gpu", "device_name": gpu, "hostname": host,
           "timestamp": (START + datetime.timedelta(days=day)).isoformat()}
    if ips is not None:
        out["images_per_sec"] = repr(float(ips))
    out.update({k: str(v) for k, v in cells.items()})
    return out


def add(s, *rows, nvml_name=None):
    """Adds each row with the environment its manifest would hold (NVML names the GPU
    `nvml_name`, else as the row does)."""
    for r in rows:
        env = {"hostname": r["hostname"], "nvidia": {"gpus": [
            {"nvml_index": 0, "name": nvml_name or r["device_name"],
             "uuid": "GPU-" + r["hostname"]}]}}
        for result in record.from_rows([r], "run", {r["run_id"]: {"environment": {
                "before": env}}}):
            s.add(result)


def series(s, host, values, prefix, first_day=0.0, nvml_name=None, **cells):
    add(s, *[row("%s-%02d" % (prefix, i), host, v, first_day + i, **cells)
             for i, v in enumerate(values)], nvml_name=nvml_name)


@pytest.fixture
def history(tmp_path):
    s = store.Store(location.url_for(str(tmp_path / "history.sqlite")))
    yield s
    s.close()


def test_keys_are_the_ones_the_store_gives(history):
    add(history, row("a", "node-1", 1000.0), row("b", "node-2", 1000.0),
        row("c", "node-1", 1000.0, batch_size=128))
    stored = {r["run_id"]: (r["config_key"], r["series_key"])
              for _, r in history.frame().iterrows()}
    assert hb.keys(row("a", "node-1", 1000.0)) == stored["a"]
    # The row's hostname first; `hostname` for a row without one.
    without = {k: v for k, v in row("a", "node-1").items() if k != "hostname"}
    assert hb.keys(without, "node-1") == stored["a"]
    # Another host: the same configuration, another series; another batch: another
    # configuration.
    assert stored["b"][0] == stored["a"][0] and stored["b"][1] != stored["a"][1]
    assert stored["c"][0] != stored["a"][0]
    # What is measured (and the run id) is no part of the configuration.
    assert hb.keys(row("z", "node-1", 1.0, step_images_per_sec="3")) == stored["a"]


@pytest.mark.slow   # 36 results added and a change point found: over half a second
def test_this_host_s_level_is_the_median_of_its_current_segment(history):
    # node-1 ran at about 1100 for 12 runs, then at about 1000 for 12 (a sustained 9% shift,
    # noise 0.3%): its level is the median of the last 12.
    before = [1100.0, 1103.0, 1097.0, 1101.0, 1099.0, 1102.0, 1098.0, 1100.0, 1104.0, 1096.0,
              1101.0, 1099.0]
    after = [1000.0, 1002.0, 998.0, 1003.0, 997.0, 1001.0, 999.0, 1000.0, 1004.0, 996.0,
             1002.0, 998.0]
    series(history, "node-1", before + after, "n1")
    series(history, "node-2", [1500.0] * 5, "n2")                 # another host: not its level
    series(history, "node-1", [700.0] * 5, "b128", batch_size=128)  # another configuration
    add(history, row("failed", "node-1", None, day=30))          # a failed run: no value
    found = hb.levels(history, row("now", "node-1"), ["images_per_sec"])
    level = found["images_per_sec"]
    assert (level.source, level.count) == (hb.HOST, 12)
    assert level.value == pytest.approx(statistics.median(after)) == pytest.approx(1000.0)
    assert level.text() == ("the history (this host's level: the median of its current "
                            "segment, 12 runs)")


def test_a_host_that_never_changed_is_held_to_the_median_of_all_its_runs(history):
    values = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    series(history, "node-1", values, "n1")
    level = hb.levels(history, row("now", "node-1"), ["images_per_sec"])["images_per_sec"]
    assert (level.value, level.count) == (1000.0, 5)


@pytest.mark.slow   # 9 results committed to SQLite: over half a second
def test_a_host_without_a_series_gets_the_fleet_median_of_its_gpu_model(history):
    # Three hosts; each one's latest value counts (980, 1000, 1040): the median is 1000 (of
    # every run, 1040).
    series(history, "node-2", [1300.0, 980.0], "n2")
    series(history, "node-3", [1200.0, 1000.0], "n3")
    series(history, "node-4", [1040.0], "n4")
    series(history, "a100-1", [5000.0], "a1", gpu="NVIDIA A100-SXM4-80GB")  # another GPU model
    # The same configuration on GPUs NVML names otherwise: the host's own GPU model counts.
    series(history, "pcie-1", [600.0], "p1", nvml_name="NVIDIA H100 PCIe")
    found = hb.levels(history, row("now", "new-node"), ["images_per_sec"], gpu_model=H100)
    level = found["images_per_sec"]
    assert (level.source, level.value, level.count) == (hb.FLEET, 1000.0, 3)
    assert level.text() == "the history (the fleet's median: 3 hosts' latest on %s)" % H100
    # A host whose only run failed has no level of its own: the fleet's too.
    add(history, row("f", "node-9", None))
    assert hb.levels(history, row("now", "node-9"), ["images_per_sec"])[
        "images_per_sec"].source == hb.FLEET


def test_neither_is_no_level_and_the_results_judged_are_left_out(history):
    assert hb.levels(history, row("now", "node-1"), ["images_per_sec"]) == {}
    # The run being judged may already be in the history: it is not its own baseline.
    add(history, row("now", "node-1", 900.0))
    assert hb.levels(history, row("now", "node-1"), ["images_per_sec"], exclude=["now"]) == {}
    assert hb.levels(history, row("now", "node-1"), ["images_per_sec"])[
        "images_per_sec"].value == 900.0
    # A figure the history keeps no value of, or does not keep at all: no level.
    assert hb.levels(history, row("x", "node-1"), ["allreduce_busbw_gbs", "efficiency_pct"]) \
        == {}


def test_the_store_is_opened_or_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TFBENCH_HISTORY", "")
    with pytest.raises(UsageError, match=r"^--baseline=history: the history is off"):
        hb.open_store(None)
    path = tmp_path / "h.sqlite"
    opened = hb.open_store(str(path))
    assert opened.where() == str(path)
    opened.close()
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database " * 100)
    with pytest.raises(UsageError) as caught:
        hb.open_store(str(bad))
    assert str(caught.value) == ("--baseline=history: the history at %s cannot be opened: the "
                                 "file is not a SQLite database" % bad)
