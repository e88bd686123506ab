import pytest

from tfbench import csv_out, memory

GB = 1 << 30


def test_cpu_device_is_not_available():
    memory.reset_peak(["/device:CPU:0", "CPU:0"])
    assert memory.peak_device_bytes(["/job:localhost/replica:0/task:0/device:CPU:0"]) == {
        "/job:localhost/replica:0/task:0/device:CPU:0": None}


def test_gpu_peak_read_and_reset_through_tensorflow(monkeypatch):
    import tensorflow as tf
    calls = []
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats",
                        lambda d: calls.append(("reset", d)))

    def info(device):
        calls.append(("info", device))
        if device == "GPU:1":
            raise ValueError("no stats")
        return {"current": 10, "peak": 3 * GB}

    monkeypatch.setattr(tf.config.experimental, "get_memory_info", info)
    names = ["/job:localhost/replica:0/task:0/device:GPU:0", "GPU:1", "/device:CPU:0"]
    memory.reset_peak(names)
    assert ("reset", "GPU:0") in calls and ("reset", "GPU:1") in calls
    assert not any(d.startswith("CPU") for _, d in calls)
    peaks = memory.peak_device_bytes(names)
    assert peaks == {names[0]: 3 * GB, "GPU:1": None, "/device:CPU:0": None}


def test_reset_errors_are_swallowed(monkeypatch):
    import tensorflow as tf

    def boom(device):
        raise ValueError("Failed parsing device name")

    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", boom)
    memory.reset_peak(["GPU:0"])


def test_host_peak_rss_is_positive_bytes():
    rss = memory.host_peak_rss_bytes()
    assert rss is not None and rss > 10 * (1 << 20)  # a Python process with numpy is > 10 MB


def test_summary_prefers_device_peak():
    s = memory.memory_summary({"GPU:0": 4 * GB, "GPU:1": 2 * GB}, 1 * GB, images_per_sec=600.0)
    assert s["peak_mem_gb"] == pytest.approx(4.0)
    assert s["peak_mem_source"] == "device"
    assert s["host_peak_rss_gb"] == pytest.approx(1.0)
    assert s["images_per_sec_per_gb"] == pytest.approx(100.0)  # 600 / (4 + 2)
    assert s["device_peak_mem_gb"] == {"GPU:0": 4.0, "GPU:1": 2.0}
    assert {"peak_mem_gb", "host_peak_rss_gb", "images_per_sec_per_gb"} <= set(
        csv_out.COLUMN_NAMES)
    assert memory.console_lines(s) == [
        "Memory: peak 4.00 GB per device, host peak RSS 1.00 GB, 100.0 images/sec/GB"]


def test_summary_falls_back_to_host_rss():
    s = memory.memory_summary({"CPU:0": None}, 2 * GB, images_per_sec=50.0)
    assert s["peak_mem_gb"] == pytest.approx(2.0)
    assert s["peak_mem_source"] == "host"
    assert s["images_per_sec_per_gb"] == pytest.approx(25.0)
    assert memory.console_lines(s) == [
        "Memory: peak 2.00 GB host RSS (no device memory statistics), 25.0 images/sec/GB"]


def test_summary_nothing_known():
    s = memory.memory_summary({}, None, images_per_sec=50.0)
    assert s["peak_mem_gb"] is None and s["images_per_sec_per_gb"] is None
    assert memory.console_lines(s) == ["Memory: not available"]


def test_images_per_sec_per_gb_guards():
    assert memory.images_per_sec_per_gb(100.0, 4.0) == 25.0
    assert memory.images_per_sec_per_gb(None, 4.0) is None
    assert memory.images_per_sec_per_gb(100.0, 0.0) is None
