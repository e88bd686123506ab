"""--saved_model and --trt_mode: the model timed as a deployment serves it.

The model the in-process steps would run (batch norm folded unless --nofold_batch_norm) is
exported as a SavedModel whose serving signature (`serving_default`) takes `images` (any batch x
H x W x 3, in the run's input dtype) and returns `logits`; with --xla the signature is compiled
with XLA (jit_compile, kept in the SavedModel). With --trt_mode, TF-TRT converts that SavedModel
and builds its engines for the run's input shape (tfbench.engine.tftrt). The SavedModel is then
loaded with tf.saved_model.load and every step calls the loaded signature as a deployment does:
the call and the copy of its logits to the host, which is what a caller receives; top-1 and
top-5 are computed from those logits on the host, in the step, as the in-process step computes
them in its own. Export, conversion, engine building and loading happen before warm-up and are
reported apart, never in the timed steps. One check before warm-up: the served logits against
the in-process model's on one batch of synthetic images (served_max_abs_diff).

Where the SavedModels go: --saved_model_dir (kept: saved_model/, and tftrt_<MODE>/ with
--trt_mode), else a temporary directory that close() removes when the run ends, on success and
on failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Optional

import numpy as np
import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.engine import steps, tftrt
from tfbench.errors import UsageError
from tfbench.measure import tensorrt
from tfbench.results import RunResult

SIGNATURE_KEY = "serving_default"
INPUT_NAME = "images"
OUTPUT_NAME = "logits"
EXPORT_SUBDIR = "saved_model"
TEMP_PREFIX = "tfbench-saved-model-"
CHECK_SEED = 20     # the synthetic batch of the output check and the engines' build input


def trt_subdir(precision_mode: str) -> str:
    return "tftrt_" + precision_mode


def export(model: Any, path: str, image_size: int, dtype: str, jit_compile: bool = False) -> None:
    """Writes `model`'s forward pass as a SavedModel with one serving signature.

    The variables are tracked on a plain module, as Keras' own ExportArchive does (Keras 3.8 to
    3.15), so nothing of the Keras object but its forward pass is saved."""
    root = tf.Module()
    root.model_variables = list(model.variables)
    spec = tf.TensorSpec([None, image_size, image_size, 3], dtype, name=INPUT_NAME)
    serve = tf.function(lambda images: {OUTPUT_NAME: model(images, training=False)},
                        input_signature=[spec], autograph=False,
                        jit_compile=True if jit_compile else None)
    root.serve = serve
    tf.saved_model.save(root, path, signatures={SIGNATURE_KEY: serve.get_concrete_function()})


def host_accuracy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(top-1, top-5) as tf.math.in_top_k counts them: a label is in the top k when fewer than
    k logits are strictly larger than its own (ties count in), and never when its logit is not
    finite."""
    logits = logits.astype(np.float32, copy=False)
    own = logits[np.arange(len(labels)), labels]
    larger = (logits > own[:, None]).sum(axis=1)
    finite = np.isfinite(own)
    return (float(np.mean((larger < 1) & finite)), float(np.mean((larger < 5) & finite)))


class _OnHost:
    """A step's figures, already on the host (the runners read every step with .numpy())."""

    def __init__(self, values: np.ndarray):
        self._values = values

    def numpy(self) -> np.ndarray:
        return self._values


class ServedStep:
    """One timed step: the loaded signature called on the step's images, its logits copied to
    the host; returns [0, 0, top-1, top-5] as the in-process forward and eval steps do.

    Synthetic runs score random labels from [0, num_label_classes), as the in-process step
    does; real data brings its own."""

    def __init__(self, signature: Callable, device: str, from_iterator: bool,
                 num_label_classes: int, seed: int):
        self.signature = signature
        self.device = device
        self.from_iterator = from_iterator
        self.num_label_classes = num_label_classes
        self._rng = np.random.default_rng(seed)

    def __call__(self, inputs: Any) -> _OnHost:
        labels = None
        if self.from_iterator:
            element = next(inputs)
            images, labels = element if isinstance(element, (tuple, list)) else (element, None)
        else:
            images = inputs
        with tf.device(self.device):
            logits = self.signature(**{INPUT_NAME: images})[OUTPUT_NAME].numpy()
        if labels is None:
            labels = self._rng.integers(0, self.num_label_classes, len(logits))
        else:
            labels = labels.numpy()
        top_1, top_5 = host_accuracy(logits, labels)
        return _OnHost(np.array([0.0, 0.0, top_1, top_5], np.float32))


