"""The interconnect NCCL chose, read from its NCCL_DEBUG=INFO log.

Cross-host scaling depends on the transport far more than on anything tfbench does: the same
8-GPU hosts reach ~90% efficiency over InfiniBand with GPUDirect RDMA and far less over TCP
sockets, and NCCL falls back to sockets without an error. `tfbench launch --nccl_debug` has NCCL
log its choices to a file on every host (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,
NCCL_DEBUG_FILE), so the classic log stays unchanged, and the scaling table states what was seen.

The lines read (NCCL 2.x, as the versions TensorFlow 2.17-2.21 ship print them):
  NCCL version 2.21.5+cuda12.4                            (alone, or after `NCCL INFO`)
  NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:192.168.11.1<0>
  NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:...
  NCCL INFO NET/Socket : Using [0]eth0:10.140.0.7<0>
  NCCL INFO Using network IB | Socket | AWS Libfabric
  NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA       (between hosts)
  NCCL INFO Channel 00/0 : 3[3] -> 8[0] [send] via NET/IB/0(1)/GDRDMA    (PXN: rank 1's NIC)
  NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC | P2P/CUMEM/read | SHM/direct/direct
  NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0                (older NCCL)
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

_VERSION = re.compile(r"NCCL version (\S+)")
_NET_USING = re.compile(r"NET/(IB|Socket) : Using (.*)")
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_VIA_NET = re.compile(r"via NET/([^/\n]+)/\d+(?:\(\d+\))?(/GDRDMA)?")
_VIA_LOCAL = re.compile(r"via ((?:P2P|SHM|NVLS)[^\n]*?)\s*$")
_DEVICE = re.compile(r"\[\d+\]([^\s\[]+)")


@dataclasses.dataclass
class Transport:
    version: Optional[str] = None
    network: Optional[str] = None                          # "Using network X"
    devices: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # IB/Socket -> NICs
    between_hosts: list[str] = dataclasses.field(default_factory=list)  # NET/IB, NET/Socket...
    gpudirect_rdma: bool = False
    within_host: list[str] = dataclasses.field(default_factory=list)    # P2P/IPC, SHM, ...

    @property
    def seen(self) -> bool:
        return bool(self.version or self.network or self.devices or self.between_hosts
                    or self.within_host)


def warnings(text: str) -> list[str]:
    """NCCL's WARN lines in `text` (NCCL logs warnings whatever subsystems NCCL_DEBUG_SUBSYS
    names, src/include/debug.h's WARN passing NCCL_ALL, unless it names none NCCL knows: empty,
    unknown names only, or ^ALL, src/debug.cc)."""
    return [line for line in text.splitlines() if " NCCL WARN " in line]


def subsys_logs_init(value: str) -> bool:
    """Whether NCCL_DEBUG_SUBSYS=value logs NCCL's INIT lines, where every transport line read
    here is logged: NCCL's src/debug.cc splits it at commas (strtok: empty names skipped,
    spaces kept), compares names case-insensitively (an unknown name adds nothing), and a `^`
    first logs every subsystem but those named; ALL names them all."""
    invert = value.startswith("^")
    names = {name.upper() for name in value[invert:].split(",") if name}
    named = bool(names & {"INIT", "ALL"})
    return not named if invert else named


def parse(text: str) -> Transport:
    """Every NCCL transport fact in `text` (one or several processes' logs)."""
    t = Transport()
    for line in text.splitlines():
        match = _VERSION.search(line)
        if match and t.version is None:
            t.version = match.group(1)
        match = _NET_USING.search(line)
        if match:
            kind, rest = match.groups()
            names = _DEVICE.findall(rest.split(";")[0])
            known = t.devices.setdefault(kind, [])
            known.extend(n for n in names if n not in known)
        match = _NETWORK.search(line)
        if match and t.network is None:
            t.network = match.group(1)
        match = _VIA_NET.search(line)
        if match:
            name = "NET/" + match.group(1)
            if name not in t.between_hosts:
                t.between_hosts.append(name)
            t.gpudirect_rdma = t.gpudirect_rdma or bool(match.group(2))
            continue
        match = _VIA_LOCAL.search(line)
        if match:
            parts = match.group(1).split("/")
            name = "/".join(parts[:2]) if parts[0] == "P2P" else parts[0]
            if name not in t.within_host:
                t.within_host.append(name)
    return t


def _nics(t: Transport, kind: str) -> str:
    """'InfiniBand mlx5_0, mlx5_1' / 'RoCE mlx5_10' / 'eth0' from the NET/<kind> : Using line."""
    names = t.devices.get(kind, [])
    if kind == "Socket":
        return ", ".join(n.split(":")[0] for n in names)
    layers = sorted({n.rsplit("/", 1)[1] for n in names if "/" in n})
    label = {"IB": "InfiniBand"}.get("/".join(layers), "/".join(layers))
    ports = ", ".join(n.split(":")[0] for n in names)
    return " ".join(x for x in (label, ports) if x)


def describe(t: Transport) -> Optional[str]:
    """One phrase: 'NCCL 2.21.5: between hosts NET/IB (InfiniBand mlx5_0, mlx5_1) with GPUDirect
    RDMA; within a host P2P/IPC'. None when the log holds no NCCL line."""
    if not t.seen:
        return None
    parts = []
    if t.between_hosts:
        names = []
        for name in t.between_hosts:
            kind = name.split("/", 1)[1]
            nics = _nics(t, kind) if kind in t.devices else ""
            if kind == "Socket":
                nics = "TCP" + (" over " + nics if nics else "")
            names.append(name + (" (%s)" % nics if nics else ""))
        parts.append("between hosts " + ", ".join(names)
                     + (" with GPUDirect RDMA" if t.gpudirect_rdma else ""))
    elif t.network:
        parts.append("network %s available, no channel between hosts seen" % t.network)
    if t.within_host:
        parts.append("within a host " + ", ".join(t.within_host))
    text = "; ".join(parts) or "no transport line (NCCL_DEBUG_SUBSYS without INIT?)"
    return ("NCCL %s: " % t.version if t.version else "NCCL: ") + text
