"""The hop between hosts: the NICs NCCL carries a multi-worker all-reduce over, their rate, and
the bus bandwidth a ring through several hosts can reach.

A ring all-reduce over several hosts is as fast as its slowest hop: within a host the GPUs'
links (tfbench.measure.links), between hosts the NICs. NCCL names the NICs it uses in its
NCCL_DEBUG=INFO log (tfbench.measure.nccl_log: `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB`,
`NET/Socket : Using [0]eth0:10.0.0.1<0>`) and spreads its channels over them, so the hop
between hosts carries up to the sum of their rates. Each worker reads its own host's NICs, as
the kernel reports them (Linux, Documentation/ABI/testing/sysfs-class-net and
drivers/infiniband/core/sysfs.c):
  /sys/class/net/<interface>/speed               Mb/s, as an integer (-1 or unreadable: unknown)
  /sys/class/infiniband/<device>/ports/<port>/rate   '100 Gb/sec (4X EDR)' (RoCE ports too)
A NIC whose rate cannot be read, a network plugin whose devices NCCL does not name (AWS
Libfabric), or no NCCL log at all: the hop's rate is unknown and no busbw is expected. GB/s =
Gb/s / 8 (10^9 bytes, as NCCL's tests count).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Optional

from tfbench.measure.links import Expectation
from tfbench.measure.nccl_log import Transport

SYSFS = "/sys"
NETWORK_HOP = "the NICs between hosts"   # how an expectation from them names its hop
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?) Gb/sec")


@dataclasses.dataclass(frozen=True)
class Nic:
    """One NIC NCCL names: its kind (IB, Socket), NCCL's name of it, its rate (Gb/s) or why not."""
    kind: str
    name: str                 # 'mlx5_0:1/IB', 'eth0:10.0.0.1<0>'
    gbps: Optional[float]
    why: str = ""             # why the rate is unknown

    @property
    def label(self) -> str:
        """'mlx5_0 at 100 Gb/s', 'eth0 at 10 Gb/s' or 'eth0: why'."""
        short = self.name.split(":")[0]
        return "%s at %g Gb/s" % (short, self.gbps) if self.gbps is not None else \
            "%s: %s" % (short, self.why)


def _read(path: str) -> tuple[Optional[str], str]:
    try:
        with open(path) as handle:
            return handle.read().strip(), ""
    except OSError as exc:   # a link that is down reads EINVAL
        return None, "%s: %s" % (path, exc.strerror or type(exc).__name__)


def nic(kind: str, name: str, sysfs: Optional[str] = None) -> Nic:
    """The rate of the NIC NCCL calls `name` in its NET/<kind> line, read under `sysfs`
    (default: this host's, SYSFS)."""
    sysfs = sysfs or SYSFS
    device = name.split(":")[0]
    if kind == "IB":
        # 'mlx5_0:1/IB' or 'mlx5_10:1/RoCE': device and port
        port = name.split(":", 1)[1].split("/")[0] if ":" in name else "1"
        path = os.path.join(sysfs, "class", "infiniband", device, "ports", port, "rate")
        text, why = _read(path)
        match = _RATE.match(text or "")
        if match:
            return Nic(kind, name, float(match.group(1)))
        return Nic(kind, name, None, why or "no rate in %s" % path)
    if kind == "Socket":
        path = os.path.join(sysfs, "class", "net", device, "speed")
        text, why = _read(path)
        try:
            speed = int(text or "")
        except ValueError:
            speed = -1
        if speed > 0:
            return Nic(kind, name, speed / 1000.0)
        return Nic(kind, name, None, why or "no speed in %s" % path)
    return Nic(kind, name, None, "NCCL's NET/%s: no rate tfbench can read" % kind)


def _kind_label(kind: str, names: list[str]) -> str:
    """'InfiniBand', 'RoCE' (NCCL's NET/IB names each port's link layer), 'TCP over'."""
    if kind == "Socket":
        return "TCP over"
    layers = sorted({n.rsplit("/", 1)[1] for n in names if "/" in n})
    return {"IB": "InfiniBand"}.get("/".join(layers), "/".join(layers) or kind)


def between_hosts(transport: Optional[Transport], sysfs: Optional[str] = None) -> Expectation:
    """The busbw the hop between hosts carries: the sum of the rates of the NICs NCCL names
    for the transport its channels between hosts use (the slowest such transport), or none
    and why."""
    if transport is None or not transport.seen:
        return Expectation.none("the cross-host hop's rate is unknown: no NCCL log of "
                                "tfbench's names the NICs between hosts (NCCL_DEBUG was set, "
                                "or NCCL wrote none)")
    if not transport.between_hosts:
        return Expectation.none("the cross-host hop's rate is unknown: NCCL's log shows no "
                                "channel between hosts")
    found = []
    for net in transport.between_hosts:   # 'NET/IB', 'NET/Socket', 'NET/AWS Libfabric'
        kind = net.split("/", 1)[1]
        names = transport.devices.get(kind, [])
        if not names:
            return Expectation.none("the cross-host hop's rate is unknown: NCCL names no "
                                    "device of %s" % net)
        nics = [nic(kind, name, sysfs) for name in names]
        unknown = [n for n in nics if n.gbps is None]
        if unknown:
            return Expectation.none("the cross-host hop's rate is unknown (%s)"
                                    % ", ".join(n.label for n in unknown))
        total = sum(n.gbps for n in nics) / 8.0
        found.append((total, "%s (%s %s)" % (
            NETWORK_HOP, _kind_label(kind, names), ", ".join(n.label for n in nics))))
    return Expectation.of(*min(found))


def slowest_hop(local: Expectation, workers: int, transport: Optional[Transport],
                sysfs: Optional[str] = None) -> Expectation:
    """What a run's all-reduce can reach: on one worker its GPUs' links (`local`); on several
    the slower of those and the hop between hosts, none when either is unknown."""
    if workers <= 1:
        return local
    hop = between_hosts(transport, sysfs)
    if hop.gbs is None:
        return hop
    if local.basis and local.gbs is None:
        return local                  # within a host unknown: the slowest hop may be there
    if local.gbs is not None and local.gbs < hop.gbs:
        return local
    return hop
