"""Expected range: how a measured images/sec compares with published figures for the same GPU.

The reference table (tfbench/measure/reference_data/published.csv) holds literature values, each with its
source and framework. A run is compared like with like: the same GPU, model version (tfbench's and
tf_cnn_benchmarks' resnet50 is ResNet-50 v1; NVIDIA's published TensorFlow figures are v1.5,
`--model=resnet50_v1.5`, about 5% slower by NVIDIA's account), mode, precision, GPU count and
batch per GPU. Published numbers still differ in framework (TF1 graph code, PyTorch), data (real,
synthetic) and XLA, so a run is judged against a band: the lowest to the highest matching value,
widened by a tolerance (default 10%). TensorFlow figures are preferred; when a GPU has only
other-framework figures (e.g. PyTorch DLE on H100), those are used and labelled "sanity bound".
Where nothing matches, the line says what was published instead (another batch, the other
ResNet-50). Plain csv, no pandas: the runner imports this module.

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
    """One key per network: spellings of a name agree ("ResNet50", "resnet-50_v1"), versions do
    not. ResNet-50 v1 (stride 2 in a downsampling block's first 1x1 convolution) and v1.5
    (stride 2 in its 3x3 convolution: more FLOPs, and NVIDIA's DeepLearningExamples README puts
    it at about 5% fewer images/sec) are different networks."""
    key = re.sub(r"[_\-\s]", "", (name or "").lower())
    key = key.replace("official", "")
    if key in ("resnet50v1.5", "resnet50v15"):
        return "resnet50_v1.5"
    if key in ("resnet50", "resnet50v1"):
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
                        num_gpus: int, references=None,
                        batch_per_gpu: Optional[int] = None) -> list[Reference]:
    """Published rows for this GPU, model version, mode, precision, GPU count and, when given,
    batch per GPU (a row that does not record its batch never matches one).

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
            and r.num_gpus == int(num_gpus or 1)
            and (batch_per_gpu is None or r.batch_per_gpu == int(batch_per_gpu))]
    tf_refs = [r for r in refs if r.is_tensorflow]
    return tf_refs or refs


def batch_value(value) -> Optional[int]:
    """A batch per GPU from a CSV cell or a run: None when missing, empty, NaN or 0."""
    try:
        batch = int(value)
    except (TypeError, ValueError):
        return None
    return batch if batch > 0 else None


def _other_versions(model: str) -> list[str]:
    """The model keys whose figures are published for another version of the same network."""
    key = normalize_model(model)
    family = {"resnet50", "resnet50_v1.5"}
    return sorted(family - {key}) if key in family else []


def published_instead(device_name: str, model: str, mode: str, precision: str, num_gpus: int,
                      batch_per_gpu: Optional[int], references=None) -> list[str]:
    """What is published for this GPU, mode, precision and GPU count when nothing matches the
    run: the batches of this model, then the other version's ("resnet50_v1.5 at batch 256")."""
    out = []
    for name in [model] + _other_versions(model):
        refs = matching_references(device_name, name, mode, precision, num_gpus, references)
        batches = sorted({r.batch_per_gpu for r in refs if r.batch_per_gpu})
        if name != model:
            out += ["%s at batch %s" % (normalize_model(name), ", ".join(map(str, batches)))
                    if batches else normalize_model(name)] if refs else []
        elif batches and batch_per_gpu:
            out.append("batch %s" % ", ".join(map(str, batches)))
    return out


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
    batch_per_gpu: Optional[int] = None      # the run's; None: any published batch
    # The published figures used: images_per_sec, batch_per_gpu, notes, framework, source,
    # model (the published model's name).
    references: list[dict] = dataclasses.field(default_factory=list)
    # Nothing matched: what is published instead ("batch 256", "resnet50_v1.5 at batch 256").
    published_instead: list[str] = dataclasses.field(default_factory=list)


