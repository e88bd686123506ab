"""The NVML monitor (tfbench/monitors/nvml.py): the GPUs' static facts, the samples beside the
timed loop and their summary, over tests/support/fake_pynvml."""

import time

import pytest

from helpers import A100_DRIVER, FakeNvml, Ticks, a100, run_without_thread, ticking_clock
from tfbench import monitors
from tfbench.measure import nvml as nvml_mod
from tfbench.monitors.nvml import NvmlMonitor
from tfbench.output import console


def test_sampler_reads_through_injected_nvml():
    fake = FakeNvml([a100()])
    mon = NvmlMonitor([0], interval_sec=0, nvml=fake, clock=ticking_clock(), environ={})
    assert mon.available
    run_without_thread(mon)
    samples = mon.samples()
    assert [s["phase"] for s in samples] == ["start", "steady_start", "end"]
    assert [s["t"] for s in samples] == [1.0, 2.0, 3.0]
    first = samples[0]
    assert first["power_w"] == 60.0 and first["energy_j"] == 5000.0
    assert first["throttle_reasons"] == ["gpu_idle"] and first["throttle_mask"] == 1
    assert first["mem_used_bytes"] == 30 << 30 and first["mem_util_pct"] == 40
    s = mon.summary(images=1000, images_per_sec=250.0)
    assert s["nvml_monitor"] == "ok"
    assert s["power_w_mean"] == 400.0  # the end sample only: it describes the timed loop
    assert s["energy_j"] == pytest.approx(3500.0)
    assert s["joules_per_image"] == pytest.approx(3.5)
    assert s["images_per_sec_per_watt"] == pytest.approx(0.625)
    assert s["throttled"] is True
    assert s["gpus"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert console.monitor_warnings(s) == [
        "GPU throttled during the timed run (images/sec reflects the lowered clocks): "
        "GPU 0 [NVIDIA A100-SXM4-40GB] sw_power_cap in 100% of samples"]
    assert fake.inits == 1 and fake.shutdowns == 1


def test_static_info_pcie_nvlink():
    fake = FakeNvml([a100(), a100("GPU-bbbb", nvlinks=0)], system=A100_DRIVER)
    mon = NvmlMonitor(None, interval_sec=0, nvml=fake, environ=PCI)
    d0, d1 = mon.devices
    assert d0["gpu"] == 0 and d0["nvlink_active_links"] == 12
    assert d1["gpu"] == 1 and d1["nvlink_active_links"] is None
    assert d0["pcie_gen_max"] == 4 and d0["pcie_width_max"] == 16
    assert d0["power_limit_w"] == 400.0 and d0["compute_capability"] == "8.0"
    assert d0["memory_total_bytes"] == 40 << 30 and d0["energy_counter"] is True
    assert nvml_mod.system_info(fake) == {"driver_version": "550.54.15",
                                          "cuda_driver_version": "12.4",
                                          "nvml_version": "12.550.54.15"}
    mon.stop()


def test_unsupported_field_is_not_asked_again():
    fake = FakeNvml([a100(energy=False)])
    mon = NvmlMonitor([0], interval_sec=0, nvml=fake, environ={})
    run_without_thread(mon)
    assert all(s["energy_j"] is None for s in mon.samples())
    # static info asked once, then the reader once, then never again
    assert fake.calls.count(("nvmlDeviceGetTotalEnergyConsumption", "GPU-aaaa")) == 2
    s = mon.summary(images=10)
    assert s["energy_source"] == "power_integral"


def test_old_driver_falls_back_to_throttle_reasons_call():
    fake = FakeNvml([dict(a100(), clocks_api="throttle")])
    mon = NvmlMonitor([0], interval_sec=0, nvml=fake, environ={})
    run_without_thread(mon)
    assert [s["throttle_mask"] for s in mon.samples()] == [0x1, 0x0, 0x4]
    assert fake.calls.count(("nvmlDeviceGetCurrentClocksEventReasons", "GPU-aaaa")) == 1


PCI = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_a_gpu_that_cannot_be_matched_makes_the_monitor_unavailable_with_the_reason():
    two = FakeNvml([a100("GPU-a"), a100("GPU-b")])
    mon = NvmlMonitor([0, 1], interval_sec=0, nvml=two, environ={})
    assert not mon.available
    assert console.gpu_power_lines(mon.summary()) == [
        "GPU power: not available (CUDA numbers GPUs fastest first (CUDA_DEVICE_ORDER=unset), "
        "an order NVML cannot tell; set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPUs by UUID "
        "in CUDA_VISIBLE_DEVICES)"]


def test_background_thread_samples_between_marks():
    fake = FakeNvml([a100()])
    mon = NvmlMonitor([0], interval_sec=0.001, nvml=fake, environ={})
    mon.start()
    deadline = time.monotonic() + 10
    while len(mon.samples()) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    mon.mark_steady()
    count = len(mon.samples())
    while len(mon.samples()) < count + 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    mon.stop()
    phases = [s["phase"] for s in mon.samples()]
    assert phases[0] == "start" and phases[-1] == "end"
    assert phases.count("steady_start") == 1
    i = phases.index("steady_start")
    assert set(phases[1:i]) == {"warmup"}
    assert set(phases[i + 1:-1]) == {"steady"}
    times = [s["t"] for s in mon.samples()]
    assert times == sorted(times)
    n = len(mon.samples())
    time.sleep(0.02)
    assert len(mon.samples()) == n  # stopped for good


def test_missing_driver_real_pynvml_is_quiet(capfd):
    module, _ = nvml_mod.open_nvml()
    if module is not None:
        nvml_mod.close_nvml(module)
        pytest.skip("this machine has an NVIDIA driver")
    mon = NvmlMonitor([0], interval_sec=0.01)
    assert mon.available is False
    run_without_thread(mon)
    s = mon.summary(images=10, images_per_sec=5.0)
    assert s["nvml_monitor"].startswith("not available (")
    assert s["power_w_mean"] is None and s["throttled"] is None
    assert mon.samples() == [] and console.monitor_warnings(s) == []
    assert console.gpu_power_lines(s) == ["GPU power: %s" % s["nvml_monitor"]]
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize("code,reason", [
    (12, "no NVIDIA driver: NVML library not found"),
    (9, "NVIDIA driver not loaded"),
    (999, "NVML: Unknown Error"),
])
def test_init_errors_give_not_available(code, reason):
    mon = NvmlMonitor(None, nvml=FakeNvml([a100()], init_error=code))
    assert mon.available is False
    assert mon.summary()["nvml_monitor"] == "not available (%s)" % reason


def test_no_gpu_visible():
    fake = FakeNvml([])
    mon = NvmlMonitor(None, nvml=fake, environ={})
    assert not mon.available and mon.unavailable_reason == "no NVIDIA GPU visible"
    assert fake.shutdowns == 1


def test_failing_read_never_raises():
    fake = FakeNvml([a100()])
    mon = NvmlMonitor([0], interval_sec=0, nvml=fake, environ={})

    def broken(h):
        raise RuntimeError("driver fell over")

    fake.nvmlDeviceGetPowerUsage = broken
    run_without_thread(mon)
    assert mon.samples() == [] and mon.read_errors == 3
    assert mon.summary()["power_w_mean"] is None


def test_console_line_format():
    fake = FakeNvml([a100()])
    mon = NvmlMonitor([0], interval_sec=0, nvml=fake, environ={})
    run_without_thread(mon)
    assert console.gpu_power_lines(mon.summary(images=1000, images_per_sec=250.0)) == [
        "GPU power: mean 400.0 W, max 400.0 W, energy 3500.0 J (3.5 J/image), "
        "0.625 images/sec/W; util 100%, temp max 60 C, SM clock 1290 MHz"]


def test_create_and_combined_helpers():
    mons = monitors.create("cpu", None, interval_sec=0)
    assert [m.name for m in mons] == ["host"]
    gpu_mons = monitors.create("GPU", [0], interval_sec=0)
    assert [m.name for m in gpu_mons] == ["nvml", "host"]
    for m in gpu_mons:
        m.start()
        m.mark_steady()
        m.stop()
    combined = monitors.summary(gpu_mons, images=10, images_per_sec=5.0)
    assert combined["host_monitor"] == "ok"
    assert "cpu_util_pct_mean" in combined and "power_w_mean" in combined
    series = monitors.samples(gpu_mons)
    assert len(series["host"]) == 3
    lines = console.monitor_lines(combined)
    assert lines[0].startswith("GPU power: ") and lines[-1].startswith("Host CPU: ")
    if not gpu_mons[0].available:  # no NVIDIA driver here
        assert combined["nvml_monitor"].startswith("not available")
        assert series["nvml"] == [] and console.monitor_warnings(combined) == []
        assert lines[0].startswith("GPU power: not available")


def test_pause_and_resume_take_boundary_samples():
    """The runner closes the window when a timed loop ends (cooldown, evaluation, checkpoint)
    and opens it again when the next one starts."""
    gpu = a100()
    gpu.update(power_mw=[Ticks(60000, 300000, 310000, 80000, 70000, 320000, 90000), 400000, None],
               energy_mj=Ticks(0, 1_000_000, 4_000_000, 4_500_000, 4_900_000, 8_000_000,
                               8_600_000),
               utilization=[Ticks(0, 100, 100, 5, 5, 100, 5), 40], temperature=35,
               clocks={"sm": [1410, 1410, 1095]}, clocks_event_reasons=0)
    mon = NvmlMonitor([0], interval_sec=0, nvml=FakeNvml([gpu]), clock=ticking_clock(),
                      environ={})
    mon.start()
    mon.mark_steady()
    mon.pause()
    mon._take(None)          # a tick during the cooldown
    mon.pause()              # already paused: no sample
    mon.resume()
    mon.resume()             # already measuring: no sample
    mon.pause()
    mon.stop()
    assert [s["phase"] for s in mon.samples()] == [
        "start", "steady_start", "steady_end", "paused", "steady_resume", "steady_end", "end"]
    s = mon.summary(images=100, images_per_sec=50.0)
    assert s["energy_j"] == pytest.approx((4000.0 - 1000.0) + (8000.0 - 4900.0))
    assert s["joules_per_image"] == pytest.approx(61.0)
    assert s["power_w_mean"] == pytest.approx((310.0 + 320.0) / 2)
    assert s["gpu_util_pct_mean"] == 100
