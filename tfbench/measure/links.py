"""What links the GPUs of a run all-reduce over, from NVML, and the bandwidth to expect of them.

Per GPU (pynvml of nvidia-ml-py; the calls and their return types as in nvidia-ml-py 12.535
and 13.x):
  nvmlDeviceGetCurrPcieLinkGeneration / nvmlDeviceGetCurrPcieLinkWidth     the link as it runs
  nvmlDeviceGetMaxPcieLinkGeneration / nvmlDeviceGetMaxPcieLinkWidth       the most this GPU in
        this slot can do (NVML: "possible with this device and system": a x16 card in a x8 slot
        reports 8), so a narrow slot shows as a maximum below x16
  nvmlDeviceGetGpuMaxPcieLinkGeneration                                    what the GPU supports
  nvmlDeviceGetArchitecture, nvmlDeviceGetCudaComputeCapability            which NVLink it has
  nvmlDeviceGetNvLinkState(handle, link) / nvmlDeviceGetNvLinkVersion      NVLink links up and
        their version (an nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1,
        6 = 4.0, 7 = 5.0, 8 = 6.0 in 13.615, not the version number itself)
  nvmlDeviceGetNvLinkCapability(handle, link, NVML_NVLINK_CAP_P2P_SUPPORTED),
  nvmlDeviceGetNvLinkRemotePciInfo(handle, link) (nvidia-ml-py calls its _v2),
  nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)                        where each link goes
  nvmlDeviceGetTopologyCommonAncestor(a, b)                                what joins two GPUs
A link running below its maximum (fewer lanes, a lower generation) is flagged; a lower
generation is normal on an idle GPU (it saves power), so links are read right after the
all-reduce probe, when the GPUs have just been busy.

The bandwidth to expect is a link's data rate in one direction (a ring all-reduce sends and
receives at once, and its bus bandwidth approaches that rate): per PCIe lane after line coding
(PCI-SIG's rates as tabled in https://en.wikipedia.org/wiki/PCI_Express#Comparison_table), per
NVLink link its generation's, by the GPU's architecture (tfbench.measure.nvlink). GB = 10^9
bytes, as NCCL's tests count.

Over which links: as NCCL's topology search sees them (src/graph/xml.cc, ncclTopoGetXmlFromGpu:
a link counts when it is up and P2P-capable, and its remote PCI address says where it goes;
src/graph/topo.cc, ncclTopoAddNvLinks: a far end that is neither a GPU nor a CPU is an
NVSwitch). Where rings through every GPU of the run go over NVLink (tfbench.measure.rings:
direct links, multi-link pairs counted; or every GPU on NVSwitch), the rings' most busbw is the
expectation; else some hop of every ring crosses PCIe and the slowest GPU's PCIe link is, or,
where two GPUs are joined through SYS, the link between the CPU sockets where slower
(tfbench.measure.sockets: NCCL's rate for the host's CPU). Links to GPUs outside the run carry
none of its rings. Between hosts NVML knows nothing: the slowest hop of a multi-worker ring is
decided with the NICs NCCL names (tfbench.measure.nics).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Optional, Sequence

from tfbench.measure import nvlink
from tfbench.measure import nvml as nvml_mod
from tfbench.measure import rings
from tfbench.measure import sockets

# GB/s per lane, one direction, after 8b/10b (1.0, 2.0), 128b/130b (3.0 to 5.0) and FLIT (6.0).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# nvmlGpuTopologyLevel_t -> nvidia-smi topo's name and what it means.
TOPOLOGY = {0: ("SAME", "on one board"), 10: ("PIX", "one PCIe switch"),
            20: ("PXB", "several PCIe switches"), 30: ("PHB", "a PCIe host bridge"),
            40: ("NODE", "host bridges of one NUMA node"),
            50: ("SYS", "the link between CPU sockets")}
_NVLINK_CAP_P2P_SUPPORTED = 0   # NVML_NVLINK_CAP_P2P_SUPPORTED
_NVLINK_DEVICE_TYPE_GPU = 0     # NVML_NVLINK_DEVICE_TYPE_GPU
_NVLINK_DEVICE_TYPE_IBMNPU = 1  # an IBM POWER CPU
# What the expectation's phrase in the link description starts with (tfbench.measure.scaling
# reads it back from a results row).
EXPECTED_FROM = "expected busbw from "
NO_EXPECTATION = "no expected busbw: "
SYS_LEVEL = 50   # nvmlGpuTopologyLevel_t: the link between CPU sockets (NUMA nodes)


@dataclasses.dataclass(frozen=True)
class Expectation:
    """The busbw to expect (GB/s, None: none) and the phrase saying what decides it
    (EXPECTED_FROM + the hop, NO_EXPECTATION + why; '' where nothing needs saying)."""
    gbs: Optional[float]
    basis: str = ""

    @staticmethod
    def of(gbs: float, hop: str) -> "Expectation":
        return Expectation(gbs, EXPECTED_FROM + hop)

    @staticmethod
    def none(why: str) -> "Expectation":
        return Expectation(None, NO_EXPECTATION + why)


@dataclasses.dataclass(frozen=True)
class GpuLink:
    """One GPU's links as NVML reads them (None: not reported)."""
    gpu: int                              # CUDA index, as --gpu_indices counts
    pcie_gen: Optional[int] = None
    pcie_width: Optional[int] = None
    pcie_gen_max: Optional[int] = None    # this GPU in this slot
    pcie_width_max: Optional[int] = None
    gpu_pcie_gen_max: Optional[int] = None   # the GPU alone
    nvlink_links: Optional[int] = None    # links up; None: no NVLink on this GPU
    nvlink_version: Optional[int] = None  # nvmlNvlinkVersion_t of link 0
    architecture: Optional[int] = None    # nvmlDeviceArchitecture_t
    compute_capability: Optional[tuple[int, int]] = None
    nvlink_gpus: Optional[dict[int, int]] = None   # the run's GPUs it has links to: how many
    nvswitch_links: Optional[int] = None  # links to NVSwitches (None: not read)

    @property
    def pcie(self) -> str:
        """'PCIe 3.0 x16' as it runs ('' when unknown)."""
        if self.pcie_gen is None or self.pcie_width is None:
            return ""
        return "PCIe %d.0 x%d" % (self.pcie_gen, self.pcie_width)

    @property
    def nvlink_generation(self) -> str:
        """'3.0': the architecture's NVLink, else NVML's name of the version ('' unknown)."""
        return nvlink.generation(self.architecture, self.nvlink_version)

    @property
    def nvlink(self) -> str:
        if not self.nvlink_links:
            return ""
        name = self.nvlink_generation
        return "NVLink%s x%d" % (" " + name if name else "", self.nvlink_links)

    def degraded(self) -> str:
        """'' or what is below the maximum: 'GPU 5's PCIe link runs at x4 of x16'."""
        found = []
        if self.pcie_width and self.pcie_width_max and self.pcie_width < self.pcie_width_max:
            found.append("x%d of x%d" % (self.pcie_width, self.pcie_width_max))
        if self.pcie_gen and self.pcie_gen_max and self.pcie_gen < self.pcie_gen_max:
            found.append("gen %d of %d" % (self.pcie_gen, self.pcie_gen_max))
        if not found:
            return ""
        return "GPU %d's PCIe link runs at %s" % (self.gpu, " and ".join(found))

    def slot_limits(self) -> str:
        """'' or what the slot takes from the GPU: a narrow slot, an older generation."""
        found = []
        if self.pcie_width_max and self.pcie_width_max < 16:
            found.append("a x%d slot" % self.pcie_width_max)
        if self.gpu_pcie_gen_max and self.pcie_gen_max and \
                self.pcie_gen_max < self.gpu_pcie_gen_max:
            found.append("PCIe %d.0 where the GPU takes %d.0" % (self.pcie_gen_max,
                                                                self.gpu_pcie_gen_max))
        return "GPU %d sits in %s" % (self.gpu, " and ".join(found)) if found else ""

    def pcie_gbs(self) -> Optional[float]:
        """The PCIe link's rate in one direction at its maximum, GB/s."""
        if not self.pcie_gen_max or not self.pcie_width_max:
            return None
        lane = PCIE_LANE_GBS.get(self.pcie_gen_max)
        return None if lane is None else lane * self.pcie_width_max

    def nvlink_link_gbs(self) -> Optional[float]:
        """One NVLink link's rate in one direction, GB/s (None: not known)."""
        return nvlink.link_gbs(self.architecture, self.compute_capability)


