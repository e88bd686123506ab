"""TensorRT in the installed TensorFlow: whether TF-TRT (--trt_mode) can run here, and which
TensorRT it runs.

TF-TRT needs three things: a TensorFlow built with TensorRT, TensorRT's libraries at run time,
and an NVIDIA GPU. Pip TensorFlow is built without TensorRT from 2.18 on; NVIDIA's TensorFlow
containers ship it. TensorFlow reports the first two through
tensorflow.compiler.tf2tensorrt._pywrap_py_utils (the same functions 2.17's trt_convert.py
reads, unchanged to 2.21):
  get_linked_tensorrt_version()  the TensorRT it was built against, (0, 0, 0) when none;
  is_tensorrt_enabled()          False without TensorRT, and False when its libraries cannot be
                                 opened (it dlopens them);
  get_loaded_tensorrt_version()  the TensorRT loaded at run time; read only once
                                 is_tensorrt_enabled() opened it, as trt_convert.py does.
Importing that module imports TensorFlow: only runs that ask for TF-TRT read it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

# Where TF-TRT runs: the last NVIDIA TensorFlow container (TF 2.17, TensorRT 10.8).
CONTAINER = "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"

Version = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class TensorRT:
    """What TensorFlow says about its TensorRT."""
    tf_version: str
    module: bool                  # TensorFlow has the tf2tensorrt module at all
    linked: Optional[Version]     # built against; None or (0, 0, 0): built without TensorRT
    enabled: bool                 # TensorRT's libraries opened
    loaded: Optional[Version]     # loaded at run time (read when enabled)


def _pywrap() -> Any:
    from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils
    return _pywrap_py_utils


def read() -> TensorRT:
    """TensorFlow's view of its TensorRT (imports TensorFlow)."""
    import tensorflow as tf
    try:
        utils = _pywrap()
    except ImportError:
        return TensorRT(tf.__version__, False, None, False, None)
    linked = tuple(utils.get_linked_tensorrt_version())
    enabled = bool(utils.is_tensorrt_enabled())
    loaded = tuple(utils.get_loaded_tensorrt_version()) if enabled else None
    return TensorRT(tf.__version__, True, linked, enabled, loaded)


def version_text(version: Optional[Version]) -> str:
    """'10.8.0', or '' for none."""
    return ".".join(str(v) for v in version) if version and any(version) else ""


def unavailable_reasons(trt: TensorRT, device_kind: str) -> list[str]:
    """Why TF-TRT cannot run here, each in a few words; [] when it can."""
    reasons = []
    if not trt.module:
        reasons.append("TensorFlow %s has no TF-TRT module" % trt.tf_version)
    elif not version_text(trt.linked):
        reasons.append("TensorFlow %s is built without TensorRT (as every pip TensorFlow "
                       "from 2.18 on)" % trt.tf_version)
    elif not trt.enabled:
        reasons.append("TensorFlow %s is built with TensorRT %s but cannot load TensorRT's "
                       "libraries (libnvinfer)" % (trt.tf_version, version_text(trt.linked)))
    if device_kind != "gpu":
        reasons.append("TensorRT runs on NVIDIA GPUs and this run is on the %s"
                       % device_kind.upper())
    return reasons


def unavailable_message(what: str, reasons: list[str]) -> str:
    """The one line that refuses `what` (e.g. '--trt_mode=FP16') for `reasons`."""
    return ("%s cannot run here: %s. TF-TRT runs in NVIDIA's TensorFlow container (%s) on a "
            "GPU; --saved_model times the serving path without TensorRT"
            % (what, "; ".join(reasons), CONTAINER))
