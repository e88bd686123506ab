"""GPU link facts from NVML (tfbench.measure.links) on recorded readings
(tests/data/nvml_links.json, served by tests/fake_pynvml), a degraded link among them."""

import json
import os

import pytest

from helpers import ROOT, fake_nvml
from tfbench.measure import links

with open(os.path.join(ROOT, "tests", "data", "nvml_links.json")) as _handle:
    HOSTS = json.load(_handle)["hosts"]


def _host(name):
    host = HOSTS[name]
    return fake_nvml(host["gpus"], topology=host["topology"], nvlink_p2p=host["nvlink_p2p"])


@pytest.fixture(autouse=True)
def _pci_order(monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_a_card_trained_at_x4_is_named_and_the_expectation_is_the_full_link():
    found, why = links.gpu_links(range(8), _host("pcie_v100_gpu5_at_x4"))
    assert why == "" and not found.over_nvlink
    assert found.gpus[5].degraded() == "GPU 5's PCIe link runs at x4 of x16"
    assert found.degraded() == "GPU 5's PCIe link runs at x4 of x16"
    # 16 lanes of PCIe 3.0 at 0.985 GB/s each way (128b/130b of 8 GT/s)
    assert found.expected_busbw_gbs() == pytest.approx(15.76)
    assert found.describe() == (
        "7 x PCIe 3.0 x16, 1 x PCIe 3.0 x4; joined up to SYS (GPU 0 and GPU 4: the link "
        "between CPU sockets); GPU 5's PCIe link runs at x4 of x16")


def test_only_the_gpus_of_the_run_are_read():
    found, _ = links.gpu_links([0, 1], _host("pcie_v100_gpu5_at_x4"))
    assert [g.gpu for g in found.gpus] == [0, 1] and found.degraded() == ""
    assert found.describe() == "PCIe 3.0 x16; joined up to PIX (GPU 0 and GPU 1: one PCIe switch)"


def test_gpus_are_named_by_their_cuda_index_not_nvml_s(monkeypatch):
    # CUDA's GPU 0 is NVML's sixth GPU here: the degraded one is "GPU 0" to the user.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,0")
    found, _ = links.gpu_links([0, 1], _host("pcie_v100_gpu5_at_x4"))
    assert found.degraded() == "GPU 0's PCIe link runs at x4 of x16"
    assert found.topology == {(0, 1): 50}


def test_nvlink_through_nvswitch_sets_the_expectation():
    found, _ = links.gpu_links(range(8), _host("dgx_a100"))
    assert found.over_nvlink and found.nvlink_pairs is True
    assert found.gpus[0].nvlink == "NVLink 3.0 x12"
    assert found.expected_busbw_gbs() == 300.0     # 12 links x 25 GB/s each way
    assert found.describe() == ("NVLink 3.0 x12; joined up to SYS (GPU 0 and GPU 4: the link "
                                "between CPU sockets)")


def test_a_narrow_older_slot_and_an_idle_link():
    found, _ = links.gpu_links(range(2), _host("workstation_slot_and_idle"))
    slow = found.gpus[1]
    assert slow.degraded() == "GPU 1's PCIe link runs at gen 1 of 3"
    assert slow.slot_limits() == "GPU 1 sits in a x8 slot and PCIe 3.0 where the GPU takes 4.0"
    assert found.slowest() is slow
    assert found.expected_busbw_gbs() == pytest.approx(0.985 * 8)
    assert found.describe().startswith("1 x PCIe 4.0 x16, 1 x PCIe 1.0 x8; joined up to PHB")


def test_no_driver_is_a_reason_not_an_error():
    class NoDriver:
        class NVMLError(Exception):
            value = 12

        def nvmlInit(self):
            raise self.NVMLError()
    found, why = links.gpu_links([0], NoDriver())
    assert found is None and why == "no NVIDIA driver: NVML library not found"


def test_calls_a_driver_does_not_support_leave_the_fact_unknown():
    gpus = [{"uuid": "GPU-old-0", "bus": 1}, {"uuid": "GPU-old-1", "bus": 2}]
    found, why = links.gpu_links([0, 1], fake_nvml(gpus))
    assert why == ""
    assert found.gpus[0] == links.GpuLink(gpu=0)
    assert found.topology == {} and found.nvlink_pairs is None
    assert found.expected_busbw_gbs() is None
    assert found.describe() == "PCIe link not reported"
