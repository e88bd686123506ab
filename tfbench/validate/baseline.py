"""A validation's figures against a baseline: an earlier result of the same model, precision,
batch per device and GPU model (without one, tfbench.validate.figures.published judges them
against the published expected range).

A baseline file is a tfbench results CSV (its ok training rows, tfbench.children.rows.read_rows),
a run's JSON manifest (what --json_dir writes: the run's `csv_row` and its `extra`), or a
validate.json (schema "tfbench.validate", schema_version 1: its "figures" list, whose shape
tfbench.validate.run_figures gives). The figures judged are run_figures.FIGURES; those of all
the devices together (images/sec, efficiency, busbw) compare only with a baseline on as many
devices, the median device's step alone with any.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import statistics
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfbench.children import rows as rows_lib
from tfbench.errors import UsageError
from tfbench.measure import expected_range as er
from tfbench.measure import stats
from tfbench.validate.run_figures import (FIGURES, SCHEMA, SCHEMA_VERSION, VALIDATE_JSON,
                                          Figure, RunKey, count, number, run_figures,
                                          run_key, same_configuration)
from tfbench.validate.verdicts import FAIL, PASS, SKIP, WARN, Check

DEFAULT_TOLERANCE_PCT = 5.0
# The columns that make a CSV file a tfbench results file (every schema version has them).
_CSV_COLUMNS = {"schema_version", "run_id", "status", "model", "images_per_sec"}


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
    """A baseline file: each configuration it holds."""
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
    if count(row.get("num_runs")) and count(row.get("num_runs")) >= 2 and \
            str(row.get("unstable")) == "1":
        return {"images_per_sec": "spread %.1f%% over %d repeats" % (
            number(row.get("spread_pct")) or 0.0, count(row.get("num_runs")))}
    return {}


def _usable(row: Mapping[str, Any]) -> bool:
    return row.get("status", "ok") in ("ok", "") and \
        er.normalize_mode(str(row.get("mode") or "")) == "training" and \
        bool(number(row.get("images_per_sec")))


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
        values = [number(v) for v in entry["values"]] if isinstance(entry["values"], list) \
            else [None]
        if not values or None in values:
            raise _not_a_result(path, "figures[%d] (%s): values are not a list of numbers"
                                % (i, entry["figure"]))
        key = RunKey(str(entry["model"]), str(entry["precision"]), count(entry["batch_size"]),
                     str(entry["gpu"] or ""), count(entry["num_devices"]))
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


def judge(measured: Mapping[str, Sequence[float]], baseline: Baseline,
          tolerance_pct: float = DEFAULT_TOLERANCE_PCT, *, run: RunKey, host: str,
          unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT,
          details: Optional[Mapping[str, str]] = None) -> list[Check]:
    """One row per measured figure of FIGURES (`measured`: its repeats) against `baseline`:
    PASS at a median >= (100 - tolerance_pct)% of the baseline's median (a time: <= the
    baseline's / that share); WARN `unstable` when this run's or the baseline's repeats spread
    above the stability rule's threshold (tfbench.measure.stats.repeat_summary, as every
    table applies it), unless every repeat misses the limit; else FAIL (below_baseline,
    efficiency_low). A baseline of another
    configuration than `run` (found only now, when the run's batch was not known before):
    SKIP rows that say so. `details` adds words to a figure's text (the efficiency's split)."""
    details = details or {}
    measured = {name: [float(v) for v in values if number(v) is not None]
                for name, values in measured.items() if name in FIGURES}
    measured = {name: values for name, values in measured.items() if values}
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
