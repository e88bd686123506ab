"""The history's series: one configuration on one machine, one figure, in time order; their
change points with the environment facts that changed across each; the fleet.

A series' configuration is the figure table's CONFIGURATION (what ran, on which device model and
count); its machine is the host (the hosts, for a multi-host run). Failed results are counted
but hold no value. Pure pandas over the store's `results` frame: no TensorFlow, no SQL.
"""

from __future__ import annotations

import fnmatch
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from tfbench import figures
from tfbench.errors import UsageError
from tfbench.history import changes as cp

SPARK = "▁▂▃▄▅▆▇█"
# What a series is called, from its configuration (in this order, where set).
NAME_PARTS = ("model", "mode", "precision", "batch_size", "image_size", "xla", "variable_update",
              "data_source", "serving_path", "trt_mode", "num_workers", "accum_steps")


def numeric_figures() -> list[str]:
    """The figures a series can follow: every numeric one the store keeps."""
    return [f.name for f in figures.FIGURES if f.type in ("float", "int") and f.role == "measure"]


def check_figure(name: str) -> figures.Figure:
    if name not in numeric_figures():
        close = fnmatch.filter(numeric_figures(), "*%s*" % name)[:5]
        raise UsageError("--figure=%s is not a numeric figure of the history%s (docs/csv.md "
                         "lists them)" % (name, "; did you mean %s?" % ", ".join(close)
                                          if close else ""))
    return figures.BY_NAME[name]


def _date(value: Optional[str], what: str) -> Optional[pd.Timestamp]:
    if not value:
        return None
    text = value.strip().lower()
    if text[:-1].isdigit() and text[-1:] in ("d", "h"):
        amount = int(text[:-1])
        delta = pd.Timedelta(days=amount) if text.endswith("d") else pd.Timedelta(hours=amount)
        return pd.Timestamp.now(tz="UTC") - delta
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise UsageError("%s=%s is not a date (YYYY-MM-DD, an ISO time, or 7d / 24h ago)"
                         % (what, value)) from None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def filtered(frame: pd.DataFrame, model: Optional[str] = None, host: Optional[str] = None,
             gpu: Optional[str] = None, after: Optional[str] = None,
             before: Optional[str] = None) -> pd.DataFrame:
    """The results that pass the filters (fnmatch patterns; dates as --after/--before)."""
    out = frame.copy()
    out["when"] = pd.to_datetime(out["timestamp"], utc=True, errors="coerce", format="ISO8601")
    keep = pd.Series(True, index=out.index)

    def match(column: pd.Series, pattern: str) -> pd.Series:
        # Each distinct value once: a store holds 100,000 results of a few hundred machines.
        codes, distinct = pd.factorize(column.fillna("").astype(str))
        hits = np.array([any(fnmatch.fnmatch(part.lower(), pattern.lower())
                             for part in v.split(",")) for v in distinct], dtype=bool)
        return pd.Series(hits[codes], index=column.index)
    if model:
        keep &= match(out["model"], model)
    if host:
        keep &= match(out["machine"], host)
    if gpu:
        keep &= match(out["gpu_model"].fillna(out["device_name"]), gpu)
    start, end = _date(after, "--after"), _date(before, "--before")
    if start is not None:
        keep &= out["when"] >= start
    if end is not None:
        keep &= out["when"] < end
    return out[keep]


# What the views read of each result besides the figure they follow: a few dozen of the
# store's 150-odd columns (reading every figure of 100,000 results takes seconds).
SPREAD_INPUTS = ("num_runs", "spread_pct", "jitter", "step_images_per_sec")
READ_COLUMNS = tuple(dict.fromkeys(
    ("id", "run_id", "timestamp", "status", "series_key", "config_key", "machine", "gpu_model",
     "gpu_count", "gpu_uuids", "hostname", "device_name", "device_kind", "num_devices")
    + NAME_PARTS + SPREAD_INPUTS))


def columns_for(figure: str) -> list[str]:
    """The `results` columns the views read to follow `figure`."""
    return list(dict.fromkeys(READ_COLUMNS + (figure,)))


# What describe reads of a series' last result: the listing reads them for those results alone
# (build's `details`), and of every result only what the table and the filters need.
NAME_COLUMNS = ("id",) + NAME_PARTS + ("num_devices", "gpu_model", "device_name", "device_kind",
                                       "machine", "hostname")
LIST_COLUMNS = ("id", "timestamp", "status", "series_key") + SPREAD_INPUTS


