"""--trt_mode: the served SavedModel converted by TF-TRT, TensorFlow's own converter.

Written against TensorFlow 2.17's tensorflow/python/compiler/tensorrt/trt_convert.py (the NVIDIA
container's; unchanged to 2.21), TrtGraphConverterV2, public as tf.experimental.tensorrt.Converter:
  Converter(input_saved_model_dir=, input_saved_model_signature_key=, precision_mode=,
            max_workspace_size_bytes=, use_calibration=)
  convert(calibration_input_fn=None) -> the converted ConcreteFunction; with INT8 calibration
      it runs the calibration batches and builds the calibrated engines itself;
  build(input_fn) -> None: runs the converted function once per input, building the TensorRT
      engines (for INT8 they exist already); called at most once;
  save(output_saved_model_dir) -> None: the converted SavedModel, with the engines built;
  summary(line_length=160, detailed=True, print_fn=None) -> None: a table through print_fn.
Input functions yield one batch each, as a dict of the signature's inputs (the converter passes a
dict as keyword arguments). Everything here runs before the timed steps.

Segments and ops are counted as summary() counts them: a segment is a TRTEngineOp node of the
converted graph, its ops the nodes of its native segment function (`<node name>_native_segment`);
every other node of the graph (placeholders and outputs included) is left to TensorFlow.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Iterator, Optional

from tfbench.errors import TfbenchError

ENGINE_OP = "TRTEngineOp"
Batches = Callable[[], Iterator[dict]]   # an input function: yields {input name: batch}


@dataclasses.dataclass(frozen=True)
class Counts:
    segments: int               # TRTEngineOp nodes
    ops_in_tensorrt: int        # nodes of their native segments
    ops_in_tensorflow: int      # every other node of the graph
    precisions: tuple[str, ...]   # the engines' precision_mode attributes, sorted, distinct


def segment_counts(graph_def: Any) -> Counts:
    """Counts of a converted GraphDef, as TrtGraphConverterV2.summary() counts them."""
    segment_sizes = {f.signature.name: len(f.node_def) for f in graph_def.library.function}
    engines = [n for n in graph_def.node if n.op == ENGINE_OP]
    return Counts(
        segments=len(engines),
        ops_in_tensorrt=sum(segment_sizes.get("%s_native_segment" % n.name, 0) for n in engines),
        ops_in_tensorflow=len(graph_def.node) - len(engines),
        precisions=tuple(sorted({n.attr["precision_mode"].s.decode() for n in engines}
                                - {""})))


@dataclasses.dataclass(frozen=True)
class Conversion:
    """What one conversion did, and how long each part took (seconds)."""
    counts: Counts
    convert_sec: float     # convert(), INT8 calibration included
    build_sec: float       # build(): the engines for the run's input shape
    save_sec: float        # save(): the converted SavedModel
    summary: tuple[str, ...]   # summary()'s lines


def converter_class() -> Any:
    import tensorflow as tf
    return tf.experimental.tensorrt.Converter


def convert(saved_model_dir: str, output_dir: str, *, precision_mode: str,
            max_workspace_size_bytes: int, signature_key: str, build_input: Batches,
            calibration_input: Optional[Batches] = None,
            clock: Callable[[], float] = time.perf_counter) -> Conversion:
    """Converts saved_model_dir into output_dir with its engines built before any timed step.

    calibration_input: INT8's calibration batches (required for INT8, refused otherwise, as the
    converter does). A failure raises TfbenchError naming the part that failed; the exception
    it came from is its __cause__."""
    int8 = precision_mode == "INT8"
    part = "create the converter"
    try:
        converter = converter_class()(
            input_saved_model_dir=saved_model_dir,
            input_saved_model_signature_key=signature_key,
            precision_mode=precision_mode,
            max_workspace_size_bytes=max_workspace_size_bytes,
            use_calibration=int8)
        part = "convert" + (" (INT8 calibration included)" if int8 else "")
        start = clock()
        converted = converter.convert(calibration_input_fn=calibration_input if int8 else None)
        convert_sec = clock() - start
        counts = segment_counts(converted.graph.as_graph_def())
        part = "build the TensorRT engines"
        start = clock()
        converter.build(input_fn=build_input)
        build_sec = clock() - start
        lines = _summary(converter)
        part = "save the converted SavedModel"
        start = clock()
        converter.save(output_dir)
        save_sec = clock() - start
    except Exception as exc:  # noqa: BLE001 - the converter raises many kinds; each is its own
        raise ConversionFailed(part, precision_mode, exc) from exc
    return Conversion(counts, convert_sec, build_sec, save_sec, tuple(lines))


def _summary(converter: Any) -> list[str]:
    """summary()'s lines, read before save() (which may drop the native segments it counts);
    [] when it fails: a table for the manifest, not a figure."""
    lines: list[str] = []
    try:
        converter.summary(print_fn=lambda *line: lines.append(" ".join(map(str, line))))
    except Exception:  # noqa: BLE001 - 2.17's summary() fails on a segment it cannot find
        return []
    return lines


class ConversionFailed(TfbenchError):
    """TF-TRT refused the model; the message names the part and TF-TRT's own first line."""

    def __init__(self, part: str, precision_mode: str, exc: BaseException):
        text = [line.strip() for line in str(exc).splitlines() if line.strip()]
        self.detail = "%s: %s" % (type(exc).__name__, str(exc))
        super().__init__("TF-TRT (%s) could not %s: %s" % (
            precision_mode, part, text[0] if text else type(exc).__name__))
