"""Peak memory: device names TensorFlow accepts, device memory or nothing on GPU runs, GiB."""

import pytest

from tfbench.output import csv_out
from tfbench.output import console
from tfbench.measure import memory

GIB = 1 << 30


@pytest.mark.parametrize("name,expected", [
    ("/gpu:0", "GPU:0"),                                       # the runner's DeviceSet
    ("/job:localhost/replica:0/task:0/device:GPU:1", "GPU:1"),
    ("/device:gpu:3", "GPU:3"),
    ("GPU:2", "GPU:2"),
    ("/cpu:0", "CPU:0"),
    ("/job:worker/task:0", None),
])
def test_device_names_become_what_get_memory_info_takes(name, expected):
    assert memory.tf_device(name) == expected


class _FakeStats:
    """tf.config.experimental's memory statistics, strict about device names as TF is."""

    def __init__(self, peaks):
        self.peaks = dict(peaks)
        self.calls = []

    def _check(self, device):
        if device not in self.peaks:
            raise ValueError("Failed parsing device name: '%s'" % device)

    def reset_memory_stats(self, device):
        self.calls.append(("reset", device))
        self._check(device)

    def get_memory_info(self, device):
        self.calls.append(("info", device))
        self._check(device)
        return {"current": 10, "peak": self.peaks[device]}


@pytest.fixture
def stats(monkeypatch):
    import tensorflow as tf
    fake = _FakeStats({"GPU:0": 3 * GIB, "GPU:1": 5 * GIB})
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", fake.reset_memory_stats)
    monkeypatch.setattr(tf.config.experimental, "get_memory_info", fake.get_memory_info)
    return fake


def test_the_runners_gpu_names_read_device_memory(stats):
    names = ("/gpu:0", "/gpu:1")
    assert memory.reset_peak(names) is None
    peaks, reason = memory.peak_device_bytes(names)
    assert peaks == {"/gpu:0": 3 * GIB, "/gpu:1": 5 * GIB} and reason is None
    assert stats.calls == [("reset", "GPU:0"), ("reset", "GPU:1"),
                           ("info", "GPU:0"), ("info", "GPU:1")]


def test_cpu_devices_are_never_asked(stats):
    assert memory.reset_peak(["/device:CPU:0", "/cpu:1"]) is None
    assert memory.peak_device_bytes(["/cpu:0"]) == ({"/cpu:0": None}, None)
    assert stats.calls == []


def test_a_device_without_statistics_says_why(stats):
    peaks, reason = memory.peak_device_bytes(["/gpu:0", "/gpu:7"])
    assert peaks == {"/gpu:0": 3 * GIB, "/gpu:7": None}
    assert reason == "GPU:7: ValueError: Failed parsing device name: 'GPU:7'"
    assert memory.reset_peak(["/gpu:7"]) == (
        "could not reset the peak of GPU:7 (ValueError: Failed parsing device name: 'GPU:7')")


def test_host_peak_rss_is_positive_bytes():
    rss = memory.host_peak_rss_bytes()
    assert rss is not None and rss > 10 * (1 << 20)  # a Python process with numpy is > 10 MiB


def test_gpu_summary_is_device_memory_in_gib():
    s = memory.memory_summary("gpu", {"GPU:0": 4 * GIB, "GPU:1": 2 * GIB}, 1 * GIB,
                              images_per_sec=600.0,
                              warmup_peaks={"GPU:0": 7 * GIB, "GPU:1": 6 * GIB})
    assert s["peak_mem_gb"] == pytest.approx(4.0)
    assert s["warmup_peak_mem_gb"] == pytest.approx(7.0)
    assert s["peak_mem_source"] == "device"
    assert s["host_peak_rss_gb"] == pytest.approx(1.0)
    assert s["images_per_sec_per_gb"] == pytest.approx(100.0)  # 600 / (4 + 2)
    assert s["device_peak_mem_gb"] == {"GPU:0": 4.0, "GPU:1": 2.0}
    assert {"peak_mem_gb", "warmup_peak_mem_gb", "host_peak_rss_gb",
            "images_per_sec_per_gb"} <= set(csv_out.COLUMN_NAMES)
    assert console.memory_lines(s) == [
        "Memory: peak 4.00 GiB per device (steady state; warm-up 7.00 GiB), host peak RSS "
        "1.00 GiB, 100.0 images/sec/GiB"]


def test_a_gpu_run_never_reports_host_memory_as_device_memory():
    s = memory.memory_summary("gpu", {"/gpu:0": None}, 2 * GIB, images_per_sec=50.0,
                              unavailable="GPU:0: ValueError: no stats")
    assert s["peak_mem_gb"] is None and s["peak_mem_source"] is None
    assert s["images_per_sec_per_gb"] is None
    assert s["host_peak_rss_gb"] == pytest.approx(2.0)
    assert console.memory_lines(s) == [
        "Memory: device peak not available (GPU:0: ValueError: no stats); host peak RSS "
        "2.00 GiB"]


