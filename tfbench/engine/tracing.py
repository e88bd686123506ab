"""--trace_file: a TensorFlow profiler trace of a few untimed steps after warm-up.

PATH ending in .json: the Chrome trace (chrome://tracing, Perfetto) is written to PATH and the
TensorBoard profile to PATH without .json plus `_profile/`. Any other PATH is the TensorBoard
log directory (`tensorboard --logdir PATH`, Profile tab), with `trace.json` inside it.
"""

from __future__ import annotations

import glob
import os
from typing import Callable

import tensorflow as tf

TRACE_STEPS = 3


def trace_paths(trace_file: str) -> tuple[str, str]:
    """(TensorBoard log directory, Chrome trace JSON path)."""
    if trace_file.endswith(".json"):
        return trace_file[:-len(".json")] + "_profile", trace_file
    return trace_file, os.path.join(trace_file, "trace.json")


def _chrome_json(xplane: str) -> bytes | None:
    """Converts the profiler's XSpace to Chrome trace JSON (TensorFlow's own converter)."""
    try:
        from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin
        data, ok = plugin.xspace_to_tools_data([xplane], "trace_viewer@", {})
        return data if ok and data else None
    except Exception:  # noqa: BLE001 - an internal API; the TensorBoard profile still stands
        return None


def trace_steps(run_step: Callable[[], object], trace_file: str, num_steps: int = TRACE_STEPS,
                chrome_json: bool = True) -> list[str]:
    """Profiles `num_steps` calls of run_step; returns the files written."""
    logdir, chrome_path = trace_paths(trace_file)
    os.makedirs(logdir, exist_ok=True)
    tf.profiler.experimental.start(logdir)
    try:
        for _ in range(num_steps):
            run_step()
    finally:
        tf.profiler.experimental.stop()
    written = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")),
                     key=os.path.getmtime)
    if chrome_json and written:
        data = _chrome_json(written[-1])
        if data:
            os.makedirs(os.path.dirname(os.path.abspath(chrome_path)), exist_ok=True)
            with open(chrome_path, "wb") as handle:
                handle.write(data)
            written.append(chrome_path)
    return written