@dataclasses.dataclass(frozen=True)
class Links:
    """The run's GPUs, how each pair is joined (PCIe topology, NVLink links) and the host's CPU."""
    gpus: tuple[GpuLink, ...]
    topology: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)
    cpu: Optional[sockets.HostCpu] = None

    def nvlink_between(self) -> dict[tuple[int, int], int]:
        """(GPU a, GPU b), a < b -> the NVLink links joining them directly (as the GPU with
        fewer says, where both read theirs)."""
        seen: dict[tuple[int, int], list[int]] = {}
        for g in self.gpus:
            for other, count in (g.nvlink_gpus or {}).items():
                if other != g.gpu:
                    seen.setdefault((min(g.gpu, other), max(g.gpu, other)), []).append(count)
        return {pair: min(counts) for pair, counts in seen.items() if min(counts) > 0}

    def _over_nvlink(self) -> tuple[Optional[str], Optional[Expectation]]:
        """('nvswitch' or 'nvlink', its expectation) where rings through every GPU go over
        NVLink; (None, why not, or None for PCIe)."""
        if len(self.gpus) < 2 or not any(g.nvlink_links for g in self.gpus):
            return None, None
        direct = self.nvlink_between()
        switched = all(g.nvswitch_links for g in self.gpus)
        if switched and direct:
            return None, Expectation.none("GPUs joined both directly and through NVSwitch, "
                                          "rings tfbench does not work out")
        nodes = [g.gpu for g in self.gpus]
        if switched:
            kind, hop = "nvswitch", "NVLink through NVSwitch"
        elif not direct:
            return None, None
        elif len(nodes) > rings.MAX_MESH:
            return None, Expectation.none("%d GPUs joined directly by NVLink, more than tfbench "
                                          "works out rings for" % len(nodes))
        elif not rings.rings(nodes, {pair: float(n) for pair, n in direct.items()}):
            return None, None
        else:
            kind, hop = "nvlink", "NVLink rings through every GPU"
        unknown = [g for g in self.gpus if g.nvlink_link_gbs() is None]
        if unknown:
            g = unknown[0]
            return kind, Expectation.none("the rate of GPU %d's %s links is not known" % (
                g.gpu, ("NVLink " + g.nvlink_generation).strip()))
        rate = {g.gpu: g.nvlink_link_gbs() for g in self.gpus}
        if kind == "nvswitch":
            # Every ring's hop leaves one GPU into the switches and enters the next from them.
            return kind, Expectation.of(min(g.nvswitch_links * rate[g.gpu] for g in self.gpus),
                                        hop)
        edges = {(a, b): n * min(rate[a], rate[b]) for (a, b), n in direct.items()}
        return kind, Expectation.of(round(rings.ring_busbw(nodes, edges), 6), hop)

    @property
    def over_nvlink(self) -> bool:
        """Whether rings through every GPU of the run go over NVLink."""
        return self._over_nvlink()[0] is not None

    def slowest(self) -> Optional[GpuLink]:
        """The GPU whose PCIe link is the slowest (the lowest expected rate)."""
        rated = [(g.pcie_gbs(), g) for g in self.gpus if g.pcie_gbs() is not None]
        return min(rated, key=lambda pair: pair[0])[1] if rated else None

    @property
    def crosses_sockets(self) -> bool:
        """Whether two of the run's GPUs are joined through SYS: every ring crosses it."""
        return any(level >= SYS_LEVEL for level in self.topology.values())

    def expectation(self, nccl_version: Optional[str] = None) -> Expectation:
        """The bus bandwidth a ring all-reduce over these links approaches, and why (module
        docstring); nothing for one GPU (no link between GPUs). `nccl_version`: the run's NCCL
        as it logged it, whose rule rates the link between the sockets (None: not known)."""
        if len(self.gpus) < 2:
            return Expectation(None)
        kind, found = self._over_nvlink()
        if found is not None:
            return found
        gpu = self.slowest()
        hop = "PCIe" + (" (no ring of NVLink through every GPU)"
                        if any(g.nvlink_links for g in self.gpus) else "")
        if gpu is None:
            return Expectation.none("NVML reports no PCIe link rate")
        if not self.crosses_sockets:
            return Expectation.of(gpu.pcie_gbs(), hop)
        gbs, said = sockets.pcie_ring(gpu.pcie_gbs(), hop, self.cpu, nccl_version)
        return Expectation.of(gbs, said) if gbs is not None else Expectation.none(said)

    def expected_busbw_gbs(self, nccl_version: Optional[str] = None) -> Optional[float]:
        """The bus bandwidth a ring all-reduce over these links approaches, GB/s."""
        return self.expectation(nccl_version).gbs

    def widest_topology(self) -> Optional[tuple[int, int, int]]:
        """(GPU a, GPU b, level) of the pair joined furthest away."""
        if not self.topology:
            return None
        (a, b), level = max(self.topology.items(), key=lambda item: item[1])
        return a, b, level

    def describe(self) -> str:
        """One phrase: 'PCIe 3.0 x16 (GPU 5: x4 of x16); GPUs joined through SYS (GPU 0 and
        GPU 4: the link between CPU sockets)'."""
        if not self.gpus:
            return ""
        parts = []
        if self.over_nvlink:
            parts.append(_common(g.nvlink for g in self.gpus))
        else:
            parts.append(_common(g.pcie for g in self.gpus) or "PCIe link not reported")
            if any(g.nvlink_links for g in self.gpus):
                parts[-1] += " (%s, no ring of it through every GPU)" % (
                    _common(g.nvlink for g in self.gpus if g.nvlink_links))
        problems = [g.degraded() for g in self.gpus if g.degraded()]
        problems += [g.slot_limits() for g in self.gpus if g.slot_limits()]
        widest = self.widest_topology()
        if widest is not None and len(self.gpus) > 1:
            a, b, level = widest
            name, meaning = TOPOLOGY.get(level, ("level %d" % level, "?"))
            parts.append("joined up to %s (GPU %d and GPU %d: %s)" % (name, a, b, meaning))
        return "; ".join(parts + problems)

    def degraded(self) -> str:
        """'' or every link below its maximum, one phrase each."""
        return "; ".join(g.degraded() for g in self.gpus if g.degraded())

    def to_json(self) -> dict[str, Any]:
        """The readings for the JSON manifest (pairs as 'a-b': JSON keys are strings)."""
        return {"gpus": [dataclasses.asdict(g) for g in self.gpus],
                "cpu": dataclasses.asdict(self.cpu) if self.cpu is not None else None,
                "topology": {"%d-%d" % pair: level for pair, level in self.topology.items()},
                "nvlink_between": {"%d-%d" % pair: n
                                   for pair, n in self.nvlink_between().items()}}