def test_a_process_that_runs_no_step_reports_no_memory_and_says_why():
    """A parameter-server controller: its devices and host are idle, on a CPU run too."""
    s = memory.memory_summary("cpu", {}, None, images_per_sec=50.0,
                              unavailable="the workers run the steps")
    assert s["peak_mem_gb"] is None and s["host_peak_rss_gb"] is None
    assert s["peak_mem_source"] is None and s["images_per_sec_per_gb"] is None
    assert console.memory_lines(s) == [
        "Memory: device peak not available (the workers run the steps)"]


def test_cpu_summary_is_the_host_rss_labelled_so():
    s = memory.memory_summary("cpu", {"/cpu:0": None}, 2 * GIB, images_per_sec=50.0)
    assert s["peak_mem_gb"] == pytest.approx(2.0)
    assert s["peak_mem_source"] == "host"
    assert s["images_per_sec_per_gb"] == pytest.approx(25.0)
    assert console.memory_lines(s) == [
        "Memory: peak 2.00 GiB host RSS (no device memory statistics), 25.0 images/sec/GiB"]


def test_summary_nothing_known():
    s = memory.memory_summary("cpu", {}, None, images_per_sec=50.0)
    assert s["peak_mem_gb"] is None and s["images_per_sec_per_gb"] is None
    assert console.memory_lines(s) == ["Memory: not available"]


def test_images_per_sec_per_gb_guards():
    assert memory.images_per_sec_per_gb(100.0, 4.0) == 25.0
    assert memory.images_per_sec_per_gb(None, 4.0) is None
    assert memory.images_per_sec_per_gb(100.0, 0.0) is None


class _Usage:
    def __init__(self, maxrss):
        self.ru_maxrss = maxrss


@pytest.mark.parametrize("platform, maxrss, expected", [
    ("linux", 1000, 1024000),       # getrusage's ru_maxrss is KiB on Linux
    ("darwin", 1000, 1000),         # and bytes on macOS
])
def test_host_peak_rss_units(monkeypatch, platform, maxrss, expected):
    monkeypatch.setattr(memory.resource, "getrusage", lambda who: _Usage(maxrss))
    monkeypatch.setattr(memory.sys, "platform", platform)
    assert memory.host_peak_rss_bytes() == expected


def test_host_peak_rss_falls_back_to_psutils_rss(monkeypatch):
    import types

    import psutil

    def refused(who):
        raise OSError("no getrusage")
    monkeypatch.setattr(memory.resource, "getrusage", refused)
    monkeypatch.setattr(psutil, "Process", lambda: types.SimpleNamespace(
        memory_info=lambda: types.SimpleNamespace(rss=12345)))
    assert memory.host_peak_rss_bytes() == 12345


def test_every_accelerator_is_read_past_one_that_fails(stats):
    assert memory.tf_device("/device:GPU:*") is None          # a type without an index
    assert memory._is_accelerator("/device:TPU:0") and not memory._is_accelerator("/cpu:0")
    assert memory.reset_peak(["/cpu:0", "/gpu:0"]) is None
    assert stats.calls == [("reset", "GPU:0")]
    peaks, reason = memory.peak_device_bytes(["/gpu:7", "/cpu:0", "/gpu:1"])
    assert peaks == {"/gpu:7": None, "/cpu:0": None, "/gpu:1": 5 * GIB}
    assert reason == "GPU:7: ValueError: Failed parsing device name: 'GPU:7'"
    stats.peaks["GPU:0"] = 0
    assert memory.peak_device_bytes(["/gpu:0"]) == ({"/gpu:0": None},
                                                   "GPU:0: TensorFlow reported no peak")
    assert memory._why(RuntimeError()) == "RuntimeError: "
    s = memory.memory_summary("gpu", {"/gpu:0": None}, None)
    assert s["memory_unavailable"] == "no device reported a peak"
    assert memory.memory_summary("cpu", {}, None)["peak_mem_source"] is None
    assert memory.memory_summary("gpu", {"/gpu:0": GIB}, None)["memory_unavailable"] is None


def test_an_evaluations_own_peak_is_its_own_figure_beside_the_steady_state():
    s = memory.memory_summary("gpu", {"GPU:0": 4 * GIB}, None, images_per_sec=400.0,
                              eval_peaks={"GPU:0": 5 * GIB})
    assert (s["peak_mem_gb"], s["eval_peak_mem_gb"]) == (4.0, 5.0)
    assert "eval_peak_mem_gb" not in csv_out.COLUMN_NAMES   # the JSON manifest's
    assert console.memory_lines(s) == [
        "Memory: peak 4.00 GiB per device (steady state; evaluation 5.00 GiB), "
        "100.0 images/sec/GiB"]
