"""GPU link facts from NVML (tfbench.measure.links) on recorded readings
(tests/support/data/nvml_links.json, served by tests/support/fake_pynvml), a degraded link and a
partly NVLink-connected DGX-1 among them, and the busbw to expect of them, worked out by hand."""

import json
import os

import pytest

from helpers import FakeNvml
from paths import DATA
from tfbench.measure import links, sockets

with open(os.path.join(DATA, "nvml_links.json")) as _handle:
    HOSTS = json.load(_handle)["hosts"]


def _host(name):
    host = HOSTS[name]
    return FakeNvml(host["gpus"], topology=host["topology"])


# The hosts' CPUs as /proc/cpuinfo names them (tfbench.measure.sockets.HostCpu).
BROADWELL = sockets.HostCpu("x86_64", "GenuineIntel", 6, 79,
                            "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz")   # DGX-1's
SKYLAKE = sockets.HostCpu("x86_64", "GenuineIntel", 6, 85, "Intel(R) Xeon(R) Gold 6148 CPU")


@pytest.fixture(autouse=True)
def _pci_order(monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Not this machine's CPU: a test that needs one names it.
    monkeypatch.setattr(sockets, "host_cpu", lambda: sockets.HostCpu())


def test_a_card_trained_at_x4_is_named_and_the_expectation_is_the_full_link():
    # GPUs 4-7, one socket's: 16 lanes of PCIe 3.0 at 0.985 GB/s each way (128b/130b of
    # 8 GT/s), GPU 5's full link, not its x4
    found, why = links.gpu_links([4, 5, 6, 7], _host("pcie_v100_gpu5_at_x4"), SKYLAKE)
    assert why == "" and not found.crosses_sockets
    assert found.expected_busbw_gbs() == pytest.approx(15.76)
    assert found.expectation().basis == "expected busbw from PCIe"
    # All eight: the rings cross the link between the sockets, 10 GB/s on a Skylake Xeon
    found, why = links.gpu_links(range(8), _host("pcie_v100_gpu5_at_x4"), SKYLAKE)
    assert why == "" and not found.over_nvlink and found.crosses_sockets
    assert found.gpus[5].degraded() == "GPU 5's PCIe link runs at x4 of x16"
    assert found.degraded() == "GPU 5's PCIe link runs at x4 of x16"
    assert found.expected_busbw_gbs() == 10.0
    assert found.expectation().basis == ("expected busbw from PCIe, ring crosses the CPU "
                                         "sockets (Intel Skylake or newer: NCCL models 10 GB/s)")
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
    assert found.over_nvlink and found.nvlink_between() == {}
    assert [g.nvswitch_links for g in found.gpus] == [12] * 8
    assert found.gpus[0].nvlink == "NVLink 3.0 x12"
    assert found.expected_busbw_gbs() == 300.0     # 12 links x 25 GB/s each way
    assert found.expectation().basis == "expected busbw from NVLink through NVSwitch"
    assert found.describe() == ("NVLink 3.0 x12; joined up to SYS (GPU 0 and GPU 4: the link "
                                "between CPU sockets)")
    two, _ = links.gpu_links([0, 5], _host("dgx_a100"))
    assert two.expected_busbw_gbs() == 300.0        # any two GPUs meet in the switches


# DGX-1's hybrid cube-mesh (tests/support/data/nvml_links.json, dgx1_v100): links between each pair.
DGX1_PAIRS = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2,
              (2, 3): 2, (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2,
              (5, 7): 1, (6, 7): 2}


def test_a_dgx1_rings_over_nvlink_though_gpu_0_has_no_link_to_gpus_5_to_7():
    found, why = links.gpu_links(range(8), _host("dgx1_v100"))
    assert why == "" and found.nvlink_between() == DGX1_PAIRS
    assert found.over_nvlink and found.gpus[0].nvlink == "NVLink 2.0 x6"
    # The pairs joined by two links make one ring, 0-3-2-1-5-6-7-4, those joined by one the
    # ring 0-1-3-7-5-4-6-2; NCCL runs each both ways: 2 x (2 + 1) links x 25 GB/s = 150, all
    # six links of every GPU (not the 15.8 GB/s of PCIe 3.0 x16).
    assert found.expected_busbw_gbs() == pytest.approx(150.0)
    assert found.expectation().basis == "expected busbw from NVLink rings through every GPU"
    assert found.describe() == ("NVLink 2.0 x6; joined up to SYS (GPU 0 and GPU 4: the link "
                                "between CPU sockets)")


RINGS = "expected busbw from NVLink rings through every GPU"
# GPUs 0-3 and 4-7 hang off the two sockets of a DGX-1's Broadwell Xeons.
OVER_PCIE = ("expected busbw from PCIe (no ring of NVLink through every GPU), ring crosses the "
             "CPU sockets (Intel before Skylake: NCCL models 6 GB/s)")


@pytest.mark.parametrize("gpus, expected, basis", [
    # 0-1 one link, 1-2 two, 2-3 two, 3-0 two; 0-2 and 1-3 one each: rings 0-1-2-3 and 0-2-1-3
    # at one link each use GPU 0's four, both ways: 2 x 2 x 25
    ((0, 1, 2, 3), 100.0, RINGS),
    ((0, 1, 2), 50.0, RINGS),      # the ring 0-1-2 at its one-link hops, both ways: 2 x 25
    ((0, 1), 25.0, RINGS),         # one link
    ((0, 3), 50.0, RINGS),         # two links
    ((0, 5), 6.0, OVER_PCIE),      # no link: PCIe 3.0 x16 (15.76) across the sockets (6)
    ((0, 3, 4), 6.0, OVER_PCIE),   # no link between 3 and 4
])
def test_only_the_links_between_the_runs_gpus_count(gpus, expected, basis):
    found, _ = links.gpu_links(gpus, _host("dgx1_v100"), BROADWELL)
    assert found.expected_busbw_gbs() == pytest.approx(expected)
    assert found.expectation().basis == basis
    assert found.describe().startswith(
        "NVLink 2.0 x6;" if basis == RINGS
        else "PCIe 3.0 x16 (NVLink 2.0 x6, no ring of it through every GPU);")


def test_gpus_outside_the_run_and_unknown_far_ends(monkeypatch):
    # CUDA_VISIBLE_DEVICES=4,0 on the DGX-1: CUDA's GPUs 0, 1 are NVML's 4 and 0 (two links).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,0")
    found, _ = links.gpu_links([0, 1], _host("dgx1_v100"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert found.nvlink_between() == {(0, 1): 2} and found.expected_busbw_gbs() == 50.0
    # A driver that says where no link goes: NCCL sees no NVLink either (it skips such
    # links), and rings over PCIe.
    gpus = [dict(g, nvlink={"version": 2, "states": [1] * 6})
            for g in HOSTS["dgx1_v100"]["gpus"]]
    found, _ = links.gpu_links(range(8), FakeNvml(gpus))
    assert not found.over_nvlink and found.expected_busbw_gbs() == pytest.approx(15.76)


# NVML's name strings with what each GPU's NVML reports: nvmlDeviceGetArchitecture,
# nvmlDeviceGetCudaComputeCapability, nvmlDeviceGetNvLinkVersion (nvmlNvlinkVersion_t).
@pytest.mark.parametrize("name, arch, cc, version, label, link_gbs", [
    ("Tesla P100-SXM2-16GB", 4, (6, 0), 1, "1.0", 20.0),     # 4 links, 160 GB/s both ways
    ("Tesla V100-SXM2-32GB", 5, (7, 0), 2, "2.0", 25.0),     # 6 links, 300 GB/s
    ("Quadro RTX 8000", 6, (7, 5), 2, "2.0", 25.0),          # 2 links, 100 GB/s
    ("NVIDIA A100-SXM4-80GB", 7, (8, 0), 4, "3.0", 25.0),    # 12 links, 600 GB/s
    ("NVIDIA A100-SXM4-80GB", 7, (8, 0), 5, "3.0", 25.0),    # what A100s report (3.1)
    ("NVIDIA RTX A6000", 7, (8, 6), 4, "3.0", 14.0625),      # 4 links, 112.5 GB/s
    ("NVIDIA H100 80GB HBM3", 9, (9, 0), 6, "4.0", 25.0),    # 18 links, 900 GB/s
    ("NVIDIA H200", 9, (9, 0), 6, "4.0", 25.0),              # 18 links, 900 GB/s
    ("NVIDIA B200", 10, (10, 0), 7, "5.0", 50.0),            # 18 links, 1.8 TB/s
])
def test_the_nvlink_generation_and_rate_follow_the_architecture(name, arch, cc, version, label,
                                                                 link_gbs):
    gpu = {"uuid": "GPU-x", "name": name, "arch": arch, "cc": list(cc), "pcie": [4, 16, 4, 16, 4],
           "nvlink": {"version": version, "states": [1, 1]}}
    found, _ = links.gpu_links([0], FakeNvml([gpu]))
    assert found.gpus[0].nvlink == "NVLink %s x2" % label
    assert found.gpus[0].nvlink_link_gbs() == link_gbs


def test_nvml_s_own_version_name_where_no_architecture_is_known():
    for version, label in ((3, "2.2"), (5, "3.1"), (8, "6.0")):   # 8: NVML_NVLINK_VERSION_6_0
        gpu = {"uuid": "GPU-x", "nvlink": {"version": version, "states": [1]}}
        found, _ = links.gpu_links([0], FakeNvml([gpu]))
        assert found.gpus[0].nvlink == "NVLink %s x1" % label
        assert found.gpus[0].nvlink_link_gbs() is None


def _pair_host(name, arch, cc, links_between):
    """Two GPUs joined by `links_between` NVLink links (a bridge), PCIe 4.0 x16 each."""
    return [{"uuid": "GPU-%d" % i, "name": name, "arch": arch, "cc": list(cc), "bus": 1 + i,
             "pcie": [4, 16, 4, 16, 4],
             "nvlink": {"version": 4, "states": [1] * links_between,
                        "p2p": [1] * links_between, "remote": [2 - i] * links_between,
                        "remote_type": [0] * links_between}} for i in range(2)]


def test_a_bridged_pair_at_ga10x_s_rate_and_a_generation_of_unknown_rate():
    found, _ = links.gpu_links([0, 1], FakeNvml(_pair_host("NVIDIA RTX A6000", 7, (8, 6), 4)))
    assert found.expected_busbw_gbs() == pytest.approx(56.25)    # 4 x 14.0625
    # Rubin (NVML_DEVICE_ARCH_RUBIN = 13): NVLink 6.0, no rate per link tfbench knows.
    found, _ = links.gpu_links([0, 1], FakeNvml(_pair_host("", 13, (10, 0), 4)))
    assert found.gpus[0].nvlink == "NVLink 6.0 x4"
    assert found.expectation() == links.Expectation(
        None, "no expected busbw: the rate of GPU 0's NVLink 6.0 links is not known")


def test_the_readings_go_into_json():
    import json
    found, _ = links.gpu_links(range(8), _host("dgx1_v100"))
    data = json.loads(json.dumps(found.to_json()))
    assert data["topology"]["0-4"] == 50 and data["nvlink_between"]["0-3"] == 2
    assert data["gpus"][0]["nvlink_gpus"] == {"1": 1, "2": 1, "3": 2, "4": 2}


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
    found, why = links.gpu_links([0, 1], FakeNvml(gpus))
    assert why == ""
    assert found.gpus[0] == links.GpuLink(gpu=0)
    assert found.topology == {}
    assert found.expectation() == links.Expectation(
        None, "no expected busbw: NVML reports no PCIe link rate")
    assert found.describe() == "PCIe link not reported"


# Host CPUs of dual-socket PCIe servers, as /proc/cpuinfo names them.
SAPPHIRE_RAPIDS = sockets.HostCpu("x86_64", "GenuineIntel", 6, 143,
                                  "Intel(R) Xeon(R) Platinum 8462Y+")
EPYC = sockets.HostCpu("x86_64", "AuthenticAMD", 25, 17, "AMD EPYC 9354 32-Core Processor")
HYGON = sockets.HostCpu("x86_64", "HygonGenuine", 24, 2, "Hygon C86 7285 32-core Processor")
CROSSING = "expected busbw from PCIe, ring crosses the CPU sockets "


@pytest.mark.parametrize("cpu, nccl, expected, said", [
    (EPYC, None, 16.0, "(AMD: NCCL models 16 GB/s)"),
    (SKYLAKE, None, 10.0, "(Intel Skylake or newer: NCCL models 10 GB/s)"),
    (SAPPHIRE_RAPIDS, None, 10.0, "(Intel Sapphire Rapids or newer: NCCL models 10 GB/s before "
                                  "2.26 and 22 from 2.26, this run's NCCL version not read)"),
    (SAPPHIRE_RAPIDS, "2.21.5+cuda12.4", 10.0, "(Intel Sapphire Rapids or newer: NCCL "
                                               "2.21.5+cuda12.4 models 10 GB/s (22 from 2.26))"),
    (SAPPHIRE_RAPIDS, "2.26.2+cuda12.8", 22.0, "(Intel Sapphire Rapids or newer: NCCL "
                                               "2.26.2+cuda12.8 models 22 GB/s)"),
])
def test_pcie_rings_across_the_sockets_expect_nccls_rate_of_the_link_between_them(
        cpu, nccl, expected, said):
    # 8 L40S, four a socket: PCIe 4.0 x16 (31.5 GB/s) to each, NCCL's rate between the sockets
    found, why = links.gpu_links(range(8), _host("l40s_dual_socket"), cpu)
    assert why == "" and found.crosses_sockets and not found.over_nvlink
    assert found.expectation(nccl) == links.Expectation(expected, CROSSING + said)
    assert found.describe() == ("PCIe 4.0 x16; joined up to SYS (GPU 0 and GPU 4: the link "
                                "between CPU sockets)")


def test_one_sockets_gpus_keep_the_pcie_rate():
    for gpus in ([0, 1, 2, 3], [4, 5, 6, 7], [2, 3]):
        found, _ = links.gpu_links(gpus, _host("l40s_dual_socket"), EPYC)
        assert not found.crosses_sockets
        assert found.expectation() == links.Expectation(pytest.approx(31.504),
                                                        "expected busbw from PCIe")


def test_pcie_slower_than_the_link_between_the_sockets_decides():
    # PCIe 3.0 x16 (15.76) under AMD's 16 GB/s between the sockets
    found, _ = links.gpu_links(range(8), _host("pcie_v100_gpu5_at_x4"), EPYC)
    assert found.expectation() == links.Expectation(pytest.approx(15.76), (
        "expected busbw from PCIe, slower than the link between the CPU sockets the ring "
        "crosses (AMD: NCCL models 16 GB/s)"))


def test_a_cpu_nccl_has_no_rate_for_expects_nothing_and_says_why():
    found, _ = links.gpu_links(range(8), _host("l40s_dual_socket"), HYGON)
    assert found.expectation() == links.Expectation(None, (
        "no expected busbw: PCIe, ring crosses the CPU sockets, and the rate of the link "
        "between them is not known: a CPU of vendor HygonGenuine (Hygon C86 7285 32-core "
        "Processor), which NCCL has no rate for"))
    # Not read (no /proc/cpuinfo): the same, with why
    found, _ = links.gpu_links(range(8), _host("l40s_dual_socket"))
    assert found.cpu == sockets.HostCpu() and found.expectation().basis.endswith(
        "is not known: the host's CPU could not be read (its machine type)")
    # The CPU goes into the JSON manifest with the readings
    assert links.gpu_links([0, 4], _host("l40s_dual_socket"), EPYC)[0].to_json()["cpu"] == {
        "machine": "x86_64", "vendor": "AuthenticAMD", "family": 25, "model": 17,
        "name": "AMD EPYC 9354 32-Core Processor"}