def _common(labels) -> str:
    """The label all GPUs share, or each distinct one with its count."""
    labels = [x for x in labels if x]
    distinct = list(dict.fromkeys(labels))
    if len(distinct) <= 1:
        return distinct[0] if distinct else ""
    return ", ".join("%d x %s" % (labels.count(x), x) for x in distinct)


def _address(info: Any) -> tuple[int, int, int]:
    """(domain, bus, device) of an nvmlPciInfo_t."""
    return int(info.domain), int(info.bus), int(info.device)


def _far_ends(nvml: Any, handle: Any) -> list[tuple[tuple[int, int, int], Optional[int]]]:
    """(PCI address, NVML's device type or None) at the far end of each link NCCL would use:
    up, P2P-capable and with a remote PCI address (src/graph/xml.cc skips any other)."""
    ends = []
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            up = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except (nvml.NVMLError, AttributeError):
            break   # past the last link of this GPU (or no NVLink)
        try:
            if not up or not nvml.nvmlDeviceGetNvLinkCapability(
                    handle, link, _NVLINK_CAP_P2P_SUPPORTED):
                continue
            far = _address(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link))
        except (nvml.NVMLError, AttributeError):
            continue
        try:
            kind: Optional[int] = int(nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
        except (nvml.NVMLError, AttributeError):
            kind = None
        ends.append((far, kind))
    return ends


def _host_gpus(nvml: Any) -> set[tuple[int, int, int]]:
    """PCI addresses of every GPU NVML can open on this host."""
    found = set()
    for handle in nvml_mod._openable(nvml):  # noqa: SLF001
        try:
            found.add(_address(nvml.nvmlDeviceGetPciInfo(handle)))
        except (nvml.NVMLError, AttributeError):
            continue
    return found


def gpu_link(nvml: Any, handle: Any, gpu: int) -> GpuLink:
    """One GPU's own link facts; a call NVML does not support leaves its field None."""
    get = nvml_mod.GpuReader(nvml, handle).get
    n, h = nvml, handle
    links = nvml_mod.nvlink_active_links(nvml, handle)
    version = None
    if links:
        version = get("nvlink_version", lambda: n.nvmlDeviceGetNvLinkVersion(h, 0))
    capability = get("compute_capability", lambda: n.nvmlDeviceGetCudaComputeCapability(h))
    return GpuLink(
        gpu=gpu,
        pcie_gen=get("pcie_gen", lambda: n.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        pcie_width=get("pcie_width", lambda: n.nvmlDeviceGetCurrPcieLinkWidth(h)),
        pcie_gen_max=get("pcie_gen_max", lambda: n.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        pcie_width_max=get("pcie_width_max", lambda: n.nvmlDeviceGetMaxPcieLinkWidth(h)),
        gpu_pcie_gen_max=get("gpu_pcie_gen_max",
                             lambda: n.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)),
        nvlink_links=links, nvlink_version=version,
        architecture=get("architecture", lambda: n.nvmlDeviceGetArchitecture(h)),
        compute_capability=None if capability is None else tuple(int(x) for x in capability))


def _with_far_ends(nvml: Any, gpu: GpuLink, handle: Any,
                   run: dict[tuple[int, int, int], int],
                   host: Any) -> GpuLink:
    """`gpu` with where its NVLink links go: to which of the run's GPUs (`run`: PCI address
    -> CUDA index), to NVSwitches; links to other GPUs (`host()`) and CPUs carry no ring."""
    if not gpu.nvlink_links:
        return gpu
    to_gpus: dict[int, int] = {}
    switch = 0
    for far, kind in _far_ends(nvml, handle):
        if far in run:
            to_gpus[run[far]] = to_gpus.get(run[far], 0) + 1
        elif kind in (_NVLINK_DEVICE_TYPE_GPU, _NVLINK_DEVICE_TYPE_IBMNPU) or far in host():
            continue
        else:
            switch += 1
    return dataclasses.replace(gpu, nvlink_gpus=to_gpus, nvswitch_links=switch)


def read_links(nvml: Any, handles: Sequence[tuple[int, Any]],
               cpu: Optional[sockets.HostCpu] = None) -> Links:
    """The links of the GPUs `handles` ([(CUDA index, NVML handle)], measure.nvml's
    resolve_handles), where their NVLink links go, the topology of each pair, and the host's
    CPU (`cpu`, else read from /proc/cpuinfo)."""
    gpus = [gpu_link(nvml, h, i) for i, h in handles]
    run: dict[tuple[int, int, int], int] = {}
    for i, h in handles:
        try:
            run[_address(nvml.nvmlDeviceGetPciInfo(h))] = i
        except (nvml.NVMLError, AttributeError):
            pass
    cached: list[set] = []

    def host() -> set:
        if not cached:
            cached.append(_host_gpus(nvml))
        return cached[0]
    gpus = [_with_far_ends(nvml, g, h, run, host) for g, (_, h) in zip(gpus, handles)]
    topology: dict[tuple[int, int], int] = {}
    for (i, a), (j, b) in itertools.combinations(handles, 2):
        try:
            topology[(i, j)] = int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b))
        except (nvml.NVMLError, AttributeError):
            pass
    return Links(tuple(gpus), topology, cpu if cpu is not None else sockets.host_cpu())


def gpu_links(gpu_indices: Sequence[int], nvml: Any = None,
              cpu: Optional[sockets.HostCpu] = None) -> tuple[Optional[Links], str]:
    """(Links of these CUDA GPUs, '') or (None, why NVML cannot tell). Never raises. `cpu`:
    the host's CPU (None: read from /proc/cpuinfo)."""
    module, reason = nvml_mod.open_nvml(nvml)
    if module is None:
        return None, reason or "NVML not available"
    try:
        handles = nvml_mod.resolve_handles(module, list(gpu_indices))
        return read_links(module, handles, cpu), ""
    except Exception as exc:  # noqa: BLE001 - NVMLError, UnmappedGpu: no facts, and why
        return None, nvml_mod.reason(exc)
    finally:
        nvml_mod.close_nvml(module)
