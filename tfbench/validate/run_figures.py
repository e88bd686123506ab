"""The figures a validation judges, as one run measured them, and the configuration they
belong to: read from a results row and its JSON manifest (a child's, or a baseline file's), and
written to validate.json's "figures" list, which a later validation takes as its baseline:

    "figures": [{"figure": "images_per_sec", "values": [1553.2, 1549.0, 1560.1],
                 "unit": "images/sec", "model": "resnet50", "precision": "fp16",
                 "batch_size": 64, "num_devices": 8, "gpu": "NVIDIA H100 80GB HBM3"}, ...]

one entry per figure of FIGURES that the validation measured: `values` are its repeats (one per
training child, or a child's --num_runs repeats), `batch_size` is per device, `num_devices`
counts every worker's devices, `gpu` is the device name as NVML or TensorFlow reads it (a CPU's
name on CPU devices). figures_json() writes it.

FIGURES: images_per_sec (the run's total images/sec), efficiency_pct (--explain_scaling's
scaling efficiency: the one-device step over the run's step), allreduce_busbw_gbs (the run's
gradient all-reduce, bus bandwidth) and median_alone_ms (--validate_devices: the median over the
devices of each one's training step alone; lower is better). The first three are figures of
all the devices together; median_alone_ms is a figure of one device.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfbench.measure import expected_range as er
from tfbench.measure import scaling
# validate.json's schema, named once for its writer and its readers (the report among them).
from tfbench.report.validation import SCHEMA, SCHEMA_VERSION, VALIDATE_JSON  # noqa: F401


@dataclasses.dataclass(frozen=True)
class Figure:
    """A figure a validation judges: its unit, its direction, what a figure of it covers."""
    name: str
    unit: str
    higher_is_better: bool
    per_device: bool        # a figure of one device: compares across device counts
    below_reason: str       # the reason code of a figure worse than its baseline


FIGURES: dict[str, Figure] = {f.name: f for f in (
    Figure("images_per_sec", "images/sec", True, False, "below_baseline"),
    Figure("efficiency_pct", "%", True, False, "efficiency_low"),
    Figure("allreduce_busbw_gbs", "GB/s", True, False, "below_baseline"),
    Figure("median_alone_ms", "ms", False, True, "below_baseline"),
)}


@dataclasses.dataclass(frozen=True)
class RunKey:
    """What a baseline must share with the run it judges. batch_size None and gpu '' mean
    'not known yet' (the model's default batch, a device not read yet) and match any."""
    model: str
    precision: str
    batch_size: Optional[int]           # per device
    gpu: str                            # the device name as read ('NVIDIA H100 80GB HBM3')
    num_devices: Optional[int] = None   # every worker's devices together

    def text(self) -> str:
        """'resnet50 fp16 batch 64 on 8x H100 80GB SXM'."""
        batch = "batch %d" % self.batch_size if self.batch_size else "the model's default batch"
        devices = "%dx " % self.num_devices if self.num_devices else ""
        return "%s %s %s on %s%s" % (self.model, er.normalize_precision(self.precision), batch,
                                     devices, gpu_text(self.gpu))


def gpu_text(name: str) -> str:
    """The GPU model as the tables name it ('H100 80GB SXM'), else the name as written."""
    key = er.normalize_gpu(name)
    return str(key) if key is not None else (name or "an unknown device")


def _same_gpu(a: str, b: str) -> bool:
    if not a or not b:
        return True
    ka, kb = er.normalize_gpu(a), er.normalize_gpu(b)
    if ka is not None and kb is not None:
        return ka.matches(kb)
    return ka is None and kb is None and a.strip().lower() == b.strip().lower()


def same_configuration(a: RunKey, b: RunKey) -> bool:
    """Same model (version), precision, batch per device and GPU model; devices aside."""
    return (er.normalize_model(a.model) == er.normalize_model(b.model)
            and er.normalize_precision(a.precision) == er.normalize_precision(b.precision)
            and (a.batch_size is None or b.batch_size is None or a.batch_size == b.batch_size)
            and _same_gpu(a.gpu, b.gpu))


# --- the figures of a run --------------------------------------------------------------------

def number(value: Any) -> Optional[float]:
    """A finite number from a CSV cell or a JSON value, else None ('' , NaN, text, a flag)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def count(value: Any) -> Optional[int]:
    """A positive whole number (a batch, a device count), else None."""
    result = number(value)
    return int(result) if result is not None and result > 0 else None


def run_key(row: Mapping[str, Any]) -> RunKey:
    """A results row's configuration (devices: num_devices x num_workers)."""
    devices, workers = count(row.get("num_devices")) or 1, count(row.get("num_workers")) or 1
    return RunKey(str(row.get("model") or ""), str(row.get("precision") or "fp32"),
                  count(row.get("batch_size")), str(row.get("device_name") or ""),
                  devices * workers)


def run_figures(row: Mapping[str, Any], manifest: Optional[Mapping[str, Any]] = None
                ) -> dict[str, list[float]]:
    """FIGURES as one run measured them, from its results row and, when there is one, its JSON
    manifest (the repeats of --num_runs, --explain_scaling's and --validate_devices' entries).
    A figure the run did not measure is absent."""
    extra = (manifest or {}).get("extra") or {}
    out: dict[str, list[float]] = {}
    ips = number(row.get("images_per_sec"))
    runs = [v for v in map(number, extra.get("images_per_sec_runs") or []) if v is not None]
    if runs or ips:
        out["images_per_sec"] = runs or [ips]
    efficiency = number((extra.get("scaling_explained") or {}).get("efficiency_pct"))
    one_device, batch = number(row.get("one_device_step_ms")), number(
        row.get("global_batch_size"))
    if efficiency is None and one_device and batch and ips:
        # --explain_scaling's efficiency: the one-device step over the run's step.
        efficiency = 100.0 * one_device / scaling.step_ms(batch, ips)
    if efficiency is not None:
        out["efficiency_pct"] = [efficiency]
    busbw = number(row.get("allreduce_busbw_gbs"))
    if busbw is not None:
        out["allreduce_busbw_gbs"] = [busbw]
    alone = [v for v in (number(e.get("alone_ms")) for e in extra.get("device_checks") or []
                         if isinstance(e, Mapping)) if v is not None]
    if alone:
        out["median_alone_ms"] = [statistics.median(alone)]
    return out


def measured_figures(runs: Iterable[tuple[Mapping[str, Any], Optional[Mapping[str, Any]]]]
                     ) -> dict[str, list[float]]:
    """FIGURES over several runs (a validation's repeated training children): each figure's
    values, run after run."""
    out: dict[str, list[float]] = {}
    for row, manifest in runs:
        for name, values in run_figures(row, manifest).items():
            out.setdefault(name, []).extend(values)
    return out


def figures_json(measured: Mapping[str, Sequence[float]], run: RunKey) -> list[dict[str, Any]]:
    """validate.json's "figures": one entry per measured figure (the module's shape)."""
    return [{"figure": name, "values": [float(v) for v in measured[name]],
             "unit": FIGURES[name].unit, "model": run.model,
             "precision": er.normalize_precision(run.precision), "batch_size": run.batch_size,
             "num_devices": run.num_devices, "gpu": run.gpu}
            for name in FIGURES if measured.get(name)]
