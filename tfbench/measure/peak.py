"""Peak TFLOP/s for model-FLOPs utilisation (MFU), from a datasheet table or a measured probe.

MFU = achieved model TFLOP/s / (peak TFLOP/s per device x devices).
* GPUs: the shipped table (reference_data/gpu_peaks.csv: dense fp32 / tf32 / fp16 / bf16 peaks
  with their source), matched on the parsed model name (tfbench.config.gpu_names: family and form
  factor, so 'Tesla V100-PCIE-16GB' gets the PCIe row and 'NVIDIA H100 NVL' its own).
  TensorFlow runs fp32 convolutions and matmuls on TF32 tensor cores on Ampere and newer, so
  fp32 runs use the tf32 column where a GPU has one.
* Anything else (CPUs, unknown GPUs, MIG slices, which have a fraction of the GPU's SMs):
  `tfbench peak` measures achievable FLOP/s with a large
  matmul and a large 3x3 convolution training step in each precision, keeps the better of the
  two, and caches it per device and TensorFlow version; runs then use the cached figure.
* --peak_tflops overrides both.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import time
from importlib import resources
from typing import Callable, Optional

from tfbench.config import gpu_names

PRECISIONS = ("fp32", "fp16", "bf16")


@functools.lru_cache(maxsize=1)
def _table() -> tuple[tuple[gpu_names.GpuKey, dict[str, str]], ...]:
    text = resources.files("tfbench.measure").joinpath("reference_data/gpu_peaks.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    return tuple((gpu_names.parse(row["gpu"]), row) for row in rows)


def peak_row(device_name: str) -> Optional[dict[str, str]]:
    """The table row of this GPU model: the row of its family and form (a row naming 'SXM2'
    only fits SXM2 boards), else its family's row without a form. None for unknown GPUs,
    MIG slices (a fraction of the GPU) and mixed sets."""
    gpu = gpu_names.parse(device_name)
    if gpu is None or gpu.mig is not None:
        return None
    family = [(key, row) for key, row in _table() if key.family == gpu.family]
    for key, row in family:
        if gpu_names.form_fits(key, gpu):
            return row
    for key, row in family:
        if key.form is None:
            return row
    return None


def gpu_peak(device_name: str, precision: str) -> Optional[tuple[float, str]]:
    """(dense peak TFLOP/s of one GPU, source) from the table, or None when unknown."""
    row = peak_row(device_name)
    if row is None:
        return None
    column = "tf32" if precision == "fp32" and row["tf32"] else precision
    return (float(row[column]), row["source"]) if row.get(column) else None


def gpu_peak_tflops(device_name: str, precision: str) -> Optional[float]:
    found = gpu_peak(device_name, precision)
    return found[0] if found else None


def mfu_pct(tflops_per_sec: Optional[float], peak_per_device: Optional[float],
            num_devices: int) -> Optional[float]:
    if not tflops_per_sec or not peak_per_device or num_devices <= 0:
        return None
    return 100.0 * tflops_per_sec / (peak_per_device * num_devices)


# --- measured probe -------------------------------------------------------------------------
CACHE_FILE = "peak.json"


def cache_path() -> str:
    """Where `tfbench peak` keeps its figures: $TFBENCH_CACHE_DIR/peak.json, else
    ~/.cache/tfbench/peak.json."""
    base = os.environ.get("TFBENCH_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tfbench")
    return os.path.join(base, CACHE_FILE)


def cache_key(device_name: str, precision: str) -> str:
    import tensorflow as tf
    return "%s|%s|%s" % (device_name, tf.__version__, precision)


def cached_peak(device_name: str, precision: str) -> Optional[float]:
    try:
        with open(cache_path()) as handle:
            entry = json.load(handle).get(cache_key(device_name, precision))
    except (OSError, ValueError):
        return None
    return entry["tflops"] if entry else None


def _time_op(fn, flops: float, seconds: float) -> float:
    """Best-of TFLOP/s of a call (one of the probes below), after one untimed call."""
    fn()
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        best = max(best, flops / (time.perf_counter() - start) / 1e12)
    return best


# The probes' sizes per device kind: (N of the NxN matmul, image size of the convolution).
PROBE_SIZES = {"gpu": (8192, 56), "cpu": (2048, 28)}
CONV_BATCH, CONV_CHANNELS = 32, 256
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def matmul_probe(device: str, precision: str, n: int) -> tuple[Callable[[], object], float]:
    """(a call, its FLOPs): an NxN matmul in `precision` on `device` (placed inside the
    compiled function, whoever calls it), one element of its product fetched to the host, so
    the call waits for the whole product."""
    import tensorflow as tf
    dtype = DTYPES[precision]
    with tf.device(device):
        a = tf.cast(tf.random.normal([n, n], dtype=tf.float32), dtype)

    @tf.function
    def matmul():
        with tf.device(device):
            return tf.reduce_sum(tf.matmul(a, a)[:1, :1])
    return (lambda: matmul().numpy()), 2.0 * n ** 3


def conv_probe(device: str, precision: str,
               size: int) -> tuple[Callable[[], object], float]:
    """(a call, its FLOPs): a ResNet-like 3x3 convolution training step (forward and both
    backward convolutions: 3x the forward FLOPs) in `precision` on `device`."""
    import tensorflow as tf
    dtype = DTYPES[precision]
    batch, channels = CONV_BATCH, CONV_CHANNELS
    with tf.device(device):
        x = tf.cast(tf.random.normal([batch, size, size, channels]), dtype)
        w = tf.Variable(tf.cast(tf.random.normal([3, 3, channels, channels], stddev=0.02), dtype))

    @tf.function
    def conv_step():
        with tf.device(device):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.nn.conv2d(x, w, 1, "SAME")
                loss = tf.reduce_sum(tf.cast(y, tf.float32))
            dx, dw = tape.gradient(loss, [x, w])
            return tf.reduce_sum(tf.cast(dx[:1, :1, :1, :1], tf.float32)) + \
                tf.reduce_sum(tf.cast(dw[:1, :1, :1, :1], tf.float32))
    return (lambda: conv_step().numpy()), 3 * 2.0 * batch * size * size * channels * channels * 9


def probe(device: str, precision: str, matmul_size: int, conv_size: int,
          seconds: float = 2.0) -> dict:
    """Measures a large matmul and a 3x3 convolution training step in `precision`: the best
    TFLOP/s of each over `seconds`."""
    matmul_tflops = _time_op(*matmul_probe(device, precision, matmul_size), seconds)
    conv_tflops = _time_op(*conv_probe(device, precision, conv_size), seconds)
    return {"matmul_tflops": matmul_tflops, "conv_tflops": conv_tflops,
            "tflops": max(matmul_tflops, conv_tflops)}