def list_columns(figure: str, model: Optional[str] = None, host: Optional[str] = None,
                 gpu: Optional[str] = None) -> list[str]:
    """The `results` columns the listing reads of every result, with those of the filters
    given (as `filtered` reads them)."""
    wanted = LIST_COLUMNS + (figure,) + (("model",) if model else ()) \
        + (("machine",) if host else ()) + (("gpu_model", "device_name") if gpu else ())
    return list(dict.fromkeys(wanted))


def spreads(frame: pd.DataFrame, figure: str) -> list[Optional[float]]:
    """spread_of for each result of `frame` (a series' runs), reading only its inputs."""
    return spreads_of(spread_inputs(frame), figure)


def spread_inputs(frame: pd.DataFrame) -> np.ndarray:
    """The SPREAD_INPUTS of each result of `frame` as numbers (NaN where empty or not one), a
    column each: all spread_of reads of a result."""
    if not len(frame):
        return np.empty((0, len(SPREAD_INPUTS)))
    return np.column_stack([pd.to_numeric(frame[c], errors="coerce").to_numpy(
        dtype=float, na_value=np.nan) for c in SPREAD_INPUTS])


def spreads_of(inputs: np.ndarray, figure: str) -> list[Optional[float]]:
    """spread_of for each row of `inputs` (spread_inputs)."""
    if figure != "images_per_sec":
        return [None] * len(inputs)
    return [spread_of(dict(zip(SPREAD_INPUTS, r)), figure) for r in inputs.tolist()]


def spread_of(row: Mapping[str, Any], figure: str) -> Optional[float]:
    """A result's own noise as a fraction (coefficient of variation), where it is known: for
    images/sec, its repeats' spread ((max - min) / median, about 2 standard deviations for a
    few repeats, so halved) or its Step lines' jitter (1.4826 x MAD of per-step speeds, a
    standard deviation) over their mean."""
    if figure != "images_per_sec":
        return None
    runs = _num(row.get("num_runs"))
    spread = _num(row.get("spread_pct"))
    if runs and runs > 1 and spread is not None:
        return spread / 100.0 / 2.0
    jitter, step = _num(row.get("jitter")), _num(row.get("step_images_per_sec"))
    if jitter is not None and step:
        return jitter / step
    return None


def _num(value: Any) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def describe(row: Mapping[str, Any]) -> str:
    """'resnet50 training fp16 bs64 224px xla ... on 8 x H100 @ gpu-node-1'."""
    parts = []
    for name in NAME_PARTS:
        value = row.get(name)
        if value in (None, "") or (isinstance(value, float) and math.isnan(value)):
            continue
        if name == "batch_size":
            parts.append("bs%d" % int(value))
        elif name == "image_size":
            parts.append("%dpx" % int(value))
        elif name == "xla":
            if int(value):
                parts.append("xla")
        elif name in ("num_workers", "accum_steps"):
            if int(value) > 1:
                parts.append("%s=%d" % (name, int(value)))
        else:
            parts.append(str(value))
    count = int(_num(row.get("num_devices")) or 1)
    device = _text(row, "gpu_model") or _text(row, "device_name") or _text(row, "device_kind") \
        or "?"
    return "%s on %s%s @ %s" % (" ".join(parts), "%d x " % count if count > 1 else "", device,
                                _text(row, "machine") or _text(row, "hostname") or "?")


def _text(row: Mapping[str, Any], name: str) -> Any:
    """A text cell, None where empty: pandas leaves an empty one of a text column NaN (a float,
    and true), where the column has text in other rows."""
    value = row.get(name)
    return None if isinstance(value, float) and math.isnan(value) else value


class _Grouped:
    """The results of one build, grouped by series (each series' results together, oldest
    first), with the arrays its series read: shared, so that a series of 100 results costs no
    frame of its own until one is asked for (1,000 series are listed in well under a second)."""

    def __init__(self, frame: pd.DataFrame, figure: str) -> None:
        self.frame = frame
        self.value = pd.to_numeric(frame[figure], errors="coerce").to_numpy(
            dtype=float, na_value=np.nan)
        self.ran = (frame["status"] == "ok").to_numpy(dtype=bool)    # ended ok
        self.has = self.ran & ~np.isnan(self.value)                  # and has a value
        self.timestamp = frame["timestamp"].to_numpy()
        self.id = frame["id"].to_numpy()
        self._spread_inputs: Optional[np.ndarray] = None

    def spread_inputs(self) -> np.ndarray:
        if self._spread_inputs is None:
            self._spread_inputs = spread_inputs(self.frame)
        return self._spread_inputs


