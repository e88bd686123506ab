"""The link between a host's CPU sockets, as NCCL rates it: the most a ring all-reduce over PCIe
approaches when its GPUs hang off both sockets.

NVML's topology level SYS (nvmlDeviceGetTopologyCommonAncestor 50) joins two GPUs through "the
SMP interconnect between NUMA nodes" (QPI/UPI on Intel, Infinity Fabric on AMD): a ring through
GPUs on both sides crosses it once each way, whatever order it takes. NCCL gives that link one
rate per host CPU and connects its CPU nodes (one per NUMA node) with it; a path over it is as
fast as its slowest link, so on a dual-socket PCIe server (L4, L40S, A10, A40, T4) NCCL rings at
the inter-socket rate, not at the PCIe lanes' (31.5 GB/s for PCIe 4.0 x16).

NCCL's rates, GB/s one way (NVIDIA/nccl, as of tag v2.23.4-1; read with `git show`):
  src/graph/topo.h:19-26     PCI_BW 12.0 ("PCI Gen3 x16"), QPI_BW 6.0, AMD_BW 16.0,
                             SKL_QPI_BW 10.0, ZPI_BW 6.0, YONGFENG_ZPI_BW 9.0, P9_BW 32.0,
                             ARM_BW 6.0
  src/graph/topo.cc:69-89    ncclTopoGetInterCpuBw: POWER P9_BW; Arm ARM_BW; x86 Intel
                             SKL_QPI_BW for the Skylake class, else QPI_BW; x86 AMD AMD_BW;
                             x86 Zhaoxin YONGFENG_ZPI_BW or ZPI_BW; any other CPU LOC_BW (no
                             limit NCCL knows)
  src/graph/topo.cc:259-272  ncclTopoConnectCpus: every pair of CPU nodes of a host joined by a
                             LINK_SYS at that rate
  src/graph/topo.cc:513      the Intel class: familyId == 6 && modelId >= 0x55 (Skylake-SP)
                             is SKL, any other Intel BDW (QPI_BW)
  src/graph/xml.cc:488-530   vendor (CPUID 0's string), familyId and modelId (CPUID 1, the
                             extended fields added), which for family 6 are /proc/cpuinfo's
                             "cpu family" and "model"
  src/graph/topo.cc:402-405, 470  PCIe: the link's speed from sysfs as 100 Mb/s per lane (60 for
                             8 GT/s, 120 for 16 GT/s) x width / 80: gen3 x16 12 GB/s, gen4 x16
                             24 GB/s. tfbench keeps the line rate (31.5 for gen4 x16,
                             tfbench.measure.links) as the ceiling of one socket's rings.
The same rules hold from v2.19.1-1 (AMD_BW appears there; v2.18 gives AMD no limit) to v2.25.1-1.
From v2.26.2-1 NCCL splits the Intel class further (topo.h:22-25, topo.cc:70-94 and 519-523):
model >= 0x8F (Sapphire Rapids and later) SRP_QPI_BW 22.0, model >= 0xCF (Emerald Rapids and
later) ERP_QPI_BW 40.0. Where the run's NCCL logged its version, its own rule applies; where it
did not, the older rule, which on those CPUs is the lower rate: no healthy host is held above
what its NCCL plans for.

The CPU is read from /proc/cpuinfo's first processor (vendor_id, cpu family, model, model name)
and the machine type; a CPU whose vendor cannot be read, or one NCCL has no rate for, gives no
rate, and the caller says so rather than guess.
"""

from __future__ import annotations

import dataclasses
import platform
import re
from typing import Optional

# NCCL's rates (GB/s one way), topo.h of v2.23.4-1 (SRP, ERP: v2.26.2-1).
QPI_BW, SKL_QPI_BW, SRP_QPI_BW, ERP_QPI_BW = 6.0, 10.0, 22.0, 40.0
AMD_BW, ZPI_BW, YONGFENG_ZPI_BW, P9_BW, ARM_BW = 16.0, 6.0, 9.0, 32.0, 6.0
# Intel family 6 models where NCCL's classes start (topo.cc: 0x55 Skylake-SP; from 2.26, 0x8F
# Sapphire Rapids, 0xCF Emerald Rapids).
SKYLAKE, SAPPHIRE_RAPIDS, EMERALD_RAPIDS = 0x55, 0x8F, 0xCF
SPLIT_INTEL_FROM = (2, 26)        # the NCCL version that rates SRP and ERP apart
ZHAOXIN_VENDORS = ("CentaurHauls", "Shanghai")   # kvDictCpuVendor's "  Shanghai  ", stripped
# What a PCIe ring's hop says when it crosses the link between the sockets (the scaling verdict
# names that link as the limit).
CROSSES_SOCKETS = "ring crosses the CPU sockets"


@dataclasses.dataclass(frozen=True)
class HostCpu:
    """What NCCL reads of the host's CPU (None: not read)."""
    machine: str = ""                  # platform.machine(): x86_64, aarch64, ppc64le
    vendor: Optional[str] = None       # x86 vendor_id: GenuineIntel, AuthenticAMD
    family: Optional[int] = None       # cpu family
    model: Optional[int] = None        # model (family 6: with the extended model added)
    name: Optional[str] = None         # model name, for the reader


