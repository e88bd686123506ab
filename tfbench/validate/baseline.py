"""A validation's figures against a baseline: an earlier result of the same model, precision,
batch per device and GPU model, or, without one, the published expected range.

A baseline file is one of:
- a tfbench results CSV (the project's schema: tfbench.children.rows.read_rows), its ok
  training rows;
- a run's JSON manifest (what --json_dir writes: the run's `csv_row` and its `extra`);
- a validate.json (schema "tfbench.validate", schema_version 1), its "figures" list:

      "figures": [{"figure": "images_per_sec", "values": [1553.2, 1549.0, 1560.1],
                   "unit": "images/sec", "model": "resnet50", "precision": "fp16",
                   "batch_size": 64, "num_devices": 8, "gpu": "NVIDIA H100 80GB HBM3"}, ...]

  one entry per figure of FIGURES that the validation measured: `values` are its repeats (one
  per training child, or a child's --num_runs repeats), `batch_size` is per device,
  `num_devices` counts every worker's devices, `gpu` is the device name as NVML or TensorFlow
  reads it (a CPU's name on CPU devices). figures_json() writes it.

The figures judged (FIGURES): images_per_sec (the run's total images/sec), efficiency_pct
(--explain_scaling's scaling efficiency against the one-device step), allreduce_busbw_gbs
(the gradient all-reduce's bus bandwidth) and median_alone_ms (--validate_devices: the median
device's training step alone; lower is better). The first three are figures of all the
devices together and compare only with a baseline on as many devices; median_alone_ms is a
figure of one device and compares whatever the counts.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import statistics
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfbench.children import rows as rows_lib
from tfbench.errors import UsageError
from tfbench.measure import expected_range as er
from tfbench.measure import scaling, stats
from tfbench.validate.verdicts import FAIL, PASS, SKIP, WARN, Check

DEFAULT_TOLERANCE_PCT = 5.0
SCHEMA = "tfbench.validate"
SCHEMA_VERSION = 1
VALIDATE_JSON = "validate.json"
# The columns that make a CSV file a tfbench results file (every schema version has them).
_CSV_COLUMNS = {"schema_version", "run_id", "status", "model", "images_per_sec"}


@dataclasses.dataclass(frozen=True)
class Figure:
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


@dataclasses.dataclass(frozen=True)
class BaselineRun:
    """One configuration of a baseline file: its figures' values (repeats and rows)."""
    key: RunKey
    figures: dict[str, list[float]]
    # A figure whose repeats the file itself marks unstable (a CSV row of --num_runs keeps
    # only their median, min and max): the spread, as words.
    unstable: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Baseline:
    path: str
    kind: str                           # "results CSV", "JSON manifest", "validate.json"
    runs: tuple[BaselineRun, ...]

    def select(self, run: RunKey) -> BaselineRun:
        """The configuration of the file that `run` is judged against: the same model,
        precision, batch and GPU model (on as many devices when the file has several counts,
        else its first); UsageError naming both sides when there is none."""
        same = [r for r in self.runs if same_configuration(r.key, run)]
        if not same:
            shown = "; ".join(r.key.text() for r in self.runs[:3])
            more = " (and %d other configurations)" % (len(self.runs) - 3) \
                if len(self.runs) > 3 else ""
            raise UsageError("--baseline=%s is %s%s; this validation runs %s"
                             % (self.path, shown, more, run.text()))
        return next((r for r in same if r.key.num_devices == run.num_devices), same[0])


# --- the figures of a run --------------------------------------------------------------------

def _number(value: Any) -> Optional[float]:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> Optional[int]:
    number = _number(value)
    return int(number) if number is not None and number > 0 else None


def run_key(row: Mapping[str, Any]) -> RunKey:
    """A results row's configuration (devices: num_devices x num_workers)."""
    devices, workers = _int(row.get("num_devices")) or 1, _int(row.get("num_workers")) or 1
    return RunKey(str(row.get("model") or ""), str(row.get("precision") or "fp32"),
                  _int(row.get("batch_size")), str(row.get("device_name") or ""),
                  devices * workers)