class Serving:
    """The served model of one run: its directory, export, conversion, load and step."""

    def __init__(self, p: Settings, plan, clock: Callable[[], float]):
        self.p, self.plan, self.clock = p, plan, clock
        self.loaded: Any = None        # the loaded SavedModel, alive while its steps run
        self.notices: list[str] = []   # what the run should say before warm-up
        if p.mode.saved_model_dir:
            self.directory, self._temporary = p.mode.saved_model_dir, False
            try:
                os.makedirs(self.directory, exist_ok=True)
            except OSError as exc:
                raise UsageError("--saved_model_dir=%s cannot be created: %s"
                                 % (self.directory, exc.strerror or exc)) from None
        else:
            self.directory, self._temporary = tempfile.mkdtemp(prefix=TEMP_PREFIX), True

    def close(self) -> None:
        """Removes the temporary directory (a kept --saved_model_dir stays)."""
        if self._temporary and os.path.isdir(self.directory):
            shutil.rmtree(self.directory, ignore_errors=True)

    def step(self, model: Any, res: RunResult, strategy: tf.distribute.Strategy, batch: int,
             from_iterator: bool, calibration_batches: Optional[Callable[[], Any]] = None,
             ) -> ServedStep:
        """Exports `model`, converts it with --trt_mode, loads it, checks its outputs and
        returns the step that calls it. Figures go to res.extra as they are measured.

        calibration_batches: a fresh iterable of the run's (images, labels) batches or images
        (--trt_mode=INT8 on real data); synthetic runs calibrate on synthetic batches."""
        p, plan, now = self.p, self.plan, self.clock
        dtype = _input_dtype(plan.precision)
        device = plan.device.names[0]
        check = steps.synthetic_images(strategy, batch, plan.image_size, dtype, seed=CHECK_SEED)
        exported = os.path.join(self.directory, EXPORT_SUBDIR)
        res.extra["serving_path"] = "tftrt" if p.mode.trt_mode else "saved_model"
        start = now()
        export(model, exported, plan.image_size, dtype, jit_compile=plan.xla)
        res.extra["export_sec"] = now() - start
        served = exported
        if p.mode.trt_mode:
            served = os.path.join(self.directory, trt_subdir(p.mode.trt_mode))
            self._convert(exported, served, res, check, strategy, batch, dtype,
                          calibration_batches)
        start = now()
        with tf.device(device):
            self.loaded = tf.saved_model.load(served)
        res.extra["load_sec"] = now() - start
        signature = self.loaded.signatures[SIGNATURE_KEY]
        with tf.device(device):
            got = signature(**{INPUT_NAME: check})[OUTPUT_NAME].numpy().astype(np.float32)
            want = np.asarray(model(check, training=False)).astype(np.float32)
        res.extra["served_max_abs_diff"] = float(np.max(np.abs(got - want)))
        return ServedStep(signature, device, from_iterator, plan.spec.num_classes - 1,
                          p.workload.tf_random_seed % 2**32)

    def _convert(self, exported: str, served: str, res: RunResult, check: tf.Tensor,
                 strategy: tf.distribute.Strategy, batch: int, dtype: str,
                 calibration_batches: Optional[Callable[[], Any]]) -> None:
        p, plan = self.p, self.plan
        res.extra["trt_mode"] = p.mode.trt_mode
        res.extra["tensorrt_version"] = tensorrt.version_text(tensorrt.read().loaded)
        calibration = None
        if p.mode.trt_mode == "INT8":
            res.extra["trt_calibration_batches"] = p.mode.trt_calibration_batches
            calibration = _calibration_input(p.mode.trt_calibration_batches, calibration_batches,
                                             strategy, batch, plan.image_size, dtype,
                                             p.workload.tf_random_seed)
        try:
            with tf.device(plan.device.names[0]):
                conversion = tftrt.convert(
                    exported, served, precision_mode=p.mode.trt_mode,
                    max_workspace_size_bytes=p.mode.trt_max_workspace_size_bytes,
                    signature_key=SIGNATURE_KEY,
                    build_input=lambda: iter([{INPUT_NAME: check}]),
                    calibration_input=calibration, clock=self.clock)
        except tftrt.ConversionFailed as exc:
            res.extra["exception"] = exc.detail   # TF-TRT's whole message, for the manifest
            raise
        counts = conversion.counts
        res.extra.update(
            trt_convert_sec=conversion.convert_sec, trt_build_sec=conversion.build_sec,
            trt_save_sec=conversion.save_sec, trt_segments=counts.segments,
            trt_ops_in_tensorrt=counts.ops_in_tensorrt,
            trt_ops_in_tensorflow=counts.ops_in_tensorflow, trt_engines=conversion.engines,
            trt_precisions="+".join(counts.precisions), trt_summary=list(conversion.summary))
        if not counts.segments:
            self.notices.append(
                "TF-TRT made no TensorRT segment of %s (%s): the timed steps run all %d ops of "
                "the converted graph in TensorFlow" % (plan.spec.name, p.mode.trt_mode,
                                                       counts.ops_in_tensorflow))
        elif conversion.engines < counts.segments:
            self.notices.append(
                "TF-TRT built %d TensorRT engine%s for the %d segments of %s (%s) before "
                "warm-up: TensorRT failed to build the others (TensorFlow's log says why), "
                "whose ops the timed steps run in TensorFlow"
                % (conversion.engines, "" if conversion.engines == 1 else "s", counts.segments,
                   plan.spec.name, p.mode.trt_mode))


def _input_dtype(precision: str) -> str:
    from tfbench.engine import optimizers
    return optimizers.compute_dtype(precision)


def _calibration_input(count: int, batches: Optional[Callable[[], Any]],
                       strategy: tf.distribute.Strategy, batch: int, image_size: int,
                       dtype: str, seed: int) -> tftrt.Batches:
    """INT8 calibration's input function: `count` batches of the run's own input, real
    (`batches`) or synthetic (a new synthetic batch each)."""
    def real():
        for i, element in enumerate(batches()):
            if i == count:
                return
            images = element[0] if isinstance(element, (tuple, list)) else element
            yield {INPUT_NAME: images}

    def synthetic():
        for i in range(count):
            yield {INPUT_NAME: steps.synthetic_images(strategy, batch, image_size, dtype,
                                                      seed=seed + i)}
    return real if batches is not None else synthetic
