"""The link between the CPU sockets as NCCL rates it (tfbench.measure.sockets): the host's CPU
read from /proc/cpuinfo, and NCCL's rule for each CPU (src/graph/topo.cc, v2.23.4-1 and
v2.26.2-1) worked through by hand."""

import pytest

from tfbench.measure import sockets

SPR_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme avx512f amx_bf16

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
"""
EPYC_CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                "model name\t: AMD EPYC 9354 32-Core Processor\n")
# An Arm server: no vendor_id, family or model; the implementer and part instead.
ARM_CPUINFO = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"


def test_the_cpu_is_read_from_the_first_processor():
    assert sockets.host_cpu(SPR_CPUINFO, "x86_64") == sockets.HostCpu(
        "x86_64", "GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+")
    assert sockets.host_cpu(EPYC_CPUINFO, "x86_64") == sockets.HostCpu(
        "x86_64", "AuthenticAMD", 25, 17, "AMD EPYC 9354 32-Core Processor")
    assert sockets.host_cpu(ARM_CPUINFO, "aarch64") == sockets.HostCpu("aarch64")
    assert sockets.host_cpu("", "") == sockets.HostCpu()


def _intel(model, family=6):
    return sockets.HostCpu("x86_64", "GenuineIntel", family, model)


@pytest.mark.parametrize("cpu, nccl, gbs, said", [
    # Intel: Broadwell (79) before NCCL's Skylake class, which starts at model 0x55
    (_intel(79), None, 6.0, "Intel before Skylake: NCCL models 6 GB/s"),
    (_intel(0x55), None, 10.0, "Intel Skylake or newer: NCCL models 10 GB/s"),
    (_intel(106), "2.28.3", 10.0, "Intel Skylake or newer: NCCL models 10 GB/s"),   # Ice Lake
    (_intel(0x55, family=15), None, 6.0, "Intel, family 15 model 85: NCCL models 6 GB/s"),
    # From 2.26 NCCL rates Sapphire Rapids (0x8F) and Emerald Rapids (0xCF) apart
    (_intel(0x8F), "2.23.4+cuda12.6", 10.0,
     "Intel Sapphire Rapids or newer: NCCL 2.23.4+cuda12.6 models 10 GB/s (22 from 2.26)"),
    (_intel(0x8F), "2.26.2", 22.0, "Intel Sapphire Rapids or newer: NCCL 2.26.2 models 22 GB/s"),
    (_intel(0xCF), "2.27.3+cuda12.9", 40.0,
     "Intel Emerald Rapids or newer: NCCL 2.27.3+cuda12.9 models 40 GB/s"),
    (_intel(0xCF), None, 10.0, "Intel Emerald Rapids or newer: NCCL models 10 GB/s before 2.26 "
                               "and 40 from 2.26, this run's NCCL version not read"),
    (sockets.HostCpu("x86_64", "AuthenticAMD", 25, 17), None, 16.0, "AMD: NCCL models 16 GB/s"),
    (sockets.HostCpu("x86_64", "CentaurHauls", 7, 0x5B), None, 9.0,
     "Zhaoxin: NCCL models 9 GB/s"),
    (sockets.HostCpu("x86_64", "  Shanghai  ", 7, 0x3B), None, 6.0,
     "Zhaoxin: NCCL models 6 GB/s"),
    (sockets.HostCpu("aarch64"), None, 6.0, "Arm: NCCL models 6 GB/s"),
    (sockets.HostCpu("ppc64le"), None, 32.0, "IBM POWER: NCCL models 32 GB/s"),
    # No rate: say so, never guess
    (sockets.HostCpu("x86_64", "HygonGenuine", 24, 2, "Hygon C86 7285"), None, None,
     "a CPU of vendor HygonGenuine (Hygon C86 7285), which NCCL has no rate for"),
    (sockets.HostCpu("x86_64"), None, None,
     "the CPU's vendor could not be read (/proc/cpuinfo's vendor_id)"),
    (sockets.HostCpu("riscv64"), None, None, "a riscv64 CPU, which NCCL has no rate for"),
    (None, None, None, "the host's CPU was not read"),
])
def test_nccls_rate_of_the_link_between_the_sockets(cpu, nccl, gbs, said):
    assert sockets.inter_socket(cpu, nccl) == sockets.InterSocket(gbs, said)
