import itertools
import time
import types

import pytest

from tfbench import monitors
from tfbench.measure import nvml as nvml_mod
from tfbench.monitors.nvml import NvmlMonitor
from tfbench.output import console


class FakeNvmlError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return {3: "Not Supported", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found",
                13: "Function Not Found", 2: "Invalid Argument"}.get(self.value, "Unknown Error")


class FakeNvml:
    """The slice of pynvml tfbench calls, over scripted GPUs.

    Each GPU is a dict; readings advance one step per call of nvmlDeviceGetPowerUsage.
    """

    NVMLError = FakeNvmlError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_DEVICE_MIG_ENABLE = 1

    def __init__(self, gpus, init_error=None, old_driver=False):
        self.gpus = gpus
        self.init_error = init_error
        self.old_driver = old_driver
        self.inits = 0
        self.shutdowns = 0
        self.calls = []

    def nvmlInit(self):
        if self.init_error is not None:
            raise FakeNvmlError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for g in self.gpus + [m for g in self.gpus for m in g.get("mig") or [] if m]:
            if g["uuid"] == uuid:
                return g
        raise FakeNvmlError(2)

    def nvmlDeviceGetPciInfo(self, h):
        bus = h.get("bus", self.gpus.index(h))
        return types.SimpleNamespace(domain=0, bus=bus, device=0,
                                     busId=b"00000000:%02X:00.0" % bus)

    def nvmlDeviceGetMigMode(self, h):
        if "mig" not in h:
            raise FakeNvmlError(3)
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):
        slots = h["mig"]
        if i >= len(slots) or slots[i] is None:
            raise FakeNvmlError(6)   # NVML_ERROR_NOT_FOUND
        return slots[i]

    def nvmlDeviceGetGpuInstanceId(self, h):
        return h["gi"]

    def nvmlDeviceGetComputeInstanceId(self, h):
        return h["ci"]

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlSystemGetNVMLVersion(self):
        return b"12.550.54.15"

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (8, 0)

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 400000

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1410

    def nvmlDeviceGetApplicationsClock(self, h, kind):
        return 1095

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 4

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 4

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetNvLinkState(self, h, link):
        if not h.get("nvlinks"):
            raise FakeNvmlError(3)
        if link >= h["nvlinks"]:
            raise FakeNvmlError(2)
        return 1

    def _step(self, h, key):
        return h[key][min(h["i"], len(h[key]) - 1)]

    def nvmlDeviceGetPowerUsage(self, h):
        self.calls.append(("power", h["uuid"]))
        h["i"] += 1
        return self._step(h, "power_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.calls.append(("energy", h["uuid"]))
        if "energy_mj" not in h:
            raise FakeNvmlError(3)
        return self._step(h, "energy_mj")

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=self._step(h, "util"), memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=30 << 30, total=40 << 30, free=10 << 30)

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._step(h, "temp")

    def nvmlDeviceGetClockInfo(self, h, kind):
        assert kind == self.NVML_CLOCK_SM
        return self._step(h, "clock")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self.calls.append(("event_reasons", h["uuid"]))
        if self.old_driver:
            raise FakeNvmlError(13)
        return self._step(h, "mask")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        self.calls.append(("throttle_reasons", h["uuid"]))
        return self._step(h, "mask")


def a100(uuid="GPU-aaaa", energy=True, nvlinks=12):
    g = {"name": "NVIDIA A100-SXM4-40GB", "uuid": uuid, "i": -1, "nvlinks": nvlinks,
         # start, steady_start, end (one reading per tick)
         "power_mw": [60000, 300000, 400000], "util": [0, 100, 100], "temp": [35, 50, 60],
         "clock": [1410, 1410, 1290], "mask": [0x1, 0x0, 0x4]}
    if energy:
        g["energy_mj"] = [5_000_000, 6_000_000, 9_500_000]
    return g


def ticking_clock(step=1.0):
    counter = itertools.count()
    return lambda: next(counter) * step


def run_without_thread(mon):
    mon.start()
    mon.mark_steady()
    mon.stop()


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
    fake = FakeNvml([a100(), a100("GPU-bbbb", nvlinks=0)])
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
    assert fake.calls.count(("energy", "GPU-aaaa")) == 2
    s = mon.summary(images=10)
    assert s["energy_source"] == "power_integral"