class Series:
    """One configuration on one machine, one figure: `rows`, every result of it, oldest first;
    `ok`, those with a value of the figure (failed results are counted, never valued)."""

    def __init__(self, key: str, name: str, figure: str, grouped: _Grouped, lo: int,
                 hi: int) -> None:
        self.key, self.name, self.figure = key, name, figure
        self._grouped, self._lo, self._hi = grouped, lo, hi
        self._has = grouped.has[lo:hi]
        self.segmentation: Optional[cp.Segmentation] = None
        self.facts: dict[str, dict[str, str]] = {}

    @functools.cached_property
    def rows(self) -> pd.DataFrame:
        return self._grouped.frame.iloc[self._lo:self._hi]

    @functools.cached_property
    def ok(self) -> pd.DataFrame:
        ok = self.rows[self._has].copy()
        ok[self.figure] = self._grouped.value[self._lo:self._hi][self._has]
        return ok

    @property
    def runs(self) -> int:
        """Every result of the series, failed ones too."""
        return self._hi - self._lo

    @property
    def timestamps(self) -> np.ndarray:
        """The results' timestamps as stored, oldest first."""
        return self._grouped.timestamp[self._lo:self._hi]

    @property
    def failed(self) -> int:
        """Results that did not end ok (counted, never valued)."""
        return int(self.runs - self._grouped.ran[self._lo:self._hi].sum())

    @functools.cached_property
    def values(self) -> list[float]:
        return self._grouped.value[self._lo:self._hi][self._has].tolist()

    @property
    def ok_ids(self) -> np.ndarray:
        """The results.id of those with a value, oldest first."""
        return self._grouped.id[self._lo:self._hi][self._has]

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """All segment() reads: the values, and each one's spread_inputs."""
        return (self._grouped.value[self._lo:self._hi][self._has],
                self._grouped.spread_inputs()[self._lo:self._hi][self._has])

    def segment(self) -> cp.Segmentation:
        if self.segmentation is None:
            values, inputs = self.inputs()
            self.segmentation = cp.find_changes(values.tolist(),
                                                spreads_of(inputs, self.figure))
        return self.segmentation

    def current(self) -> tuple[Optional[float], Optional[float]]:
        """(median of the current segment, its change in % against the segment before)."""
        values = self.values
        if not values:
            return None, None
        found = self.segment().changes
        if not found:
            return float(pd.Series(values).median()), None
        last = found[-1]
        return last.after, last.pct


def build(frame: pd.DataFrame, figure: str,
          details: Optional[Callable[[Sequence[int]], pd.DataFrame]] = None) -> list[Series]:
    """The series of `frame`'s results for `figure`, by configuration and machine: those with
    a value of it, or whose every result failed (a configuration whose runs do not measure the
    figure, e.g. latency in training, is not a series of it), by name. Each is named after its
    latest result (describe); `details(ids)`: those results (by id) with the columns describe
    reads, where `frame` lacks them."""
    # Sorted once, then each series' results put together (a stable sort keeps their order),
    # the series in the order of their first result, as the names' ties stay.
    frame = frame.sort_values(["when", "id"], kind="stable")
    codes, keys = pd.factorize(frame["series_key"])
    frame, codes = frame[codes >= 0], codes[codes >= 0]
    grouped = _Grouped(frame.iloc[np.argsort(codes, kind="stable")], figure)
    counts = np.bincount(codes, minlength=len(keys))
    ends = np.cumsum(counts)
    starts = ends - counts
    with_value = np.add.reduceat(grouped.has, starts) if len(starts) else starts
    ran = np.add.reduceat(grouped.ran, starts) if len(starts) else starts
    kept = np.flatnonzero((with_value > 0) | (ran == 0))
    last = ends[kept] - 1
    if details is None:
        named = grouped.frame.iloc[last].to_dict("records")
    else:
        ids = grouped.frame["id"].to_numpy()[last]
        by_id = {r["id"]: r for r in details(ids.tolist()).to_dict("records")}
        named = [by_id[i] for i in ids.tolist()]
    out = [Series(str(keys[i]), describe(row), figure, grouped, int(starts[i]), int(ends[i]))
           for i, row in zip(kept, named)]
    return sorted(out, key=lambda s: s.name)


