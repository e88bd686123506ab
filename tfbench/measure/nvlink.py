"""Which NVLink a GPU has and what one link carries, from the GPU's architecture.

NVML names the architecture (nvmlDeviceGetArchitecture, an nvmlDeviceArchitecture_t: the
NVML_DEVICE_ARCH_* constants of nvidia-ml-py: 4 Pascal, 5 Volta, 6 Turing, 7 Ampere, 8 Ada,
9 Hopper in 12.535; 10 Blackwell in 13.590, 13 Rubin in 13.615) and a version per link
(nvmlDeviceGetNvLinkVersion, an nvmlNvlinkVersion_t: NVML_NVLINK_VERSION_1_0 = 1, 2_0 = 2,
2_2 = 3, 3_0 = 4, 3_1 = 5, 4_0 = 6, 5_0 = 7, 6_0 = 8 in 13.615). The version names revisions
(2.2, 3.1) that are no generation of their own (A100s report 5, 3.1: open-mpi/hwloc issue 658),
and it says nothing of a chip's link rate (GA10x's links are slower than GA100's): the
generation and the rate are the architecture's, and NVML's own name of the version is shown
only where the architecture is not known.

GB/s per link in one direction, from NVIDIA's datasheets (total both-way bandwidth / links / 2):
1.0 (P100: 4 links, 160 GB/s) 20; 2.0 (V100: 6 links, 300 GB/s; Turing TU102: 2 links, 100
GB/s) 25; 3.0 (A100: 12 links, 600 GB/s) 25, but 14.0625 on the GA10x chips (compute capability
8.6, RTX A6000 and A40: 4 links, 112.5 GB/s; NCCL rates sm86's links apart too,
src/graph/topo.h); 4.0 (H100, H200: 18 links, 900 GB/s) 25; 5.0 (B200: 18 links, 1.8 TB/s) 50;
6.0 (Rubin) not published per link: unknown.
"""

from __future__ import annotations

from typing import Optional, Sequence

# nvmlDeviceArchitecture_t -> (name, its NVLink generation, GB/s per link one way or None).
BY_ARCHITECTURE: dict[int, tuple[str, str, Optional[float]]] = {
    4: ("Pascal", "1.0", 20.0), 5: ("Volta", "2.0", 25.0), 6: ("Turing", "2.0", 25.0),
    7: ("Ampere", "3.0", 25.0), 9: ("Hopper", "4.0", 25.0), 10: ("Blackwell", "5.0", 50.0),
    13: ("Rubin", "6.0", None)}
# Compute capability -> GB/s per link one way, where a chip's links differ from its generation's.
BY_COMPUTE_CAPABILITY = {(8, 6): 14.0625}
# nvmlNvlinkVersion_t -> NVML's name of it.
VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}


def generation(architecture: Optional[int], version: Optional[int]) -> str:
    """'3.0': the architecture's NVLink generation, else NVML's name of `version` ('')."""
    if architecture in BY_ARCHITECTURE:
        return BY_ARCHITECTURE[architecture][1]
    return VERSIONS.get(version or 0, "")


def link_gbs(architecture: Optional[int],
             compute_capability: Optional[Sequence[int]] = None) -> Optional[float]:
    """One link's data rate in one direction, GB/s; None where it is not known."""
    if architecture not in BY_ARCHITECTURE:
        return None
    if compute_capability is not None and tuple(compute_capability) in BY_COMPUTE_CAPABILITY:
        return BY_COMPUTE_CAPABILITY[tuple(compute_capability)]
    return BY_ARCHITECTURE[architecture][2]
