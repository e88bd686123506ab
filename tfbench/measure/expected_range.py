"""Expected range: how a measured images/sec compares with published figures for the same GPU.

The reference table (tfbench/measure/reference_data/published.csv) holds literature values, each with its
source and framework. Published numbers differ in framework (TF1 graph code, PyTorch), data (real,
synthetic), XLA and batch size, so a run is judged against a band: the lowest to the highest
matching value, widened by a tolerance (default 10%). TensorFlow figures are preferred; when a GPU
has only other-framework figures (e.g. PyTorch DLE on H100), those are used and labelled "sanity
bound". Plain csv, no pandas: the runner imports this module.

judge() gives the figures (verdict, band, sources), which a run keeps; describe() words them in
the one line the console and the reports print; expected_range() is both at once.
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Judgement:
    """The figures of one judgement: the band a run is held against, its sources, the verdict.

    Plain data (RunResult keeps it as a dict, `Judgement(**figures)` takes it back); `describe`
    renders it as one line.
    """
    verdict: Optional[str]       # within | below | above; None when nothing was judged
    device_name: str
    gpu: str                     # the GPU as the reference table names it, e.g. A100 40GB SXM
    model: str
    mode: str                    # normalised: training | forward_only
    precision: str               # normalised: fp32 | fp16 | bf16
    num_gpus: int
    mig: bool = False            # a MIG slice: no published figure describes it
    low: Optional[float] = None  # images/sec, the published minimum less the tolerance
    high: Optional[float] = None
    tolerance: float = DEFAULT_TOLERANCE
    measured: Optional[float] = None
    sanity_framework: Optional[str] = None   # only this non-TensorFlow framework's figures
    # The published figures used: images_per_sec, batch_per_gpu, notes, framework, source.
    references: list[dict] = dataclasses.field(default_factory=list)


def judge(device_name: Optional[str], model: str, mode: str, precision: str, num_gpus: int,
          images_per_sec: Optional[float], tolerance: float = DEFAULT_TOLERANCE,
          references=None) -> Optional[Judgement]:
    """The figures of the judgement (see expected_range), or None when the GPU is not in the
    reference table at all (including CPUs)."""
    refs_all = references if references is not None else load_references()
    gpu = normalize_gpu(device_name)
    if gpu is None:
        return None
    common = dict(device_name=device_name or "", gpu=str(gpu), model=model,
                  mode=normalize_mode(mode), precision=normalize_precision(precision),
                  num_gpus=int(num_gpus or 1), tolerance=tolerance, measured=images_per_sec)
    if gpu.mig is not None:
        return Judgement(verdict=None, mig=True, **common)
    if not any((k := normalize_gpu(r.gpu)) is not None and k.matches(gpu) for r in refs_all):
        return None
    refs = matching_references(device_name, model, mode, precision, num_gpus, refs_all)
    if not refs:
        return Judgement(verdict=None, **common)
    values = [r.images_per_sec for r in refs]
    low, high = min(values) * (1 - tolerance), max(values) * (1 + tolerance)
    verdict = None
    if images_per_sec:
        verdict = "below" if images_per_sec < low else "above" if images_per_sec > high \
            else "within"
    return Judgement(
        verdict=verdict, low=low, high=high,
        sanity_framework=None if refs[0].is_tensorflow else refs[0].framework,
        references=[{"images_per_sec": r.images_per_sec, "batch_per_gpu": r.batch_per_gpu,
                     "notes": r.notes, "framework": r.framework, "source": r.source}
                    for r in refs], **common)


def _label(ref: dict) -> str:
    batch = " (bs%d, %s)" % (ref["batch_per_gpu"], ref["notes"]) if ref["batch_per_gpu"] \
        else " (%s)" % ref["notes"]
    return _fmt(ref["images_per_sec"]) + batch


def describe(j: Judgement) -> str:
    """The judgement in one line: the band, its sources and, when measured, the verdict."""
    if j.mig:
        return ("Expected range: none for %s, a MIG slice (published figures are whole GPUs)"
                % j.device_name)
    what = "%s %s %s, %dx %s" % (j.model, j.mode, j.precision, j.num_gpus, j.gpu)
    if not j.references:
        return "Expected range: no published figure for %s" % what
    kind = "" if j.sanity_framework is None else \
        " (%s figures: sanity bound only)" % j.sanity_framework
    by_source: dict[tuple[str, str], list[str]] = {}
    for ref in j.references:
        by_source.setdefault((ref["framework"], ref["source"]), []).append(_label(ref))
    sources = "; ".join("%s from %s, %s" % (", ".join(labels), source, framework)
                        for (framework, source), labels in by_source.items())
    band = "%s-%s images/sec" % (_fmt(j.low), _fmt(j.high))
    if j.verdict is None:
        return "Expected range for %s: %s%s [published %s]" % (what, band, kind, sources)
    return "Expected range for %s: %s%s, measured %s: %s [published %s; +/-%d%%]" % (
        what, band, kind, _fmt(j.measured), j.verdict, sources, round(j.tolerance * 100))


def expected_range(device_name: Optional[str], model: str, mode: str, precision: str,
                   num_gpus: int, images_per_sec: Optional[float],
                   tolerance: float = DEFAULT_TOLERANCE,
                   references=None) -> tuple[Optional[str], str]:
    """(verdict 'within' | 'below' | 'above' | None, one line naming the band and its sources).

    (None, "") when the GPU is not in the reference table at all (including CPUs); (None, text)
    when the GPU is known but nothing matches, no throughput was measured, or it is a MIG
    slice (a fraction of a GPU, which no published figure describes).
    """
    j = judge(device_name, model, mode, precision, num_gpus, images_per_sec, tolerance,
              references)
    return (None, "") if j is None else (j.verdict, describe(j))