def run_figures(row: Mapping[str, Any], manifest: Optional[Mapping[str, Any]] = None
                ) -> dict[str, list[float]]:
    """FIGURES as one run measured them, from its results row and, when there is one, its JSON
    manifest (the repeats of --num_runs, --explain_scaling's and --validate_devices' entries).
    A figure the run did not measure is absent."""
    extra = (manifest or {}).get("extra") or {}
    out: dict[str, list[float]] = {}
    ips = _number(row.get("images_per_sec"))
    runs = [v for v in map(_number, extra.get("images_per_sec_runs") or []) if v is not None]
    if runs or ips:
        out["images_per_sec"] = runs or [ips]
    efficiency = _number((extra.get("scaling_explained") or {}).get("efficiency_pct"))
    one_device, batch = _number(row.get("one_device_step_ms")), _number(
        row.get("global_batch_size"))
    if efficiency is None and one_device and batch and ips:
        # --explain_scaling's efficiency: the one-device step over the run's step.
        efficiency = 100.0 * one_device / scaling.step_ms(batch, ips)
    if efficiency is not None:
        out["efficiency_pct"] = [efficiency]
    busbw = _number(row.get("allreduce_busbw_gbs"))
    if busbw is not None:
        out["allreduce_busbw_gbs"] = [busbw]
    alone = [v for v in (_number(e.get("alone_ms")) for e in extra.get("device_checks") or []
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


# --- reading a baseline file -----------------------------------------------------------------

def _not_a_result(path: str, why: str) -> UsageError:
    return UsageError("--baseline=%s is not a tfbench result: %s" % (path, why))


def _group(path: str, kind: str, entries: Iterable[tuple[RunKey, dict[str, list[float]],
                                                          dict[str, str]]]) -> Baseline:
    runs: dict[RunKey, BaselineRun] = {}
    for key, figures, unstable in entries:
        run = runs.setdefault(key, BaselineRun(key, {}, {}))
        for name, values in figures.items():
            run.figures.setdefault(name, []).extend(values)
        run.unstable.update(unstable)
    if not runs:
        raise _not_a_result(path, "it holds no measured training run")
    return Baseline(path, kind, tuple(runs.values()))


def _row_unstable(row: Mapping[str, Any]) -> dict[str, str]:
    """images_per_sec of a row whose own repeats (--num_runs) spread above the threshold."""
    if _int(row.get("num_runs")) and _int(row.get("num_runs")) >= 2 and \
            str(row.get("unstable")) == "1":
        return {"images_per_sec": "spread %.1f%% over %d repeats" % (
            _number(row.get("spread_pct")) or 0.0, _int(row.get("num_runs")))}
    return {}


def _usable(row: Mapping[str, Any]) -> bool:
    return row.get("status", "ok") in ("ok", "") and \
        er.normalize_mode(str(row.get("mode") or "")) == "training" and \
        bool(_number(row.get("images_per_sec")))


def _from_csv(path: str) -> Baseline:
    with open(path, newline="") as handle:
        header = next(csv.reader(handle), [])
    missing = sorted(_CSV_COLUMNS - set(header))
    if missing:
        raise _not_a_result(path, "a CSV file without tfbench's columns (%s)"
                            % ", ".join(missing))
    rows = [r for r in rows_lib.read_rows(path) if _usable(r)]
    return _group(path, "results CSV", ((run_key(r), run_figures(r), _row_unstable(r))
                                        for r in rows))


def _from_manifest(path: str, data: Mapping[str, Any]) -> Baseline:
    row = data["csv_row"]
    if not _usable(row):
        raise _not_a_result(path, "its run is not an ok training run (status %s, mode %s)"
                            % (row.get("status") or "?", row.get("mode") or "?"))
    return _group(path, "JSON manifest", [(run_key(row), run_figures(row, data), {})])


def _from_validate_json(path: str, data: Mapping[str, Any]) -> Baseline:
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise _not_a_result(path, "a validate.json of schema_version %s; this tfbench reads %d"
                            % (version, SCHEMA_VERSION))
    figures = data.get("figures")
    if not isinstance(figures, list):
        raise _not_a_result(path, "a validate.json without its \"figures\" list")
    entries = []
    for i, entry in enumerate(figures):
        lacking = [k for k in ("figure", "values", "model", "precision", "batch_size",
                               "num_devices", "gpu") if not isinstance(entry, dict)
                   or k not in entry]
        if lacking:
            raise _not_a_result(path, "figures[%d] lacks %s" % (i, ", ".join(lacking)))
        if entry["figure"] not in FIGURES:
            continue    # a figure a later tfbench measures
        values = [_number(v) for v in entry["values"]] if isinstance(entry["values"], list) \
            else [None]
        if not values or None in values:
            raise _not_a_result(path, "figures[%d] (%s): values are not a list of numbers"
                                % (i, entry["figure"]))
        key = RunKey(str(entry["model"]), str(entry["precision"]), _int(entry["batch_size"]),
                     str(entry["gpu"] or ""), _int(entry["num_devices"]))
        entries.append((key, {entry["figure"]: values}, {}))
    return _group(path, VALIDATE_JSON, entries)


def load_baseline(path: str) -> Baseline:
    """The baseline in `path` (a results CSV, a JSON manifest, a validate.json or a directory
    holding one); UsageError in one line when it is missing or none of these."""
    file = os.path.join(path, VALIDATE_JSON) if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise UsageError("--baseline=%s: no such file%s" % (
            path, " (the directory holds no %s)" % VALIDATE_JSON if os.path.isdir(path) else ""))
    try:
        with open(file, encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        raise _not_a_result(path, "not a text file") from None
    except OSError as exc:
        raise UsageError("--baseline=%s: cannot read it (%s)" % (path, exc.strerror)) from None
    if not text.lstrip().startswith(("{", "[")):
        return _from_csv(file)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _not_a_result(path, "invalid JSON (line %d)" % getattr(exc, "lineno", 0)) \
            from None
    if isinstance(data, dict) and data.get("schema") == SCHEMA:
        return _from_validate_json(path, data)
    if isinstance(data, dict) and isinstance(data.get("csv_row"), dict) and \
            _CSV_COLUMNS <= set(data["csv_row"]):
        return _from_manifest(path, data)
    raise _not_a_result(path, "a JSON file that is neither a validate.json nor a run's JSON "
                              "manifest")


# --- judging ---------------------------------------------------------------------------------

def _fmt(value: float) -> str:
    return "%.0f" % value if abs(value) >= 1000 else "%.4g" % value


def _with_unit(value: float, unit: str) -> str:
    return _fmt(value) + ("%" if unit == "%" else " " + unit)


def _of(values: Sequence[float]) -> str:
    return "median of %d" % len(values) if len(values) > 1 else "one run"


def _spread(values: Sequence[float], threshold_pct: float) -> Optional[str]:
    """The spread of repeats the project's stability rule finds unstable (as words), else
    None (one value is never unstable)."""
    if len(values) < 2:
        return None
    s = stats.repeat_summary(values, threshold_pct)
    return "spread %.1f%% over %d repeats" % (s["spread_pct"], s["num_runs"]) \
        if s["unstable"] else None


def _skip(host: str, name: str, values: Sequence[float], expectation: str) -> Check:
    figure = FIGURES[name]
    median = statistics.median(values)
    return Check(host, "host", name, SKIP, "no_expectation",
                 "%s (%s)" % (_with_unit(median, figure.unit), _of(values)), expectation,
                 value=median)


def _against_baseline(host: str, figure: Figure, values: Sequence[float], base: BaselineRun,
                      run: RunKey, label: str, tolerance_pct: float, threshold_pct: float,
                      detail: str) -> Check:
    reference = base.figures.get(figure.name)
    if not reference:
        return _skip(host, figure.name, values, "%s holds no %s" % (label, figure.name))
    if not figure.per_device and base.key.num_devices and run.num_devices and \
            base.key.num_devices != run.num_devices:
        return _skip(host, figure.name, values,
                     "%s ran on %d devices, this run on %d: a figure of all the devices "
                     "compares only at the same count" % (label, base.key.num_devices,
                                                          run.num_devices))
    ref, median = statistics.median(reference), statistics.median(values)
    share = (100.0 - tolerance_pct) / 100.0
    if figure.higher_is_better:
        limit = ref * share
        ok, all_worse = median >= limit, max(values) < limit
        expectation = ">= %s (%g%% of %s in %s)" % (_fmt(limit), 100 - tolerance_pct,
                                                    _fmt(ref), label)
    else:   # a time: the same share of the baseline's rate, 1/time
        limit = ref / share
        ok, all_worse = median <= limit, min(values) > limit
        expectation = "<= %s (%s in %s / %g%%)" % (_fmt(limit), _fmt(ref), label,
                                                  100 - tolerance_pct)
    off = (median - ref) / ref * 100.0
    words = ("above", "below") if figure.higher_is_better else ("longer", "shorter")
    text = "%s (%s), %.1f%% %s%s" % (_with_unit(median, figure.unit), _of(values), abs(off),
                                     words[0] if off >= 0 else words[1], detail)
    spread = _spread(values, threshold_pct)
    base_spread = _spread(reference, threshold_pct) or base.unstable.get(figure.name)
    # Repeats that spread too far are not judged, unless every one of them misses the limit.
    if (spread or base_spread) and not all_worse:
        if spread:
            text += "; %s" % spread
        if base_spread:
            expectation += "; %s's repeats: %s" % (label, base_spread)
        return Check(host, "host", figure.name, WARN, "unstable", text,
                     expectation + " (repeats within %g%% to judge)" % threshold_pct,
                     value=median, expected=limit)
    status, reason = (PASS, "ok") if ok else (FAIL, figure.below_reason)
    return Check(host, "host", figure.name, status, reason, text, expectation, value=median,
                 expected=limit)


def _against_published(host: str, values: Sequence[float], run: RunKey, tolerance_pct: float,
                       threshold_pct: float) -> Check:
    median = statistics.median(values)
    j = er.judge(run.gpu, run.model, "training", run.precision, run.num_devices or 1, median,
                 tolerance=tolerance_pct / 100.0, batch_per_gpu=run.batch_size)
    if j is None or j.verdict is None:
        why = er.describe(j) if j is not None else \
            "no baseline given, and no published figure for %s" % gpu_text(run.gpu)
        return _skip(host, "images_per_sec", values, why)
    published = min(r["images_per_sec"] for r in j.references)
    text = "%s (%s)" % (_with_unit(median, "images/sec"), _of(values))
    expectation = ">= %s (%g%% of the published %s: %s)" % (
        _fmt(j.low), 100 - tolerance_pct, _fmt(published), er.reference_used(j))
    spread = _spread(values, threshold_pct)
    if spread and max(values) >= j.low:
        return Check(host, "host", "images_per_sec", WARN, "unstable", text + "; " + spread,
                     expectation + " (repeats within %g%% to judge)" % threshold_pct,
                     value=median, expected=j.low)
    status, reason = (FAIL, "below_expected_range") if j.verdict == "below" else (PASS, "ok")
    return Check(host, "host", "images_per_sec", status, reason, text, expectation,
                 value=median, expected=j.low)


def judge(measured: Mapping[str, Sequence[float]], baseline: Optional[Baseline],
          tolerance_pct: float = DEFAULT_TOLERANCE_PCT, *, run: RunKey, host: str,
          unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT,
          details: Optional[Mapping[str, str]] = None) -> list[Check]:
    """One row per measured figure of FIGURES (`measured`: its repeats) against `baseline`:
    PASS at a median >= (100 - tolerance_pct)% of the baseline's median (a time: <= the
    baseline's / that share); WARN `unstable` when this run's or the baseline's repeats spread
    above the stability rule's threshold (tfbench.measure.stats.repeat_summary, as every
    table applies it), unless every repeat misses the limit; else FAIL (below_baseline,
    efficiency_low). Without a baseline: images/sec against the published expected range
    (below_expected_range), SKIP `no_expectation` where none matches. A baseline of another
    configuration than `run` (found only now, when the run's batch was not known before):
    SKIP rows that say so. `details` adds words to a figure's text (the efficiency's split)."""
    details = details or {}
    measured = {name: [float(v) for v in values if _number(v) is not None]
                for name, values in measured.items() if name in FIGURES}
    measured = {name: values for name, values in measured.items() if values}
    if baseline is None:
        return [_against_published(host, measured["images_per_sec"], run, tolerance_pct,
                                   unstable_threshold_pct)] if "images_per_sec" in measured \
            else []
    label = baseline.path
    try:
        base = baseline.select(run)
    except UsageError as exc:
        return [_skip(host, name, measured[name], str(exc)) for name in FIGURES
                if name in measured]
    return [_against_baseline(host, FIGURES[name], measured[name], base, run, label,
                              tolerance_pct, unstable_threshold_pct,
                              details.get(name, ""))
            for name in FIGURES if name in measured]
