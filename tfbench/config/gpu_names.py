"""GPU model names, as NVML and CUDA report them, parsed into keys that tables can be matched on.

NVML (nvmlDeviceGetName) and TensorFlow (CUDA's cuDeviceGetName, via get_device_details) name a
GPU the same way, and the words vary by generation: 'Tesla V100-PCIE-16GB',
'NVIDIA A100-SXM4-40GB', 'NVIDIA A100 80GB PCIe', 'NVIDIA H100 80GB HBM3' (the SXM5 H100),
'NVIDIA H100 NVL', 'NVIDIA H200' (SXM), 'NVIDIA H200 NVL', 'NVIDIA L40S'; a MIG slice is
'NVIDIA A100-SXM4-40GB MIG 1g.5gb'. tfbench's tables name GPUs in the same words ('V100 PCIe',
'A100 40GB SXM'), so both sides parse to a GpuKey. Substring or regex matching gets these wrong
('V100' is in 'Tesla V100-PCIE-16GB', 'H100' in 'NVIDIA H100 NVL').

Several GPUs of different models, as tfbench names them (joined by MIXED_SEPARATOR), parse to
None: no one peak or published figure describes them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

MIXED_SEPARATOR = " + "

_DROP_WORDS = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO"}
_FORM_WORDS = {"SXM": "SXM", "SXM2": "SXM", "SXM3": "SXM", "SXM4": "SXM", "SXM5": "SXM",
               "PCIE": "PCIe", "NVL": "NVL"}
_FAMILY_TOKEN = re.compile(r"^[A-Z]{1,3}\d{1,4}[A-Z]{0,2}$")
_MEM_TOKEN = re.compile(r"^(\d+)GB$")
# CUDA and NVML append the slice's profile: '... MIG 1g.5gb', '... MIG 1g.10gb+me'.
_MIG = re.compile(r"\bMIG\b\s*(\S*)", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class GpuKey:
    """A GPU as (family, memory in GB, form factor); None means 'not stated'.

    form_token keeps the form as written ('SXM2', 'SXM4', 'PCIE'): V100 SXM2 and SXM3 boards
    differ in clocks. mig is the profile of a MIG slice ('1g.5gb'), None for a whole GPU.
    """

    family: str
    mem_gb: Optional[int] = None
    form: Optional[str] = None
    form_token: Optional[str] = None
    mig: Optional[str] = None

    def matches(self, other: "GpuKey") -> bool:
        """Same GPU where both state a part; a MIG slice never matches a whole GPU."""
        return (self.family == other.family
                and (self.mem_gb is None or other.mem_gb is None or self.mem_gb == other.mem_gb)
                and (self.form is None or other.form is None or self.form == other.form)
                and (self.mig is None) == (other.mig is None))

    def __str__(self) -> str:
        parts = [self.family, self.mem_gb and "%dGB" % self.mem_gb, self.form,
                 None if self.mig is None else ("MIG " + self.mig).strip()]
        return " ".join(str(p) for p in parts if p)


def parse(name: Optional[str]) -> Optional[GpuKey]:
    """'NVIDIA A100-SXM4-40GB' -> A100 40GB SXM. None for CPUs, mixed sets and unknown names."""
    if not name or MIXED_SEPARATOR in name:
        return None
    mig = None
    found = _MIG.search(name)
    if found:
        mig = found.group(1).lower()
        name = name[:found.start()]
    upper = name.upper()
    if "CPU" in upper or "GHZ" in upper:
        return None
    tokens = [t for t in re.split(r"[^A-Z0-9]+", upper) if t and t not in _DROP_WORDS]
    family = mem = form = form_token = None
    for i, token in enumerate(tokens):
        if token in _FORM_WORDS:
            if form is None:
                form, form_token = _FORM_WORDS[token], token
        elif _MEM_TOKEN.match(token):
            mem = mem or int(_MEM_TOKEN.match(token).group(1))
        elif family is None and token == "RTX" and i + 1 < len(tokens):
            family = "RTX " + tokens[i + 1]
        elif family is None and _FAMILY_TOKEN.match(token) and not token.startswith("HBM"):
            family = token
    if family is None:
        return None
    if form is None and family == "H100" and "HBM3" in tokens:
        form = "SXM"  # NVML calls the SXM5 H100 'NVIDIA H100 80GB HBM3'; the PCIe one says PCIe
    return GpuKey(family, mem, form, form_token, mig)


def form_fits(row: GpuKey, gpu: GpuKey) -> bool:
    """Does a table row's form cover this GPU's? A row saying 'SXM' covers every SXM board; a
    row saying 'SXM2' only SXM2 boards."""
    if row.form is None or row.form != gpu.form:
        return False
    generic = row.form_token is None or row.form_token == row.form.upper()
    return generic or row.form_token == gpu.form_token
