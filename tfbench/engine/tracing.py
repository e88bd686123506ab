"""--trace_file: a TensorFlow profiler trace of a few untimed steps after warm-up.

PATH ending in .json: the Chrome trace (chrome://tracing, Perfetto) is written to PATH and the
TensorBoard profile to PATH without .json plus `_profile/`. Any other PATH is the TensorBoard
log directory (`tensorboard --logdir PATH`, Profile tab), with `trace.json` inside it.

A file the user asked for that cannot be written is said in one notice line, with why; the run
goes on and its results are written.
"""

from __future__ import annotations

import glob
import importlib
import os
from typing import Callable, Optional

import tensorflow as tf

TRACE_STEPS = 3

# TensorFlow's XSpace-to-tools converter, `xspace_to_tools_data(paths: list, tool: str,
# options: dict = {}) -> (bytes, bool)`, is a private binding that moved: the 2.21.0 wheel has it
# in `_pywrap_profiler_plugin` (its `_pywrap_profiler` no longer does), the 2.17.1 wheel only in
# `_pywrap_profiler` (its .pyi: `xspace_to_tools_data(arg0: list, arg1: str, arg2: dict = ...)
# -> tuple`), with no `_pywrap_profiler_plugin` at all.
CONVERTER_MODULES = ("tensorflow.python.profiler.internal._pywrap_profiler_plugin",
                     "tensorflow.python.profiler.internal._pywrap_profiler")


def trace_paths(trace_file: str) -> tuple[str, str]:
    """(TensorBoard log directory, Chrome trace JSON path)."""
    if trace_file.endswith(".json"):
        return trace_file[:-len(".json")] + "_profile", trace_file
    return trace_file, os.path.join(trace_file, "trace.json")


def chrome_converter() -> Optional[Callable[..., tuple]]:
    """This TensorFlow's `xspace_to_tools_data`, from whichever module holds it; None if none."""
    for name in CONVERTER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        convert = getattr(module, "xspace_to_tools_data", None)
        if convert is not None:
            return convert
    return None


def _xplanes(logdir: str) -> list[str]:
    """The profiler's XSpace files under a TensorBoard log directory (one per session)."""
    return glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))


def _reason(exc: BaseException) -> str:
    """An exception's own sentence, without its class name."""
    if isinstance(exc, tf.errors.OpError):
        return exc.message
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or "no reason given"


def _chrome_json(xplane: str) -> tuple[Optional[bytes], str]:
    """(Chrome trace JSON, "") from the profiler's XSpace file, or (None, why not)."""
    convert = chrome_converter()
    if convert is None:
        return None, ("this TensorFlow has no trace converter (xspace_to_tools_data in none of %s)"
                      % ", ".join(name.rsplit(".", 1)[1] for name in CONVERTER_MODULES))
    try:
        data, ok = convert([xplane], "trace_viewer@", {})
    except Exception as exc:  # noqa: BLE001 - a private binding; its failure is said, not hidden
        return None, "TensorFlow's trace converter failed on %s: %s" % (xplane, _reason(exc))
    if not ok:
        # Both versions return (their message, False) on a failure.
        why = data.decode(errors="replace").strip() if isinstance(data, bytes) else ""
        if why:
            return None, "TensorFlow's trace converter failed on %s: %s" % (xplane, why)
    if not ok or not data:
        return None, "TensorFlow's trace converter returned no trace for %s" % xplane
    return data, ""


def trace_steps(run_step: Callable[[], object], trace_file: str,
                record_notice: Callable[[str], None], num_steps: int = TRACE_STEPS,
                chrome_json: bool = True) -> list[str]:
    """Profiles `num_steps` calls of run_step; returns the files written. The steps run even
    when no profile can be written, so the run is the one asked for; each file not written is
    one notice (`record_notice`)."""
    logdir, chrome_path = trace_paths(trace_file)
    before = set(_xplanes(logdir))
    try:
        os.makedirs(logdir, exist_ok=True)
        tf.profiler.experimental.start(logdir)
        started = True
    except (OSError, tf.errors.OpError) as exc:
        record_notice("Trace not written to %s: %s" % (logdir, _reason(exc)))
        started = False
    stop_failure = None
    try:
        for _ in range(num_steps):
            run_step()
    finally:
        if started:
            try:
                tf.profiler.experimental.stop()
            except (OSError, tf.errors.OpError) as exc:
                stop_failure = exc
    if not started:
        return []
    if stop_failure is not None:
        record_notice("Trace not written to %s: %s" % (logdir, _reason(stop_failure)))
        return []
    written = sorted(set(_xplanes(logdir)) - before, key=os.path.getmtime)
    if not written:
        record_notice("Trace not written to %s: the profiler wrote no .xplane.pb file" % logdir)
        return []
    if chrome_json:
        data, why = _chrome_json(written[-1])
        if data is not None:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(chrome_path)), exist_ok=True)
                with open(chrome_path, "wb") as handle:
                    handle.write(data)
            except OSError as exc:
                why = _reason(exc)
            else:
                written.append(chrome_path)
        if why:
            record_notice("Chrome trace not written to %s: %s; the TensorBoard profile is in %s"
                          % (chrome_path, why, logdir))
    return written
