"""Environment variables tfbench sets at start-up, before anything imports TensorFlow:
STARTUP_ENV, the one list the entry point sets them from and the manifest's `set_by_tfbench`
names them from.

CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; NVML and nvidia-smi number
them in PCI bus order. tfbench's GPU indices are CUDA's (TensorFlow's), and the power monitor
maps them to NVML devices, so the two must agree: PCI bus order. CUDA reads the variable once,
when it initialises (TensorFlow's first device query), which is why the console scripts and
`python -m tfbench` set it first thing; sweep children and horovod ranks are started through
the same entry point and inherit it. TF_CPP_MIN_LOG_LEVEL=1 keeps TensorFlow's C++ INFO
chatter out of the log (warnings and errors still show). A value the user set is kept.

The names tfbench set go into TFBENCH_SET_ENV, so the manifest of this process, and of any
child that inherits the values, can tell tfbench's values from the user's. Imports nothing.
"""

from __future__ import annotations

import os
from typing import MutableMapping, Optional

STARTUP_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "TF_CPP_MIN_LOG_LEVEL": "1"}
SET_BY_TFBENCH = "TFBENCH_SET_ENV"


def apply(environ: Optional[MutableMapping[str, str]] = None) -> list[str]:
    """Sets STARTUP_ENV where the user has not; returns the names set now."""
    environ = os.environ if environ is None else environ
    set_now = [name for name in STARTUP_ENV if name not in environ]
    for name in set_now:
        environ[name] = STARTUP_ENV[name]
    mark(set_now, environ)
    return set_now


def mark(names: list[str], environ: Optional[MutableMapping[str, str]] = None) -> None:
    """Records that tfbench set `names` (the GPU settings of tfbench.distribute.devices too)."""
    environ = os.environ if environ is None else environ
    if names:
        environ[SET_BY_TFBENCH] = ",".join(dict.fromkeys(set_by_tfbench(environ) + names))


def set_by_tfbench(environ: Optional[MutableMapping[str, str]] = None) -> list[str]:
    """Names of the variables tfbench (this process or the one that started it) set."""
    environ = os.environ if environ is None else environ
    return [name for name in environ.get(SET_BY_TFBENCH, "").split(",") if name]