@dataclasses.dataclass(frozen=True)
class InterSocket:
    """The rate NCCL gives the link between the sockets (GB/s; None: none known) and the phrase
    that says whose rule it is: 'AMD: NCCL models 16 GB/s', or why there is none."""
    gbs: Optional[float]
    said: str


def host_cpu(cpuinfo: Optional[str] = None, machine: Optional[str] = None) -> HostCpu:
    """The host's CPU from /proc/cpuinfo's first processor (`cpuinfo` its text) and the
    machine type. Never raises: what cannot be read stays None."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", errors="replace") as handle:
                cpuinfo = handle.read()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())

    def number(key: str) -> Optional[int]:
        value = fields.get(key, "")
        return int(value) if value.isdigit() else None
    return HostCpu(machine=platform.machine() if machine is None else machine,
                   vendor=fields.get("vendor_id") or None, family=number("cpu family"),
                   model=number("model"), name=fields.get("model name") or None)


def _version(text: Optional[str]) -> Optional[tuple[int, int]]:
    """(2, 21) of '2.21.5+cuda12.4'; None where it is not a version."""
    found = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def _intel(cpu: HostCpu, nccl_version: Optional[str]) -> InterSocket:
    model = cpu.model if cpu.family == 6 else None
    if model is None or model < SKYLAKE:
        what = "Intel before Skylake" if model is not None else \
            "Intel, family %s model %s" % (cpu.family, cpu.model)
        return InterSocket(QPI_BW, "%s: NCCL models %g GB/s" % (what, QPI_BW))
    if model < SAPPHIRE_RAPIDS:
        return InterSocket(SKL_QPI_BW, "Intel Skylake or newer: NCCL models %g GB/s"
                           % SKL_QPI_BW)
    what, later = ("Intel Emerald Rapids or newer", ERP_QPI_BW) if model >= EMERALD_RAPIDS \
        else ("Intel Sapphire Rapids or newer", SRP_QPI_BW)
    version = _version(nccl_version)
    if version is None:
        return InterSocket(SKL_QPI_BW, "%s: NCCL models %g GB/s before 2.26 and %g from "
                           "2.26, this run's NCCL version not read" % (what, SKL_QPI_BW, later))
    if version >= SPLIT_INTEL_FROM:
        return InterSocket(later, "%s: NCCL %s models %g GB/s" % (what, nccl_version, later))
    return InterSocket(SKL_QPI_BW, "%s: NCCL %s models %g GB/s (%g from 2.26)" % (
        what, nccl_version, SKL_QPI_BW, later))


def inter_socket(cpu: Optional[HostCpu], nccl_version: Optional[str] = None) -> InterSocket:
    """NCCL's rate of the link between the sockets of a host with this CPU (module docstring);
    `nccl_version`: the run's NCCL as it logged it ('2.21.5+cuda12.4'), None: not known."""
    if cpu is None:
        return InterSocket(None, "the host's CPU was not read")
    machine = cpu.machine.lower()
    if machine.startswith(("ppc64", "powerpc")):
        return InterSocket(P9_BW, "IBM POWER: NCCL models %g GB/s" % P9_BW)
    if machine in ("aarch64", "arm64") or machine.startswith("arm"):
        return InterSocket(ARM_BW, "Arm: NCCL models %g GB/s" % ARM_BW)
    if not machine:
        return InterSocket(None, "the host's CPU could not be read (its machine type)")
    if machine not in ("x86_64", "amd64"):
        return InterSocket(None, "a %s CPU, which NCCL has no rate for" % cpu.machine)
    vendor = (cpu.vendor or "").strip()
    if vendor == "GenuineIntel":
        return _intel(cpu, nccl_version)
    if vendor == "AuthenticAMD":
        return InterSocket(AMD_BW, "AMD: NCCL models %g GB/s" % AMD_BW)
    if vendor in ZHAOXIN_VENDORS:
        rate = YONGFENG_ZPI_BW if (cpu.family, cpu.model) == (7, 0x5B) else ZPI_BW
        return InterSocket(rate, "Zhaoxin: NCCL models %g GB/s" % rate)
    if not vendor:
        return InterSocket(None, "the CPU's vendor could not be read (/proc/cpuinfo's "
                                 "vendor_id)")
    return InterSocket(None, "a CPU of vendor %s%s, which NCCL has no rate for" % (
        vendor, " (%s)" % cpu.name if cpu.name else ""))


def pcie_ring(rate: float, hop: str, cpu: Optional[HostCpu], nccl_version: Optional[str] = None
              ) -> tuple[Optional[float], str]:
    """(the busbw a ring over PCIe across the sockets approaches, the hop that decides it), or
    (None, why none is known): the slower of the slowest GPU's PCIe link (`rate` GB/s, `hop`
    its phrase) and the link between the sockets as NCCL rates it for `cpu`."""
    between = inter_socket(cpu, nccl_version)
    if between.gbs is None:
        return None, "%s, %s, and the rate of the link between them is not known: %s" % (
            hop, CROSSES_SOCKETS, between.said)
    if between.gbs < rate:
        return between.gbs, "%s, %s (%s)" % (hop, CROSSES_SOCKETS, between.said)
    return rate, "%s, slower than the link between the CPU sockets the ring crosses (%s)" % (
        hop, between.said)
