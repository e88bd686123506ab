"""What links the GPUs of a run all-reduce over, from NVML, and the bandwidth to expect of them.

Per GPU (pynvml of nvidia-ml-py; the calls and their return types as in nvidia-ml-py 12.535
and 13.x):
  nvmlDeviceGetCurrPcieLinkGeneration / nvmlDeviceGetCurrPcieLinkWidth     the link as it runs
  nvmlDeviceGetMaxPcieLinkGeneration / nvmlDeviceGetMaxPcieLinkWidth       the most this GPU in
        this slot can do (NVML: "possible with this device and system": a x16 card in a x8 slot
        reports 8), so a narrow slot shows as a maximum below x16
  nvmlDeviceGetGpuMaxPcieLinkGeneration                                    what the GPU supports
  nvmlDeviceGetNvLinkState(handle, link) / nvmlDeviceGetNvLinkVersion      NVLink links up and
        their version (an nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1,
        6 = 4.0, 7 = 5.0, not the version number itself)
  nvmlDeviceGetTopologyCommonAncestor(a, b)                                what joins two GPUs
  nvmlDeviceGetP2PStatus(a, b, NVML_P2P_CAPS_INDEX_NVLINK)                 0 = NVLink between them
A link running below its maximum (fewer lanes, a lower generation) is flagged; a lower
generation is normal on an idle GPU (it saves power), so links are read right after the
all-reduce probe, when the GPUs have just been busy.

The bandwidth to expect is the link's data rate in one direction (a ring all-reduce sends and
receives at once, and its bus bandwidth approaches that rate): per PCIe lane after line coding
(PCI-SIG's rates as tabled in https://en.wikipedia.org/wiki/PCI_Express#Comparison_table), per
NVLink link 20 GB/s for 1.0 (P100: 4 links, 160 GB/s both directions), 25 GB/s for 2.0 to 4.0
(V100: 6 links, 300 GB/s; A100: 12 links, 600 GB/s; H100: 18 links, 900 GB/s, NVIDIA's
datasheets) and 50 GB/s for 5.0 (B200: 18 links, 1.8 TB/s). Over NVLink when every pair of the
run's GPUs has an NVLink path, else the slowest GPU's PCIe link. GB = 10^9 bytes, as NCCL's tests
count. Between hosts NVML knows nothing: the NCCL transport (tfbench.measure.nccl_log) says what
carried the all-reduce there.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Optional, Sequence

from tfbench.measure import nvml as nvml_mod

# GB/s per lane, one direction, after 8b/10b (1.0, 2.0), 128b/130b (3.0 to 5.0) and FLIT (6.0).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# nvmlNvlinkVersion_t -> (version name, GB/s per link in one direction).
NVLINK_VERSIONS = {1: ("1.0", 20.0), 2: ("2.0", 25.0), 3: ("2.2", 25.0), 4: ("3.0", 25.0),
                   5: ("3.1", 25.0), 6: ("4.0", 25.0), 7: ("5.0", 50.0)}
# nvmlGpuTopologyLevel_t -> nvidia-smi topo's name and what it means.
TOPOLOGY = {0: ("SAME", "on one board"), 10: ("PIX", "one PCIe switch"),
            20: ("PXB", "several PCIe switches"), 30: ("PHB", "a PCIe host bridge"),
            40: ("NODE", "host bridges of one NUMA node"),
            50: ("SYS", "the link between CPU sockets")}
_P2P_CAPS_INDEX_NVLINK = 2   # NVML_P2P_CAPS_INDEX_NVLINK
_P2P_STATUS_OK = 0


@dataclasses.dataclass(frozen=True)
class GpuLink:
    """One GPU's links as NVML reads them (None: not reported)."""
    gpu: int                              # CUDA index, as --gpu_indices counts
    pcie_gen: Optional[int] = None
    pcie_width: Optional[int] = None
    pcie_gen_max: Optional[int] = None    # this GPU in this slot
    pcie_width_max: Optional[int] = None
    gpu_pcie_gen_max: Optional[int] = None   # the GPU alone
    nvlink_links: Optional[int] = None    # None: no NVLink on this GPU
    nvlink_version: Optional[int] = None  # nvmlNvlinkVersion_t of link 0

    @property
    def pcie(self) -> str:
        """'PCIe 3.0 x16' as it runs ('' when unknown)."""
        if self.pcie_gen is None or self.pcie_width is None:
            return ""
        return "PCIe %d.0 x%d" % (self.pcie_gen, self.pcie_width)

    @property
    def nvlink(self) -> str:
        if not self.nvlink_links:
            return ""
        name = NVLINK_VERSIONS.get(self.nvlink_version or 0, ("", 0.0))[0]
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

    def nvlink_gbs(self) -> Optional[float]:
        if not self.nvlink_links or self.nvlink_version not in NVLINK_VERSIONS:
            return None
        return self.nvlink_links * NVLINK_VERSIONS[self.nvlink_version][1]


