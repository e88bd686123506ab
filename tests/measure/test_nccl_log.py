"""NCCL's transport read from its NCCL_DEBUG=INFO lines, as NCCL prints them (lines from logs
posted in public issue threads; hosts and addresses as posted)."""

import pytest

from tfbench.measure import nccl_log

# NVIDIA NCCL 2.5, InfiniBand, older version line (Mellanox/nv_peer_memory#56) and channel lines
# with GPUDirect RDMA (NVIDIA/nccl#707).
IB = """\
master_node:24570:24907 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
master_node:24570:24907 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>
NCCL version 2.5.6+cuda10.0
10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA
10-90-43-152:120890:121563 [3] NCCL INFO Channel 01 : 3[ca000] -> 2[c7000] [send] via NET/IB/2/GDRDMA
"""

# RoCE on H100 hosts, NCCL 2.19 (NVIDIA/nccl-tests#185), with a PXN channel line (NCCL >= 2.12).
ROCE = """\
dgxh100-4:460770:460770 [0] NCCL INFO Bootstrap : Using enp220s0np0:11.1.128.136<0>
NCCL version 2.19.3+cuda12.3
dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>
dgxh100-4:460770:460842 [0] NCCL INFO Using network IB
tpgds-aihub0008:181412:181412 [1] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [send] via NET/IB/0(8)/GDRDMA
tpgds-aihub0008:181413:181413 [2] NCCL INFO Channel 03/0 : 10[2] -> 9[1] via P2P/IPC
"""

# No RDMA device: the silent fall-back to TCP sockets (NCCL 2.22).
SOCKET = """\
NCCL INFO NCCL version 2.22.3+cuda12.6
NCCL INFO NET/IB : No device found.
NCCL INFO NET/Socket : Using [0]eth0:10.140.0.7<0>
NCCL INFO Using network Socket
NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0
NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct
"""

# AWS EFA through the aws-ofi-nccl plugin (NVIDIA/nccl#1597), and the older Ring lines
# (aws/aws-ofi-nccl#24).
EFA = """\
8h200-2:14630:14630 [0] NCCL INFO NCCL version 2.23.4+cuda12.4
8h200-2:14630:14695 [1] NCCL INFO Channel 07/0 : 1[1] -> 0[0] [send] via NET/AWS Libfabric/1/GDRDMA
[1,7]<stdout>:ip-172-32-38-1:21471:22316 [7] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0
[1,26]<stdout>:ip-172-32-36-209:8716:9558 [2] NCCL INFO Ring 00 : 26[2] -> 30[6] via P2P/IPC
"""


def test_infiniband_with_gpudirect_rdma():
    t = nccl_log.parse(IB)
    assert t.version == "2.5.6+cuda10.0" and t.devices == {"IB": ["mlx5_0:1/IB"]}
    assert t.between_hosts == ["NET/IB"] and t.gpudirect_rdma
    assert nccl_log.describe(t) == ("NCCL 2.5.6+cuda10.0: between hosts NET/IB (InfiniBand "
                                    "mlx5_0) with GPUDirect RDMA")


def test_roce_with_pxn_and_nvlink_peers():
    assert nccl_log.describe(nccl_log.parse(ROCE)) == (
        "NCCL 2.19.3+cuda12.3: between hosts NET/IB (RoCE mlx5_10, mlx5_11) with GPUDirect "
        "RDMA; within a host P2P/IPC")


def test_the_fall_back_to_tcp_sockets_is_said():
    assert nccl_log.describe(nccl_log.parse(SOCKET)) == (
        "NCCL 2.22.3+cuda12.6: between hosts NET/Socket (TCP over eth0); within a host SHM")


def test_a_network_plugin_is_named_as_nccl_names_it():
    t = nccl_log.parse(EFA)
    assert t.between_hosts == ["NET/AWS Libfabric"] and t.gpudirect_rdma
    assert nccl_log.describe(t) == ("NCCL 2.23.4+cuda12.4: between hosts NET/AWS Libfabric "
                                    "with GPUDirect RDMA; within a host P2P/IPC")


def test_one_host_and_no_log():
    one = "NCCL INFO NCCL version 2.21.5+cuda12.4\nNCCL INFO Channel 00/0 : 0[0] -> 1[1] via " \
          "P2P/CUMEM/read\n"
    assert nccl_log.describe(nccl_log.parse(one)) == ("NCCL 2.21.5+cuda12.4: within a host "
                                                      "P2P/CUMEM")
    assert nccl_log.describe(nccl_log.parse("Step\tImg/sec\ttotal_loss\n")) is None


# NCCL's WARN lines, as src/debug.cc writes them ("host:pid:tid [dev] file:line NCCL WARN ..."):
# a failed connection between hosts (NVIDIA/nccl-tests#166), with the INFO lines around them.
FAILED = """
ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort
ubuntu:39964:40075 [0] NCCL INFO misc/socket.cc:564 -> 2
ubuntu:39964:40075 [0] NCCL INFO transport/net_socket.cc:336 -> 2

ubuntu:39964:40075 [0] proxy.cc:1519 NCCL WARN [Proxy Service 0] Failed to execute operation Connect from rank 0, retcode 2
ubuntu:39964:40049 [5] NCCL INFO Channel 20 : 5[5] -> 4[4] via SHM/direct/direct
"""


def test_warn_lines_are_found_among_info_lines():
    assert nccl_log.warnings(FAILED) == [
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.2<45763> failed : Software caused connection abort",
        "ubuntu:39964:40075 [0] proxy.cc:1519 NCCL WARN [Proxy Service 0] Failed to execute "
        "operation Connect from rank 0, retcode 2"]
    assert nccl_log.warnings(SOCKET) == []


@pytest.mark.parametrize("value,logs_init", [
    ("INIT,NET", True), ("init", True), ("NET,INIT", True), ("ALL", True), ("COLL,ALL", True),
    ("NET", False), ("COLL,GRAPH", False), ("", False),
    ("NET, INIT", False),   # strtok keeps the space: " INIT" is no subsystem's name
    ("NET,,INIT", True),    # strtok skips the empty name
    ("^COLL", True), ("^INIT", False), ("^NET,init", False), ("^ALL", False), ("^", True),
])
def test_debug_subsys_read_as_nccl_reads_it(value, logs_init):
    assert nccl_log.subsys_logs_init(value) is logs_init