def judge(device_name: Optional[str], model: str, mode: str, precision: str, num_gpus: int,
          images_per_sec: Optional[float], tolerance: float = DEFAULT_TOLERANCE,
          references=None, batch_per_gpu: Optional[int] = None) -> Optional[Judgement]:
    """The figures of the judgement (see expected_range), or None when the GPU is not in the
    reference table at all (including CPUs)."""
    refs_all = references if references is not None else load_references()
    gpu = normalize_gpu(device_name)
    if gpu is None:
        return None
    batch = batch_value(batch_per_gpu)
    common = dict(device_name=device_name or "", gpu=str(gpu), model=model,
                  mode=normalize_mode(mode), precision=normalize_precision(precision),
                  num_gpus=int(num_gpus or 1), tolerance=tolerance, measured=images_per_sec,
                  batch_per_gpu=batch)
    if gpu.mig is not None:
        return Judgement(verdict=None, mig=True, **common)
    if not any((k := normalize_gpu(r.gpu)) is not None and k.matches(gpu) for r in refs_all):
        return None
    refs = matching_references(device_name, model, mode, precision, num_gpus, refs_all, batch)
    if not refs:
        return Judgement(verdict=None, published_instead=published_instead(
            device_name, model, mode, precision, num_gpus, batch, refs_all), **common)
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
                     "notes": r.notes, "framework": r.framework, "source": r.source,
                     "model": r.model}
                    for r in refs], **common)


def _label(ref: dict) -> str:
    batch = " (bs%d, %s)" % (ref["batch_per_gpu"], ref["notes"]) if ref["batch_per_gpu"] \
        else " (%s)" % ref["notes"]
    return _fmt(ref["images_per_sec"]) + batch


def _what(j: Judgement) -> str:
    return "%s %s %s, %dx %s%s" % (j.model, j.mode, j.precision, j.num_gpus, j.gpu,
                                   ", batch %d per GPU" % j.batch_per_gpu
                                   if j.batch_per_gpu else "")


def describe(j: Judgement) -> str:
    """The judgement in one line: the band, its sources and, when measured, the verdict."""
    if j.mig:
        return ("Expected range: none for %s, a MIG slice (published figures are whole GPUs)"
                % j.device_name)
    what = _what(j)
    if not j.references:
        instead = " (published: %s)" % "; ".join(j.published_instead) \
            if j.published_instead else ""
        return "Expected range: no published figure for %s%s" % (what, instead)
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


def reference_used(j: Judgement) -> str:
    """The published figures a verdict used, for a CSV row: each source with the model, batch
    and images/sec it published ('' when none was used)."""
    by_source: dict[str, list[str]] = {}
    for ref in j.references:
        by_source.setdefault("%s (%s)" % (ref["source"], ref["framework"]), []).append(
            "%s%s %s images/sec" % (ref.get("model") or j.model,
                                    " bs%d" % ref["batch_per_gpu"] if ref["batch_per_gpu"]
                                    else "", _fmt(ref["images_per_sec"])))
    return "; ".join("%s: %s" % (source, ", ".join(figures))
                     for source, figures in by_source.items())


def expected_range(device_name: Optional[str], model: str, mode: str, precision: str,
                   num_gpus: int, images_per_sec: Optional[float],
                   tolerance: float = DEFAULT_TOLERANCE, references=None,
                   batch_per_gpu: Optional[int] = None) -> tuple[Optional[str], str]:
    """(verdict 'within' | 'below' | 'above' | None, one line naming the band and its sources).

    (None, "") when the GPU is not in the reference table at all (including CPUs); (None, text)
    when the GPU is known but nothing matches (the text says what is published instead), no
    throughput was measured, or it is a MIG slice (a fraction of a GPU, which no published
    figure describes).
    """
    j = judge(device_name, model, mode, precision, num_gpus, images_per_sec, tolerance,
              references, batch_per_gpu)
    return (None, "") if j is None else (j.verdict, describe(j))
