"""NVML's name of a GPU as CUDA numbers it, read without starting TensorFlow or CUDA: what
`tfbench validate` plans with (the datasheet peak of its estimate, the baseline's GPU model) before
any child runs.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from tfbench.measure import nvml as nvml_mod


def cuda_gpu_name(index: int = 0, environ: Optional[Mapping[str, str]] = None,
                  nvml: Any = None) -> Optional[str]:
    """NVML's name of the GPU CUDA numbers `index` (CUDA_VISIBLE_DEVICES and CUDA's order
    applied; a MIG slice's own name, '... MIG 1g.10gb'), None when NVML cannot say which GPU
    that is: NVML's GPU `index` may be another model."""
    module, _ = nvml_mod.open_nvml(nvml)
    if module is None:
        return None
    try:
        (_, handle), = nvml_mod.resolve_handles(module, [index], environ)
        return nvml_mod.text(module.nvmlDeviceGetName(handle))
    except Exception:  # noqa: BLE001 - NVMLError, UnmappedGpu: the name is not known
        return None
    finally:
        nvml_mod.close_nvml(module)
