"""The health readings (tfbench.measure.health_read) from recorded NVML readings
(tests/support/data/nvml_health.json, served by tests/support/fake_pynvml): what each call gave, and a call NVML
does not support, fails or lacks read as "not reported" with why, never as a value."""

import pytest

from helpers import FakeNvml, health_host
from tfbench.measure import health_read

PCI_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _read(nvml, environ=PCI_ORDER, gpus=None):
    host, why = health_read.gpu_health(gpus, nvml=nvml, environ=environ)
    assert why == ""
    return host


def test_a_healthy_h100_reads_as_recorded():
    host = _read(health_host("hgx_h100"))
    assert host.driver_version == "550.90.07" and host.cuda_driver_version == (12, 4)
    assert len(host.gpus) == 8
    g = host.gpus[0]
    assert (g.gpu, g.name, g.uuid) == (0, "NVIDIA H100 80GB HBM3",
                                       "GPU-1f7a9c2e-5b3d-4e8a-9c61-0d2b7e4f8a13")
    assert (g.persistence, g.ecc, g.ecc_pending) == (True, True, True)
    assert (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate,
            g.ecc_corrected_volatile, g.ecc_corrected_aggregate) == (0, 0, 0, 0)
    assert (g.remapped_correctable, g.remapped_uncorrectable, g.remap_pending,
            g.remap_failed) == (0, 0, False, False)
    assert g.clocks_event_mask == 0x1
    assert (g.sm_clock_mhz, g.sm_clock_max_mhz, g.mem_clock_mhz, g.mem_clock_max_mhz) == (
        345, 1980, 2619, 2619)
    assert (g.link.pcie_gen, g.link.pcie_width, g.link.pcie_gen_max, g.link.pcie_width_max,
            g.link.gpu_pcie_gen_max) == (5, 16, 5, 16, 5)
    assert g.nvlink_states == (True,) * 18
    assert (g.temperature_c, g.slowdown_c, g.shutdown_c) == (33, 89, 92)
    assert (g.power_w, g.power_limit_w, g.default_power_limit_w) == (72.02, 700.0, 700.0)
    assert not g.lost
    # Hopper replaced page retirement by row remapping: NVML answers NOT_SUPPORTED.
    assert (g.retired_pages_pending, g.retired_double_bit, g.retired_single_bit) == (
        None, None, None)
    assert dict(g.unread) == {
        "retired_pages": "nvmlDeviceGetRetiredPagesPendingStatus: not supported"}


def test_the_readings_are_plain_data():
    import json
    data = json.loads(json.dumps(_read(health_host("hgx_h100_gpu5_pcie_x4")).to_json()))
    assert data["driver_version"] == "550.90.07" and data["cuda_driver_version"] == [12, 4]
    g = data["gpus"][5]
    assert (g["gpu"], g["link"]["pcie_width"], g["link"]["pcie_width_max"]) == (5, 4, 16)
    assert g["unread"] == {"retired_pages": "nvmlDeviceGetRetiredPagesPendingStatus: "
                                            "not supported"}


def test_a_v100_has_retired_pages_and_no_row_remapping():
    g = _read(health_host("v100_sxm2_gpu1_page_pending")).gpus[1]
    assert (g.retired_pages_pending, g.retired_double_bit, g.retired_single_bit) == (
        True, 1, 0)
    assert g.remap_pending is None and g.remapped_uncorrectable is None
    assert dict(g.unread) == {"remapped_rows": "nvmlDeviceGetRemappedRows: not supported"}


def test_a_gpu_that_answers_only_its_name_reads_every_other_fact_as_not_supported():
    host = _read(FakeNvml([{"uuid": "GPU-a", "name": "NVIDIA GeForce RTX 4090"}]))
    g = host.gpus[0]
    assert g.name == "NVIDIA GeForce RTX 4090" and not g.lost
    values = [g.persistence, g.ecc, g.ecc_uncorrected_volatile, g.retired_pages_pending,
              g.remap_pending, g.clocks_event_mask, g.sm_clock_mhz, g.nvlink_states,
              g.temperature_c, g.slowdown_c, g.power_w, g.power_limit_w, g.link.pcie_width]
    assert values == [None] * len(values)
    assert dict(g.unread) == {
        "persistence": "nvmlDeviceGetPersistenceMode: not supported",
        "ecc_mode": "nvmlDeviceGetEccMode: not supported",
        "ecc_errors": "nvmlDeviceGetTotalEccErrors: not supported",
        "retired_pages": "nvmlDeviceGetRetiredPagesPendingStatus: not supported",
        "remapped_rows": "nvmlDeviceGetRemappedRows: not supported",
        "clock_events": "nvmlDeviceGetCurrentClocksThrottleReasons: not supported",
        "clocks": "nvmlDeviceGetClockInfo: not supported",
        "temperature": "nvmlDeviceGetTemperature: not supported",
        "thresholds": "nvmlDeviceGetTemperatureThreshold: not supported",
        "power": "nvmlDeviceGetPowerUsage: not supported",
        "power_limit": "nvmlDeviceGetEnforcedPowerLimit: not supported"}
    assert (host.driver_version, host.cuda_driver_version) == (None, None)
    assert dict(host.unread) == {"driver": "nvmlSystemGetDriverVersion: not supported",
                                 "cuda": "nvmlSystemGetCudaDriverVersion_v2: not supported"}


