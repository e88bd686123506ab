"""--trt_mode: the served SavedModel converted by TF-TRT, TensorFlow's own converter.

Written against TensorFlow 2.17's tensorflow/python/compiler/tensorrt/trt_convert.py (the NVIDIA
container's; the 2.21.0 wheel's file is the same), TrtGraphConverterV2, public as
tf.experimental.tensorrt.Converter:
  Converter(input_saved_model_dir=, input_saved_model_signature_key=, use_dynamic_shape=,
            dynamic_shape_profile_strategy=, precision_mode=, max_workspace_size_bytes=,
            use_calibration=)
  convert(calibration_input_fn=None) -> the converted ConcreteFunction; in dynamic-shape mode
      it keeps the calibration function for build();
  build(input_fn) -> None: runs the converted function once per input to make the optimisation
      profiles, then INT8 calibration (which builds the engines) or one more call on the first
      input (which builds them); called at most once;
  save(output_saved_model_dir) -> None: the converted SavedModel, with the engines built;
  summary(line_length=160, detailed=True, print_fn=None) -> None: a table through print_fn.
Input functions yield one batch each, as a dict of the signature's inputs (the converter passes a
dict as keyword arguments). Everything here runs before the timed steps.

Dynamic shape, not implicit batch: TensorRT 10 (NVIDIA's 25.02 container) has no implicit batch
dimension, and `use_dynamic_shape=None` is implicit batch (`__init__`: None is False;
`_run_conversion`: `use_implicit_batch=not self._use_dynamic_shape`). In dynamic-shape mode the
engines are built for the optimisation profiles build() makes from its inputs: one batch of the
run's shape, with the "Optimal" strategy one profile for exactly that shape (the timed steps and
the calibration batches have it too).

Segments and ops are counted as summary() counts them: a segment is a TRTEngineOp node of the
converted graph, its ops the nodes of its native segment function (`<node name>_native_segment`);
every other node of the graph (placeholders and outputs included) is left to TensorFlow. Engines
are counted in the saved SavedModel: save() writes `assets/trt-serialized-engine.<op name>` per
TRTEngineOp whose cache exists, one TFRecord-framed record per engine built; TensorFlow's
SerializeTRTResource (trt_engine_resource_ops.cc) skips an engine that failed to build, whose
segment then runs in TensorFlow.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from typing import Any, Callable, Iterator, Optional

from tfbench.errors import TfbenchError

ENGINE_OP = "TRTEngineOp"
ENGINE_FILE_PREFIX = "trt-serialized-engine."
PROFILE_STRATEGY = "Optimal"   # one of trt_convert.supported_profile_strategies()
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


def engines_saved(saved_model_dir: str) -> int:
    """TensorRT engines serialized in a TF-TRT SavedModel (see the module docstring)."""
    import tensorflow as tf
    pattern = os.path.join(saved_model_dir, "assets", ENGINE_FILE_PREFIX + "*")
    return sum(sum(1 for _ in tf.data.TFRecordDataset(path)) for path in glob.glob(pattern))


@dataclasses.dataclass(frozen=True)
class Conversion:
    """What one conversion did, and how long each part took (seconds)."""
    counts: Counts
    engines: int           # TensorRT engines built and saved (engines_saved)
    convert_sec: float     # convert()
    build_sec: float       # build(): the profile and engines for the run's input shape, INT8
                           # calibration included
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
    converter does), of the run's shape like build_input's batch. A failure raises TfbenchError naming the part that failed; the exception
    it came from is its __cause__."""
    int8 = precision_mode == "INT8"
    part = "create the converter"
    try:
        converter = converter_class()(
            input_saved_model_dir=saved_model_dir,
            input_saved_model_signature_key=signature_key,
            use_dynamic_shape=True,
            dynamic_shape_profile_strategy=PROFILE_STRATEGY,
            precision_mode=precision_mode,
            max_workspace_size_bytes=max_workspace_size_bytes,
            use_calibration=int8)
        part = "convert"
        start = clock()
        converted = converter.convert(calibration_input_fn=calibration_input if int8 else None)
        convert_sec = clock() - start
        counts = segment_counts(converted.graph.as_graph_def())
        part = "build the TensorRT engines" + (" (INT8 calibration included)" if int8 else "")
        start = clock()
        converter.build(input_fn=build_input)
        build_sec = clock() - start
        lines = _summary(converter)
        part = "save the converted SavedModel"
        start = clock()
        converter.save(output_dir)
        save_sec = clock() - start
        part = "read the saved engines"
        engines = engines_saved(output_dir)
    except Exception as exc:  # noqa: BLE001 - the converter raises many kinds; each is its own
        raise ConversionFailed(part, precision_mode, exc) from exc
    return Conversion(counts, engines, convert_sec, build_sec, save_sec, tuple(lines))


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
