"""Expected range: how a measured images/sec compares with published figures for the same GPU.

The reference table (tfbench/measure/reference_data/published.csv) holds literature values, each with its
source and framework. Published numbers differ in framework (TF1 graph code, PyTorch), data (real,
synthetic), XLA and batch size, so a run is judged against a band: the lowest to the highest
matching value, widened by a tolerance (default 10%). TensorFlow figures are preferred; when a GPU
has only other-framework figures (e.g. PyTorch DLE on H100), those are used and labelled "sanity
bound". Plain csv, no pandas: the runner imports this module.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import re
from importlib import resources
from typing import Optional

from tfbench.config import gpu_names

DEFAULT_TOLERANCE = 0.10

GpuKey = gpu_names.GpuKey


def normalize_gpu(name: Optional[str]) -> Optional[GpuKey]:
    """Parses NVML/TF names ('NVIDIA A100-SXM4-40GB', 'Tesla T4') and our own ('A100 40GB SXM').

    None for CPUs, mixed sets and names without a recognisable GPU model (tfbench.config.gpu_names).
    """
    return gpu_names.parse(name)


def normalize_model(name: str) -> str:
    """resnet50 and resnet50_v1.5 share one family: published tables mix the two variants."""
    key = re.sub(r"[_\-]", "", (name or "").lower())
    key = key.replace("official", "")
    if key.startswith("resnet50v1") or key in ("resnet50", "resnet50v15"):
        return "resnet50"
    return key


def normalize_precision(name: str) -> str:
    key = (name or "fp32").lower()
    if key in ("", "fp32", "tf32", "float32"):
        return "fp32"
    if key in ("fp16", "amp", "mixed_float16", "float16"):
        return "fp16"
    if key in ("bf16", "mixed_bfloat16", "bfloat16"):
        return "bf16"
    return key


def normalize_mode(name: str) -> str:
    key = (name or "training").lower()
    if key in ("inference", "forward_only", "forward-only", "infer"):
        return "forward_only"
    if key in ("train", "training"):
        return "training"
    return key


@dataclasses.dataclass(frozen=True)
class Reference:
    gpu: str
    model: str
    mode: str
    precision: str
    batch_per_gpu: Optional[int]
    num_gpus: int
    images_per_sec: float
    framework: str
    source: str
    notes: str

    @property
    def is_tensorflow(self) -> bool:
        return "TF" in self.framework or "tf_cnn" in self.framework

    def label(self) -> str:
        batch = " (bs%d, %s)" % (self.batch_per_gpu, self.notes) if self.batch_per_gpu else \
            " (%s)" % self.notes
        return _fmt(self.images_per_sec) + batch


def parse_references(text: str) -> list[Reference]:
    refs = []
    for row in csv.DictReader(io.StringIO(text)):
        refs.append(Reference(
            gpu=row["gpu"], model=row["model"], mode=row["mode"], precision=row["precision"],
            batch_per_gpu=int(row["batch_per_gpu"]) if row["batch_per_gpu"] else None,
            num_gpus=int(row["num_gpus"]), images_per_sec=float(row["images_per_sec"]),
            framework=row["framework"], source=row["source"], notes=row["notes"]))
    return refs


@functools.lru_cache(maxsize=1)
def load_references() -> tuple[Reference, ...]:
    """The shipped table (package data)."""
    text = resources.files("tfbench.measure").joinpath("reference_data/published.csv").read_text()
    return tuple(parse_references(text))


def matching_references(device_name: str, model: str, mode: str, precision: str,
                        num_gpus: int, references=None) -> list[Reference]:
    """Published rows for this GPU, model family, mode, precision and GPU count.

    TensorFlow rows win; other frameworks are returned only when no TensorFlow row matches.
    """
    gpu = normalize_gpu(device_name)
    if gpu is None:
        return []
    refs = [r for r in (references if references is not None else load_references())
            if (key := normalize_gpu(r.gpu)) is not None and key.matches(gpu)
            and normalize_model(r.model) == normalize_model(model)
            and normalize_mode(r.mode) == normalize_mode(mode)
            and normalize_precision(r.precision) == normalize_precision(precision)
            and r.num_gpus == int(num_gpus or 1)]
    tf_refs = [r for r in refs if r.is_tensorflow]
    return tf_refs or refs


def _fmt(value: float) -> str:
    return "{:,.0f}".format(value)


def expected_range(device_name: Optional[str], model: str, mode: str, precision: str,
                   num_gpus: int, images_per_sec: Optional[float],
                   tolerance: float = DEFAULT_TOLERANCE,
                   references=None) -> tuple[Optional[str], str]:
    """(verdict 'within' | 'below' | 'above' | None, one line naming the band and its sources).

    (None, "") when the GPU is not in the reference table at all (including CPUs); (None, text)
    when the GPU is known but nothing matches, no throughput was measured, or it is a MIG
    slice (a fraction of a GPU, which no published figure describes).
    """
    refs_all = references if references is not None else load_references()
    gpu = normalize_gpu(device_name)
    if gpu is not None and gpu.mig is not None:
        return None, ("Expected range: none for %s, a MIG slice (published figures are whole "
                      "GPUs)" % device_name)
    if gpu is None or not any((k := normalize_gpu(r.gpu)) is not None and k.matches(gpu)
                              for r in refs_all):
        return None, ""
    what = "%s %s %s, %dx %s" % (model, normalize_mode(mode), normalize_precision(precision),
                                 int(num_gpus or 1), gpu)
    refs = matching_references(device_name, model, mode, precision, num_gpus, refs_all)
    if not refs:
        return None, "Expected range: no published figure for %s" % what
    values = [r.images_per_sec for r in refs]
    low, high = min(values) * (1 - tolerance), max(values) * (1 + tolerance)
    kind = "" if refs[0].is_tensorflow else " (%s figures: sanity bound only)" % refs[0].framework
    by_source: dict[tuple[str, str], list[str]] = {}
    for ref in refs:
        by_source.setdefault((ref.framework, ref.source), []).append(ref.label())
    sources = "; ".join("%s from %s, %s" % (", ".join(labels), source, framework)
                        for (framework, source), labels in by_source.items())
    band = "%s-%s images/sec" % (_fmt(low), _fmt(high))
    if not images_per_sec:
        return None, "Expected range for %s: %s%s [published %s]" % (what, band, kind, sources)
    verdict = "below" if images_per_sec < low else "above" if images_per_sec > high else "within"
    return verdict, "Expected range for %s: %s%s, measured %s: %s [published %s; +/-%d%%]" % (
        what, band, kind, _fmt(images_per_sec), verdict, sources, round(tolerance * 100))
