"""A stand-in for TF-TRT's converter (TrtGraphConverterV2, tf.experimental.tensorrt.Converter),
for machines without TensorRT: the same constructor and methods as TensorFlow 2.17's
tensorflow/python/compiler/tensorrt/trt_convert.py (test_tftrt checks the parameter names against
the installed TensorFlow's, whose file is the same), the same argument checks (the profile
strategy by TensorFlow's own _verify_profile_strategy) and call order, and no TensorRT: convert()
returns the signature itself (a graph with no TRTEngineOp: zero segments) or, when GRAPH_DEF is
set, an object whose graph is that GraphDef.

As 2.17 does in dynamic-shape mode, convert() keeps INT8's calibration function and build() runs
it after the profile inputs; in implicit-batch mode (use_dynamic_shape None or False) convert()
calibrates. save() copies the input SavedModel, so the run times a model that loads on the CPU,
and writes what SerializeTRTResource writes: `assets/trt-serialized-engine.<op>` per TRTEngineOp
of GRAPH_DEF once build() ran, a TFRecord record per engine, none for an op in FAILED_ENGINES.

Class attributes set by a test: GRAPH_DEF (the converted graph's GraphDef, or None), FAIL_IN
(the method that raises TF-TRT's own error for a CPU device), FAILED_ENGINES (TRTEngineOp names
whose engine TensorRT failed to build), EVENTS (what was called, in order, with the shapes it ran
on; a test may append its own events to the same list).
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional

import tensorflow as tf

DEFAULT_TRT_MAX_WORKSPACE_SIZE_BYTES = 1 << 30   # 2.17's value without TensorRT 8.4+


def _convert_to_tensor(inp):
    """2.17's rule: a dict is keyword arguments, a list or tuple positional ones, else one."""
    if isinstance(inp, dict):
        return [], {k: tf.convert_to_tensor(v) for k, v in inp.items()}
    if isinstance(inp, (list, tuple)):
        return [tf.convert_to_tensor(v) for v in inp], {}
    return [tf.convert_to_tensor(inp)], {}


class _Graph:
    def __init__(self, graph_def):
        self._graph_def = graph_def

    def as_graph_def(self, add_shapes=False):
        return self._graph_def


class _Converted:
    """The converted function: calls the signature; its graph is GRAPH_DEF."""

    def __init__(self, func, graph_def):
        self._func = func
        self.graph = _Graph(graph_def)

    def __call__(self, *args, **kwargs):
        return self._func(*args, **kwargs)