def sparkline(values: Sequence[float], width: int = 24) -> str:
    """The last `width` values as block characters, lowest to highest."""
    values = list(values)[-width:]
    if not values:
        return ""
    low, high = min(values), max(values)
    if high - low <= 1e-12 * max(abs(high), 1.0):
        return SPARK[3] * len(values)
    return "".join(SPARK[min(len(SPARK) - 1, int((v - low) / (high - low) * len(SPARK)))]
                   for v in values)


# --- what changed with a change point -------------------------------------------------------
def fact_changes(before: Sequence[Mapping[str, str]],
                 after: Sequence[Mapping[str, str]]) -> list[tuple[str, str, str]]:
    """(fact, before, after) for each environment fact that differs between the runs before a
    change and the runs after it: the value most runs before had against the one most runs
    after have (a fact one side never recorded is left out: nothing is known to have changed)."""
    def usual(side: Sequence[Mapping[str, str]]) -> dict[str, str]:
        counts: dict[str, dict[str, int]] = {}
        for facts in side:
            for k, v in facts.items():
                counts.setdefault(k, {}).setdefault(v, 0)
                counts[k][v] += 1
        return {k: max(c.items(), key=lambda item: item[1])[0] for k, c in counts.items()}
    old, new = usual(before), usual(after)
    return [(k, old[k], new[k]) for k in old if k in new and old[k] != new[k]]


ATTRIBUTION_WINDOW = 5   # runs on each side of a change whose environment facts are compared


def runs_around_changes(found: Sequence[Series], window: int = ATTRIBUTION_WINDOW) -> list[str]:
    """The run ids whose environment facts the attribution of the series' changes reads."""
    ids: list[str] = []
    for s in found:
        changes = s.segment().changes
        run_ids = list(s.ok["run_id"]) if changes else []
        for c in changes:
            ids += run_ids[max(0, c.index - window):c.index + window]
    return ids


def attribution(series: Series, change: cp.Change, facts: Mapping[str, Mapping[str, str]],
                window: int = ATTRIBUTION_WINDOW) -> str:
    """'NVIDIA driver 570.86.15 -> 580.65.06; TensorFlow 2.20.0 -> 2.21.0', or 'no recorded
    environment change', comparing the `window` runs on each side of the change."""
    ids = list(series.ok["run_id"])
    before = [facts.get(r, {}) for r in ids[max(0, change.index - window):change.index]]
    after = [facts.get(r, {}) for r in ids[change.index:change.index + window]]
    found = fact_changes(before, after)
    if not found:
        return "no recorded environment change"
    return "; ".join("%s %s -> %s" % item for item in found)


def direction(figure: str, pct: float) -> str:
    """'worse', 'better' or 'changed' (a figure with no declared direction)."""
    better = figures.BY_NAME[figure].better
    if not better:
        return "changed"
    return "better" if (pct > 0) == (better == "higher") else "worse"


# --- the fleet ------------------------------------------------------------------------------
@dataclass(frozen=True)
class FleetRow:
    config: str          # the configuration (without the machine)
    gpu_model: str
    member: str          # a host, or a GPU by UUID
    latest: float
    median: float        # the fleet's: the median of every member's latest value
    members: int
    pct: float           # latest / median - 1, %
    when: str


def fleet(frame: pd.DataFrame, figure: str, by: str = "host") -> list[FleetRow]:
    """For each configuration and GPU model: every host's (by='host') or single-GPU result's
    GPU's (by='gpu', by UUID) latest value against the median of all of them."""
    ok = frame[frame["status"] == "ok"].copy()
    ok["value"] = pd.to_numeric(ok[figure], errors="coerce")
    ok = ok[ok["value"].notna()]
    if by == "gpu":
        ok = ok[ok["gpu_count"].fillna(0).astype(int) == 1]
        ok["member"] = ok["gpu_uuids"]
    else:
        ok["member"] = ok["machine"]
    ok = ok[ok["member"].fillna("") != ""]
    ok["gpu"] = ok["gpu_model"].fillna(ok["device_name"]).fillna("")
    rows = []
    for (config, gpu), group in ok.groupby(["config_key", "gpu"], sort=False):
        latest = group.sort_values(["when", "id"]).groupby("member").tail(1)
        median = float(latest["value"].median())
        name = describe(dict(latest.iloc[-1].to_dict(), machine="fleet")).rsplit(" @ ", 1)[0]
        for _, r in latest.iterrows():
            pct = (r["value"] / median - 1.0) * 100.0 if median else float("nan")
            rows.append(FleetRow(name, str(gpu), str(r["member"]), float(r["value"]), median,
                                 len(latest), pct, str(r["timestamp"])))
    return rows