@dataclasses.dataclass(frozen=True)
class Links:
    """The run's GPUs, how each pair is joined, and what that makes of the all-reduce."""
    gpus: tuple[GpuLink, ...]
    topology: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)
    nvlink_pairs: Optional[bool] = None   # every pair has an NVLink path (None: unknown)

    @property
    def over_nvlink(self) -> bool:
        return bool(self.nvlink_pairs) and all(g.nvlink_links for g in self.gpus)

    def slowest(self) -> Optional[GpuLink]:
        """The GPU whose link caps a ring all-reduce (the lowest expected rate)."""
        rated = [(self._rate(g), g) for g in self.gpus if self._rate(g) is not None]
        return min(rated, key=lambda pair: pair[0])[1] if rated else None

    def _rate(self, gpu: GpuLink) -> Optional[float]:
        return gpu.nvlink_gbs() if self.over_nvlink else gpu.pcie_gbs()

    def expected_busbw_gbs(self) -> Optional[float]:
        """The bus bandwidth a ring all-reduce over these links approaches, GB/s."""
        gpu = self.slowest()
        return None if gpu is None else self._rate(gpu)

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
                parts[-1] += " (NVLink on some GPUs, not between every pair)"
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


def _common(labels) -> str:
    """The label all GPUs share, or each distinct one with its count."""
    labels = [x for x in labels if x]
    distinct = list(dict.fromkeys(labels))
    if len(distinct) <= 1:
        return distinct[0] if distinct else ""
    return ", ".join("%d x %s" % (labels.count(x), x) for x in distinct)


def gpu_link(nvml: Any, handle: Any, gpu: int) -> GpuLink:
    """One GPU's link facts; a call NVML does not support leaves its field None."""
    get = nvml_mod.GpuReader(nvml, handle).get
    n, h = nvml, handle
    links = nvml_mod.nvlink_active_links(nvml, handle)
    version = None
    if links:
        version = get("nvlink_version", lambda: n.nvmlDeviceGetNvLinkVersion(h, 0))
    return GpuLink(
        gpu=gpu,
        pcie_gen=get("pcie_gen", lambda: n.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        pcie_width=get("pcie_width", lambda: n.nvmlDeviceGetCurrPcieLinkWidth(h)),
        pcie_gen_max=get("pcie_gen_max", lambda: n.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        pcie_width_max=get("pcie_width_max", lambda: n.nvmlDeviceGetMaxPcieLinkWidth(h)),
        gpu_pcie_gen_max=get("gpu_pcie_gen_max",
                             lambda: n.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)),
        nvlink_links=links, nvlink_version=version)


def read_links(nvml: Any, handles: Sequence[tuple[int, Any]]) -> Links:
    """The links of the GPUs `handles` ([(CUDA index, NVML handle)], measure.nvml's
    resolve_handles) and the topology of each pair."""
    gpus = tuple(gpu_link(nvml, h, i) for i, h in handles)
    topology: dict[tuple[int, int], int] = {}
    nvlink_pairs: Optional[bool] = True
    for (i, a), (j, b) in itertools.combinations(handles, 2):
        try:
            topology[(i, j)] = int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b))
        except (nvml.NVMLError, AttributeError):
            pass
        try:
            status = nvml.nvmlDeviceGetP2PStatus(a, b, _P2P_CAPS_INDEX_NVLINK)
            nvlink_pairs = nvlink_pairs and int(status) == _P2P_STATUS_OK
        except (nvml.NVMLError, AttributeError):
            nvlink_pairs = None if nvlink_pairs else nvlink_pairs
    if len(handles) < 2:
        nvlink_pairs = None
    return Links(gpus, topology, nvlink_pairs)


def gpu_links(gpu_indices: Sequence[int], nvml: Any = None) -> tuple[Optional[Links], str]:
    """(Links of these CUDA GPUs, '') or (None, why NVML cannot tell). Never raises."""
    module, reason = nvml_mod.open_nvml(nvml)
    if module is None:
        return None, reason or "NVML not available"
    try:
        handles = nvml_mod.resolve_handles(module, list(gpu_indices))
        return read_links(module, handles), ""
    except Exception as exc:  # noqa: BLE001 - NVMLError, UnmappedGpu: no facts, and why
        return None, nvml_mod._reason(exc)  # noqa: SLF001
    finally:
        nvml_mod.close_nvml(module)
