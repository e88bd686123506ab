"""The devices together (tfbench.validate.together_step): the all-reduce's busbw against the
links' by hand, every case without an expectation, and the efficiency's split in words."""

import pytest

from tfbench.validate import together_step

LINK = "NVLink 4.0 x18; expected busbw from NVLink rings through every GPU"


def _probe(*busbw, expected=450.0, link=LINK):
    return {"ranks": 8, "link": link, "expected_busbw_gbs": expected,
            "timings": [{"label": "%d MiB" % (i + 1), "busbw_gbs": b}
                        for i, b in enumerate(busbw)]}


def test_busbw_is_the_largest_size_against_half_the_links_rate():
    # 450 GB/s the links carry: the floor is 225; the best of 120, 310 and 290 is 310 (69%)
    row = together_step.busbw_check(_probe(120.0, 310.0, 290.0), "h", "gpu")
    assert (row.status, row.reason, row.value, row.expected) == ("PASS", "ok", 310.0, 225.0)
    assert row.figure == "busbw 310 GB/s (2 MiB, 8 ranks) (69% of the links')"
    assert row.expectation == ("at least 225 GB/s, 50% of the up to 450 GB/s the links carry "
                               "(" + LINK + ")")
    low = together_step.busbw_check(_probe(150.0, 224.0), "h", "gpu")
    assert (low.status, low.reason) == ("FAIL", "busbw_below_expected")


@pytest.mark.parametrize("probe, kind, figure, expectation", [
    (_probe(3.0), "cpu", "busbw 3 GB/s (1 MiB, 8 ranks)",
     "none: CPU devices all-reduce through host memory, no link to judge"),
    (_probe(30.0, expected=None, link="PCIe 4.0 x16; no expected busbw: NVLink 6.0 not known"),
     "gpu", "busbw 30 GB/s (1 MiB, 8 ranks); PCIe 4.0 x16; no expected busbw: NVLink 6.0 not "
            "known", "no expected busbw: NVLink 6.0 not known"),
    (_probe(None), "gpu", "no all-reduce: the gradients are summed at the variables' devices "
                          "(--variable_update=parameter_server)", "an all-reduce to time")])
def test_no_expectation_is_a_skip_with_the_figure(probe, kind, figure, expectation):
    row = together_step.busbw_check(probe, "h", kind)
    assert (row.status, row.reason, row.figure, row.expectation) == (
        "SKIP", "no_expectation", figure, expectation)


def test_the_efficiency_split_names_each_cause_in_points():
    explained = {"efficiency_pct": 61.04, "lost_pts": {
        "compute": 4.0, "input": 0.0, "allreduce": 30.0, "unexplained": 4.96}}
    assert together_step.efficiency_split(explained) == (
        "61.0% (slowest device's extra compute 4.0 pts, input wait 0.0 pts, all-reduce (not "
        "overlapped) 30.0 pts, unexplained 5.0 pts)")


def _l40s_probe(gpus, cpu, *busbw, nccl=None):
    """The probe's file as the training child writes it for 8 L40S of a two-socket server
    (tests/support/data/nvml_links.json, l40s_dual_socket, through tests/support/fake_pynvml):
    the links NVML reads, the expectation they give with the host's CPU, the busbw timed."""
    import json
    import os
    from helpers import FakeNvml
    from paths import DATA
    from tfbench.measure import links
    with open(os.path.join(DATA, "nvml_links.json")) as handle:
        host = json.load(handle)["hosts"]["l40s_dual_socket"]
    found, why = links.gpu_links(gpus, FakeNvml(host["gpus"], topology=host["topology"]), cpu)
    assert why == ""
    expected = found.expectation(nccl)
    probe = _probe(*busbw, expected=expected.gbs, link="; ".join([found.describe(),
                                                                  expected.basis]))
    probe["ranks"] = len(gpus)
    return probe


@pytest.fixture
def _pci_order(monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


INTEL = ("x86_64", "GenuineIntel", 6, 106, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz")
AMD = ("x86_64", "AuthenticAMD", 25, 17, "AMD EPYC 9354 32-Core Processor")


@pytest.mark.parametrize("cpu, healthy, bad, floor", [
    (INTEL, 9.0, 4.0, 5.0),     # NCCL's 10 GB/s between Intel sockets: the floor 5
    (AMD, 14.0, 6.0, 8.0),      # AMD's 16: the floor 8
])
def test_a_healthy_dual_socket_pcie_host_passes_and_a_bad_one_fails(_pci_order, cpu, healthy,
                                                                     bad, floor):
    from tfbench.measure.sockets import HostCpu
    cpu = HostCpu(*cpu)
    # Before, 31.5 GB/s of PCIe 4.0 x16 held these rings to 15.75: 9 and 14 failed.
    row = together_step.busbw_check(_l40s_probe(range(8), cpu, 3.0, healthy), "h", "gpu")
    assert (row.status, row.reason, row.expected) == ("PASS", "ok", floor)
    assert "ring crosses the CPU sockets (%s: NCCL models %g GB/s)" % (
        "Intel Skylake or newer" if cpu.vendor == "GenuineIntel" else "AMD",
        2 * floor) in row.expectation
    low = together_step.busbw_check(_l40s_probe(range(8), cpu, 1.0, bad), "h", "gpu")
    assert (low.status, low.reason, low.value, low.expected) == (
        "FAIL", "busbw_below_expected", bad, floor)


def test_one_sockets_gpus_keep_the_pcie_rate(_pci_order):
    from tfbench.measure.sockets import HostCpu
    # GPUs 0-3 of one socket: PCIe 4.0 x16, 31.5 GB/s; 9 GB/s is below its half
    probe = _l40s_probe([0, 1, 2, 3], HostCpu(*INTEL), 9.0)
    assert probe["expected_busbw_gbs"] == pytest.approx(31.504)
    row = together_step.busbw_check(probe, "h", "gpu")
    assert (row.status, row.reason) == ("FAIL", "busbw_below_expected")
    assert together_step.busbw_check(_l40s_probe([0, 1, 2, 3], HostCpu(*INTEL), 22.0), "h",
                                     "gpu").status == "PASS"


def test_a_dual_socket_host_of_a_cpu_nccl_has_no_rate_for_is_a_skip_that_says_so(_pci_order):
    from tfbench.measure.sockets import HostCpu
    probe = _l40s_probe(range(8), HostCpu("x86_64", "HygonGenuine", 24, 2), 9.0)
    row = together_step.busbw_check(probe, "h", "gpu")
    assert (row.status, row.reason) == ("SKIP", "no_expectation")
    assert row.expectation == (
        "no expected busbw: PCIe, ring crosses the CPU sockets, and the rate of the link "
        "between them is not known: a CPU of vendor HygonGenuine, which NCCL has no rate for")