def test_a_binding_without_a_call_reads_it_as_not_supported():
    class OldBinding(type(health_host("hgx_h100"))):
        nvmlDeviceGetRemappedRows = property()   # getattr raises AttributeError
        nvmlSystemGetCudaDriverVersion_v2 = property()
    base = health_host("hgx_h100")
    old = OldBinding(base.gpus, system=base.system)
    host = _read(old)
    assert host.gpus[0].remap_pending is None
    assert host.gpus[0].unread["remapped_rows"] == "nvmlDeviceGetRemappedRows: not supported"
    assert host.cuda_driver_version is None
    assert host.unread["cuda"] == "nvmlSystemGetCudaDriverVersion_v2: not supported"


def test_a_driver_before_clocks_event_reasons_is_read_through_the_throttle_call():
    g = _read(health_host("hgx_h100", {"0": {"clocks_api": "throttle",
                                             "clocks_event_reasons": 0x48}})).gpus[0]
    assert g.clocks_event_mask == 0x48 and "clock_events" not in g.unread


def test_another_nvml_error_is_kept_with_its_text():
    g = _read(health_host("hgx_h100", {"0": {"errors": {
        "nvmlDeviceGetPersistenceMode": 4}}})).gpus[0]
    assert g.persistence is None
    assert g.unread["persistence"] == (
        "nvmlDeviceGetPersistenceMode: NVML: Insufficient Permissions")


def test_a_gpu_off_the_bus_is_lost():
    host = _read(health_host("hgx_h100", {"4": {"lost": True}}))
    assert [g.lost for g in host.gpus] == [False] * 4 + [True] + [False] * 3
    assert host.gpus[4].unread["ecc_mode"] == "nvmlDeviceGetEccMode: NVML: GPU is lost"


def test_gpus_are_numbered_as_cuda_numbers_them():
    host = _read(health_host("hgx_h100_gpu5_pcie_x4"),
                 environ=dict(PCI_ORDER, CUDA_VISIBLE_DEVICES="5,0"))
    assert [g.gpu for g in host.gpus] == [0, 1]
    assert [g.link.pcie_width for g in host.gpus] == [4, 16]
    assert host.gpus[0].uuid == "GPU-6a2f4b7d-0a8c-4d3f-8b16-5c7a2d9e3f68"
    two = _read(health_host("hgx_h100_gpu5_pcie_x4"), gpus=[5])
    assert [(g.gpu, g.link.pcie_width) for g in two.gpus] == [(5, 4)]


def test_a_mig_slice_reads_the_whole_gpu_that_holds_it():
    base = health_host("hgx_h100")
    gpus = [dict(g) for g in base.gpus[:2]]
    gpus[1]["mig"] = [{"uuid": "MIG-1b2c3d4e-0000-5000-8000-000000000001", "gi": 1, "ci": 0}]
    host = _read(FakeNvml(gpus, system=base.system),
                 environ=dict(PCI_ORDER, CUDA_VISIBLE_DEVICES=gpus[1]["mig"][0]["uuid"]))
    g = host.gpus[0]
    assert (g.gpu, g.uuid, g.name) == (0, gpus[1]["uuid"], "NVIDIA H100 80GB HBM3")
    assert g.remap_pending is False and g.power_limit_w == 700.0


def test_cuda_versions_are_major_and_minor():
    for reported, version in ((12040, (12, 4)), (12100, (12, 10)), (11080, (11, 8)),
                              (13000, (13, 0))):
        nvml = health_host("hgx_h100")
        nvml.system = dict(nvml.system, cuda=reported)
        assert _read(nvml, gpus=[0]).cuda_driver_version == version


def test_no_driver_is_a_reason_not_an_exception():
    # The real nvidia-ml-py on a machine without an NVIDIA driver.
    pytest.importorskip("pynvml")
    host, why = health_read.gpu_health([0])
    if host is not None:
        pytest.skip("an NVIDIA driver is present")
    assert why == "no NVIDIA driver: NVML library not found"


def test_a_gpu_cuda_does_not_see_is_a_reason():
    host, why = health_read.gpu_health([8], nvml=health_host("hgx_h100"), environ=PCI_ORDER)
    assert host is None and why == "GPU 8: CUDA sees 8 GPU(s) (CUDA_VISIBLE_DEVICES=None)"
