"""The hop between hosts (tfbench.measure.nics): the NICs NCCL names in its log, their rate read
from a fake sysfs tree as the kernel writes it, and the slowest hop of a multi-worker ring."""

import pytest

from tfbench.measure import links, nccl_log, nics

# NCCL's lines as it prints them (tests/measure/test_nccl_log.py has their sources).
IB_TWO = """\
NCCL INFO NCCL version 2.21.5+cuda12.4
NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:192.168.11.1<0>
NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA
NCCL INFO Channel 01/0 : 3[3] -> 8[0] [send] via NET/IB/1/GDRDMA
NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
"""
SOCKET = """\
NCCL INFO NCCL version 2.22.3+cuda12.6
NCCL INFO NET/IB : No device found.
NCCL INFO NET/Socket : Using [0]eth0:10.140.0.7<0>
NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0
"""
EFA = """\
NCCL INFO NCCL version 2.23.4+cuda12.4
NCCL INFO Channel 07/0 : 1[1] -> 0[0] [send] via NET/AWS Libfabric/1/GDRDMA
"""
ONE_HOST = "NCCL INFO NCCL version 2.21.5+cuda12.4\n" \
           "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"


@pytest.fixture
def sysfs(tmp_path):
    """A host's /sys: two 100 Gb/s EDR ports, eth0 at 10 Gb/s, eth1 whose link is down."""
    for dev in ("mlx5_0", "mlx5_1"):
        port = tmp_path / "class" / "infiniband" / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "rate").write_text("100 Gb/sec (4X EDR)\n")
    for name, speed in (("eth0", "10000\n"), ("eth1", "-1\n")):
        (tmp_path / "class" / "net" / name).mkdir(parents=True)
        (tmp_path / "class" / "net" / name / "speed").write_text(speed)
    return str(tmp_path)


def test_each_nic_s_rate_as_the_kernel_reports_it(sysfs):
    assert nics.nic("IB", "mlx5_0:1/IB", sysfs).gbps == 100.0
    assert nics.nic("Socket", "eth0:10.140.0.7<0>", sysfs).gbps == 10.0
    down = nics.nic("Socket", "eth1:10.0.0.2<0>", sysfs)
    assert down.gbps is None and down.label.startswith("eth1: no speed in ")
    missing = nics.nic("IB", "mlx5_9:1/RoCE", sysfs)
    assert missing.gbps is None and "No such file or directory" in missing.why


def test_the_nics_between_hosts_add_up(sysfs):
    hop = nics.between_hosts(nccl_log.parse(IB_TWO), sysfs)
    assert hop.gbs == 25.0           # 2 x 100 Gb/s = 200 Gb/s = 25 GB/s
    assert hop.basis == ("expected busbw from the NICs between hosts (InfiniBand mlx5_0 at "
                         "100 Gb/s, mlx5_1 at 100 Gb/s)")
    hop = nics.between_hosts(nccl_log.parse(SOCKET), sysfs)
    assert hop == links.Expectation(
        1.25, "expected busbw from the NICs between hosts (TCP over eth0 at 10 Gb/s)")


def test_a_hop_of_unknown_rate_gives_no_expectation(sysfs):
    assert nics.between_hosts(nccl_log.parse(SOCKET.replace("eth0", "eth1")), sysfs) == \
        links.Expectation(None, "no expected busbw: the cross-host hop's rate is unknown (eth1: "
                                "no speed in %s/class/net/eth1/speed)" % sysfs)
    # One of two ports unreadable: their sum is unknown, not the other's rate.
    two = nics.between_hosts(nccl_log.parse(IB_TWO.replace("mlx5_1", "mlx5_7")), sysfs)
    assert two.gbs is None and two.basis.startswith(
        "no expected busbw: the cross-host hop's rate is unknown (mlx5_7: ")
    assert nics.between_hosts(nccl_log.parse(EFA), sysfs).basis == (
        "no expected busbw: the cross-host hop's rate is unknown: NCCL names no device of "
        "NET/AWS Libfabric")
    assert nics.between_hosts(None, sysfs).basis == (
        "no expected busbw: the cross-host hop's rate is unknown: no NCCL log of tfbench's names "
        "the NICs between hosts (NCCL_DEBUG was set, or NCCL wrote none)")
    assert nics.between_hosts(nccl_log.parse(ONE_HOST), sysfs).gbs is None


NVLINK_450 = links.Expectation(450.0, "expected busbw from NVLink through NVSwitch")


def test_several_workers_take_the_slowest_hop(sysfs):
    # H100s on NVSwitch (450 GB/s each way) over one 100 Gb/s NIC: 12.5 GB/s, not 450.
    one_nic = IB_TWO.replace(" [1]mlx5_1:1/IB", "")
    hop = nics.slowest_hop(NVLINK_450, 2, nccl_log.parse(one_nic), sysfs)
    assert hop == links.Expectation(
        12.5, "expected busbw from the NICs between hosts (InfiniBand mlx5_0 at 100 Gb/s)")
    # PCIe 3.0 x16 (15.76) within the host is slower than 2 x 100 Gb/s (25) between them.
    pcie = links.Expectation(15.76, "expected busbw from PCIe")
    assert nics.slowest_hop(pcie, 2, nccl_log.parse(IB_TWO), sysfs) == pcie
    # One worker: its own links, whatever NCCL's log says.
    assert nics.slowest_hop(NVLINK_450, 1, nccl_log.parse(one_nic), sysfs) == NVLINK_450
    # One GPU per worker: only the hop between hosts.
    assert nics.slowest_hop(links.Expectation(None), 4, nccl_log.parse(IB_TWO), sysfs).gbs == 25.0


def test_no_expectation_when_either_hop_is_unknown(sysfs):
    unknown = nics.slowest_hop(NVLINK_450, 2, nccl_log.parse(EFA), sysfs)
    assert unknown.gbs is None and "cross-host hop's rate is unknown" in unknown.basis
    within = links.Expectation.none("the rate of GPU 0's NVLink 6.0 links is not known")
    assert nics.slowest_hop(within, 2, nccl_log.parse(IB_TWO), sysfs) == within