def test_old_driver_falls_back_to_throttle_reasons_call():
    fake = FakeNvml([a100()], old_driver=True)
    mon = NvmlMonitor([0], interval_sec=0, nvml=fake, environ={})
    run_without_thread(mon)
    assert [s["throttle_mask"] for s in mon.samples()] == [0x1, 0x0, 0x4]
    assert fake.calls.count(("event_reasons", "GPU-aaaa")) == 1


PCI = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def uuids(handles):
    return [(i, h["uuid"]) for i, h in handles]


def on_bus(uuid, bus, **extra):
    return dict(a100(uuid), bus=bus, **extra)


def mig(uuid, gi, ci):
    return {"uuid": uuid, "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "gi": gi, "ci": ci}


# NVML's index order (the list order) is not the PCI bus order here.
THREE = [on_bus("GPU-c3", 0x3b), on_bus("GPU-a1", 0x07), on_bus("GPU-b2", 0x1a)]


def test_indices_follow_the_pci_bus_order_cuda_uses():
    fake = FakeNvml(THREE)
    assert uuids(nvml_mod.resolve_handles(fake, None, PCI)) == [
        (0, "GPU-a1"), (1, "GPU-b2"), (2, "GPU-c3")]
    handles = nvml_mod.resolve_handles(fake, [0, 1], dict(PCI, CUDA_VISIBLE_DEVICES="2,0"))
    assert uuids(handles) == [(0, "GPU-c3"), (1, "GPU-a1")]
    assert uuids(nvml_mod.resolve_handles(fake, [1], PCI)) == [(1, "GPU-b2")]


@pytest.mark.parametrize("environ", [{}, {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
                                     {"CUDA_VISIBLE_DEVICES": "0"}])
def test_fastest_first_cannot_be_mapped_by_index(environ):
    with pytest.raises(nvml_mod.UnmappedGpu, match="CUDA numbers GPUs fastest first"):
        nvml_mod.resolve_handles(FakeNvml(THREE), [0], environ)
    # One GPU has one order; UUIDs need no order.
    assert uuids(nvml_mod.resolve_handles(FakeNvml([a100("GPU-x")]), [0], environ)) == [
        (0, "GPU-x")]
    handles = nvml_mod.resolve_handles(FakeNvml(THREE), None,
                                       dict(environ, CUDA_VISIBLE_DEVICES="GPU-b2,GPU-c3"))
    assert uuids(handles) == [(0, "GPU-b2"), (1, "GPU-c3")]


def test_uuids_and_unique_uuid_prefixes():
    fake = FakeNvml([a100("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"),
                     a100("GPU-8932aaaa-0000-0000-0000-000000000000")])
    env = {"CUDA_VISIBLE_DEVICES": "GPU-8932f937"}
    assert uuids(nvml_mod.resolve_handles(fake, None, env)) == [
        (0, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")]
    # A prefix that names several GPUs, or none, ends CUDA's list there: the GPU asked for is
    # not there, and the error says which entry ended the list.
    with pytest.raises(nvml_mod.UnmappedGpu,
                       match=r"GPU 0: CUDA sees 0 GPU.*entry 'GPU-8932': matches 2 devices"):
        nvml_mod.resolve_handles(fake, [0], {"CUDA_VISIBLE_DEVICES": "GPU-8932"})
    with pytest.raises(nvml_mod.UnmappedGpu, match="'GPU-ffff': matches no device NVML sees"):
        nvml_mod.resolve_handles(fake, [0], {"CUDA_VISIBLE_DEVICES": "GPU-ffff"})
    assert nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": "GPU-8932"}) == []


MIG_GPU = on_bus("GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f", 0x07, mig=[
    mig("MIG-11111111-2222-3333-4444-555555555555", 7, 0), None,
    mig("MIG-66666666-7777-8888-9999-000000000000", 8, 0)])


@pytest.mark.parametrize("entry, slice_uuid", [
    ("MIG-66666666-7777-8888-9999-000000000000", "MIG-66666666-7777-8888-9999-000000000000"),
    ("MIG-6666", "MIG-66666666-7777-8888-9999-000000000000"),
    ("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0",
     "MIG-11111111-2222-3333-4444-555555555555"),
])
def test_mig_ids_map_to_the_slice(entry, slice_uuid):
    fake = FakeNvml([on_bus("GPU-0", 0x01), MIG_GPU])
    handles = nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": entry})
    assert uuids(handles) == [(0, slice_uuid)]


def test_a_gpu_in_mig_mode_maps_to_its_only_slice_and_never_to_the_whole_gpu():
    one = on_bus("GPU-m", 0x07, mig=[None, mig("MIG-only", 3, 0)])
    assert uuids(nvml_mod.resolve_handles(FakeNvml([one]), None, {})) == [(0, "MIG-only")]
    with pytest.raises(nvml_mod.UnmappedGpu, match="GPU 1 is in MIG mode with 2 slices"):
        nvml_mod.resolve_handles(FakeNvml([on_bus("GPU-0", 0x01), MIG_GPU]), [1], PCI)
    with pytest.raises(nvml_mod.UnmappedGpu, match="no MIG slice with GPU instance 9"):
        nvml_mod.resolve_handles(FakeNvml([MIG_GPU]), [0], {
            "CUDA_VISIBLE_DEVICES": "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/9/0"})


def test_cuda_stops_at_the_first_entry_it_cannot_use():
    fake = FakeNvml(THREE)
    assert uuids(nvml_mod.resolve_handles(fake, None, dict(PCI, CUDA_VISIBLE_DEVICES="1,7,0"))) \
        == [(0, "GPU-b2")]
    assert nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": ""}) == []
    with pytest.raises(nvml_mod.UnmappedGpu, match=r"GPU 1: CUDA sees 1 GPU\(s\)"):
        nvml_mod.resolve_handles(fake, [0, 1], dict(PCI, CUDA_VISIBLE_DEVICES="1,7,0"))
    with pytest.raises(nvml_mod.UnmappedGpu, match="GPU 5: CUDA sees 3 GPU"):
        nvml_mod.resolve_handles(fake, [5], PCI)


class _CountFails(FakeNvml):
    def nvmlDeviceGetCount(self):
        raise FakeNvmlError(999)


@pytest.mark.parametrize("visible, nvml, count, why", [
    (None, FakeNvml(THREE), 3, ""),
    ("1,0", FakeNvml(THREE), 2, ""),
    ("", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='' hides every GPU"),
    ("-1", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='-1' hides every GPU"),
    ("GPU-typo", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='GPU-typo' leaves CUDA none of the "
                                     "GPUs NVML lists (its first entry matches none, or one "
                                     "repeats)"),
    ("1,1", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='1,1' leaves CUDA none of the GPUs NVML "
                                "lists (its first entry matches none, or one repeats)"),
    (None, FakeNvml([]), 0, "NVML lists no GPU this process may open"),
    (None, FakeNvml(THREE, init_error=12), 0, "no NVIDIA driver: NVML library not found"),
    (None, FakeNvml(THREE, init_error=9), 0, "NVIDIA driver not loaded"),
    (None, _CountFails(THREE), 0, "NVML: Unknown Error"),
])
def test_the_gpu_count_and_why_none_are_one_for_scripts_and_the_evaluation(
        monkeypatch, capsys, visible, nvml, count, why):
    """cuda_gpus (the evaluation's mixed precision and TF-TRT checks) and `python -m
    tfbench.measure.nvml` (scripts/scaling_test.sh): the count on stdout, why none on stderr."""
    environ = dict(PCI) if visible is None else dict(PCI, CUDA_VISIBLE_DEVICES=visible)
    assert nvml_mod.cuda_gpus(environ, nvml) == (count, why)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml_mod.main(nvml) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("%d\n" % count, why + "\n" if why else "")


def test_a_gpu_that_cannot_be_matched_makes_the_monitor_unavailable_with_the_reason():
    mon = NvmlMonitor([0, 1], interval_sec=0, nvml=FakeNvml(THREE), environ={})
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
    gpu.update(power_mw=[60000, 300000, 310000, 80000, 70000, 320000, 90000],
               energy_mj=[0, 1_000_000, 4_000_000, 4_500_000, 4_900_000, 8_000_000, 8_600_000],
               util=[0, 100, 100, 5, 5, 100, 5], temp=[35] * 7, clock=[1410] * 7, mask=[0] * 7)
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