class StandInConverter:
    GRAPH_DEF: Optional[Any] = None
    FAIL_IN: Optional[str] = None
    FAILED_ENGINES: frozenset = frozenset()
    EVENTS: list = []

    def __init__(self,
                 input_saved_model_dir=None,
                 input_saved_model_tags=None,
                 input_saved_model_signature_key=None,
                 use_dynamic_shape=None,
                 dynamic_shape_profile_strategy=None,
                 max_workspace_size_bytes=DEFAULT_TRT_MAX_WORKSPACE_SIZE_BYTES,
                 precision_mode="FP32",
                 minimum_segment_size=3,
                 maximum_cached_engines=1,
                 use_calibration=True,
                 allow_build_at_runtime=True,
                 conversion_params=None):
        self.EVENTS.append(("init", dict(
            input_saved_model_dir=input_saved_model_dir,
            input_saved_model_signature_key=input_saved_model_signature_key,
            use_dynamic_shape=use_dynamic_shape,
            dynamic_shape_profile_strategy=dynamic_shape_profile_strategy,
            max_workspace_size_bytes=max_workspace_size_bytes, precision_mode=precision_mode,
            use_calibration=use_calibration)))
        if precision_mode not in ("FP32", "FP16", "INT8", "fp32", "fp16", "int8"):
            raise ValueError("precision mode '%s' is not supported." % precision_mode)
        self._use_dynamic_shape = bool(use_dynamic_shape)   # 2.17: None is False
        if self._use_dynamic_shape and dynamic_shape_profile_strategy is not None:
            from tensorflow.python.compiler.tensorrt import trt_convert
            trt_convert.TrtGraphConverterV2._verify_profile_strategy(
                self, dynamic_shape_profile_strategy)
        self._calibration_input_fn = None
        self._input_saved_model_dir = input_saved_model_dir
        self._tags = input_saved_model_tags or ["serve"]
        self._key = input_saved_model_signature_key or "serving_default"
        self._need_calibration = precision_mode.upper() == "INT8" and use_calibration
        self._converted = False
        self._calibrated = False
        self._build_called_once = False

    def _fail(self, method: str) -> None:
        if self.FAIL_IN == method:
            raise ValueError("Specified device is not a GPU: "
                             "/job:localhost/replica:0/task:0/device:CPU:0")

    def convert(self, calibration_input_fn=None):
        assert not self._converted
        self._fail("convert")
        if self._need_calibration and not calibration_input_fn:
            raise ValueError("Should specify calibration_input_fn because INT8 calibration is "
                             "needed")
        if not self._need_calibration and calibration_input_fn:
            raise ValueError("Should not specify calibration_input_fn because INT8 calibration "
                             "is not needed")
        self._saved_model = tf.saved_model.load(self._input_saved_model_dir, self._tags)
        func = self._saved_model.signatures[self._key]
        self._converted_func = func if self.GRAPH_DEF is None else _Converted(func,
                                                                              self.GRAPH_DEF)
        if self._need_calibration:
            if not self._use_dynamic_shape:
                self._calibrate(calibration_input_fn)
            else:
                self._calibration_input_fn = calibration_input_fn
        self._converted = True
        self.EVENTS.append(("convert", None))
        return self._converted_func

    def _calibrate(self, calibration_input_fn):
        for inp in calibration_input_fn():
            args, kwargs = _convert_to_tensor(inp)
            self._converted_func(*args, **kwargs)
            self.EVENTS.append(("calibrate", [t.numpy() for t in kwargs.values()]))
        self._calibrated = True

    def build(self, input_fn):
        if self._build_called_once:
            raise NotImplementedError("build() is already called. It is not supported to call "
                                      "build() more than once.")
        if not input_fn:
            raise RuntimeError("input_fn is None. Method build() needs input_fn to be specified "
                               "in order to build TensorRT engines")
        if not self._converted:
            raise RuntimeError("Need to call convert() before build()")
        if (self._need_calibration and not self._calibrated and
                self._calibration_input_fn is None):
            raise RuntimeError("Need to provide the calibration_input_fn arg while calling "
                               "convert().")
        self._fail("build")
        first_input = None
        for inp in input_fn():   # the optimisation profiles, in dynamic-shape mode
            first_input = inp if first_input is None else first_input
            args, kwargs = _convert_to_tensor(inp)
            self._converted_func(*args, **kwargs)
            self.EVENTS.append(("build", [tuple(t.shape) + (t.dtype.name,)
                                          for t in list(args) + list(kwargs.values())]))
        if self._need_calibration and not self._calibrated:
            self._calibrate(self._calibration_input_fn)   # builds the engines
        else:
            args, kwargs = _convert_to_tensor(first_input)
            self._converted_func(*args, **kwargs)
        self._build_called_once = True

    def save(self, output_saved_model_dir, save_gpu_specific_engines=True, options=None):
        assert self._converted
        self._fail("save")
        if self._need_calibration and not self._calibrated:
            raise RuntimeError("A model that requires INT8 calibration has to be built before "
                               "saving it.")
        shutil.copytree(self._input_saved_model_dir, output_saved_model_dir)
        if self._build_called_once and self.GRAPH_DEF is not None:
            assets = os.path.join(output_saved_model_dir, "assets")
            os.makedirs(assets, exist_ok=True)
            for node in self.GRAPH_DEF.node:
                if node.op != "TRTEngineOp":
                    continue
                path = os.path.join(assets, "trt-serialized-engine." + node.name)
                with tf.io.TFRecordWriter(path) as writer:
                    if node.name not in self.FAILED_ENGINES:
                        writer.write(b"an engine for the build input's shape")
        self.EVENTS.append(("save", output_saved_model_dir))

    def summary(self, line_length=160, detailed=True, print_fn=None):
        if not self._converted:
            raise RuntimeError("Impossible to call `summary()` before calling `convert()`.")
        print_fn = print_fn or print
        graph_def = self._converted_func.graph.as_graph_def()
        engines = [n for n in graph_def.node if n.op == "TRTEngineOp"]
        print_fn("TRTEngineOP Name")
        print_fn("=" * line_length)
        print_fn(f"[*] Total number of TensorRT engines: {len(engines)}")
