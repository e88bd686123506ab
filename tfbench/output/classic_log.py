"""The classic tf_cnn_benchmarks console log, byte-compatible with the legacy script.

This is the only module that knows the legacy format. It formats plain numbers and strings; it
knows nothing about TensorFlow. Golden tests pin every line.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

DASHES = "-" * 64


def _label(name: str) -> str:
    return "%-13s" % (name + ":")


def header_lines(*, tf_version: str, model: str, dataset: str, mode: str, batch_size: int,
                 global_batch_size: int, num_batches: int, num_epochs: float,
                 devices: Sequence[str], data_format: str, optimizer: str,
                 variable_update: str, all_reduce_spec: Optional[str] = None,
                 show_all_reduce: bool = False, job_name: str = "",
                 horovod_device: Optional[str] = None) -> list[str]:
    """The block printed before the run, ending with the `==========` line."""
    major, minor = tf_version.split(".")[:2]
    lines = [
        "TensorFlow:  %i.%i" % (int(major), int(minor)),
        _label("Model") + model,
        _label("Dataset") + dataset,
        _label("Mode") + mode,
        _label("SingleSess") + "False",
        _label("Batch size") + "%s global" % global_batch_size,
        " " * 13 + "%s per device" % batch_size,
        _label("Num batches") + "%d" % num_batches,
        _label("Num epochs") + "%.2f" % num_epochs,
        _label("Devices") + str(list(devices)),
        _label("NUMA bind") + "False",
        _label("Data format") + data_format,
        _label("Optimizer") + optimizer,
        _label("Variables") + variable_update,
    ]
    if show_all_reduce:
        lines.append(_label("AllReduce") + str(all_reduce_spec))
    if job_name:
        lines.append(_label("Sync") + "True")
    if horovod_device is not None:
        lines.append(_label("Horovod on") + horovod_device)
    lines.append("==========")
    return lines


def step_header(loss_name: str, with_accuracy: bool) -> str:
    cols = ["Step", "Img/sec", loss_name]
    if with_accuracy:
        cols += ["top_1_accuracy", "top_5_accuracy"]
    return "\t".join(cols)


def perf_stats(batch_size: int, step_times: Sequence[float],
               ewma: Optional[float] = None) -> tuple[float, float, float]:
    """(mean images/sec, +/-, jitter) over the timed steps so far, as the legacy script.

    mean = B / mean(times) (EWMA-weighted mean of times when `ewma` is set); +/- = population
    std of per-step speeds / sqrt(n); jitter = 1.4826 * median absolute deviation of speeds.
    """
    times = np.asarray(step_times, dtype=np.float64)
    n = len(times)
    if ewma is not None and n > 0:
        weights = (1.0 - ewma) ** np.arange(n - 1, -1, -1)
        mean_time = float(np.sum(weights * times) / np.sum(weights))
    else:
        mean_time = float(np.mean(times))
    mean = batch_size / mean_time
    speeds = batch_size / times
    uncertainty = float(np.std(speeds) / math.sqrt(n))
    jitter = float(1.4826 * np.median(np.abs(speeds - np.median(speeds))))
    return mean, uncertainty, jitter


def step_line(step: int, mean: float, uncertainty: float, jitter: float, loss: float,
              top_1: Optional[float] = None, top_5: Optional[float] = None) -> str:
    """`step` is the 1-based step number (legacy prints step + 1 of the 0-based timed step)."""
    line = "%i\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f" % (
        step, mean, uncertainty, jitter, loss)
    if top_1 is not None:
        line += "\t%.3f\t%.3f" % (top_1, top_5)
    return line


def should_display(step_index: int, display_every: int) -> bool:
    """Legacy rule on the 0-based timed step: step 0, then every display_every-th."""
    return step_index == 0 or (step_index + 1) % display_every == 0


def eval_progress_line(step: int, examples_per_sec: float) -> str:
    return "%i\t%.1f examples/sec" % (step, examples_per_sec)


def accuracy_line(top_1: float, top_5: float, num_examples: int) -> str:
    return "Accuracy @ 1 = %.4f Accuracy @ 5 = %.4f [%d examples]" % (top_1, top_5, num_examples)


def footer_lines(images_per_sec: float) -> list[str]:
    return [DASHES, "total images/sec: %.2f" % images_per_sec, DASHES]


def mode_label(forward_only: bool, eval_mode: bool, train_and_eval: bool = False) -> str:
    if eval_mode:
        return "evaluation"
    if forward_only:
        return "forward only"
    if train_and_eval:
        return "training + evaluation"
    return "training"
