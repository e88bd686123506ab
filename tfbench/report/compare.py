"""Comparing two results files: matched configurations side by side, ratios B/A, noise verdict.

Matching: rows match on the configuration columns (MATCH_COLUMNS). A column that holds one value
in A and a different single value in B is what is being compared (e.g. device_name when A ran on
one GPU and B on another); it is left out of the match and named in the header.

Noise: each side's images/sec gets an interval, from the best evidence available:
  1. repeated rows of the configuration (two or more): [min, max] of their images/sec;
  2. one row measured with --num_runs > 1: its images_per_sec_min / images_per_sec_max;
  3. one row: the Step line's +/- (std / sqrt(n) of per-step speeds) x 2 around the figure,
     times num_workers (the Step line is per worker, the figure counts every worker).
A difference is significant when the two intervals do not overlap; with no spread on either side
the verdict is 'unknown'. The basis used is printed with each row. The figures compared beside
images/sec (RATIO_METRICS) get an interval from repeated rows only (no row keeps their spread),
for the gate.

The gate (`tfbench compare --threshold_pct=P`, gate()): a matched configuration fails when a
figure of B is worse than A's by more than P percent, "worse" in the direction the figure declares
better (Figure.better: images/sec down, latency, memory and power up), and beyond the noise: the
verdict above says the intervals do not overlap. A figure worse by more than P whose noise is
unknown (no spread on either side) is named apart and does not fail the gate.

Each row shows the keys that identify it (IDENTITY_COLUMNS, plus every other key that varies);
configurations not matched are listed with their keys and their own status in each file.

Directories: an evaluation's directory (`tfbench evaluate`, its evaluation.csv) is compared by
model, run (training or inference) and execution mode (native, mixed, mixed_xla) rather than by
precision and XLA, so one machine's fp16 mixed mode meets another's bf16 one; each
configuration's latest row counts. A sweep's directory stands for its sweep.csv.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Sequence

import pandas as pd

from tfbench import figures
from tfbench.errors import EXIT_REGRESSION, UsageError
from tfbench.report import evaluation, load, studies, tables

# The columns that identify a configuration (tfbench.figures.CONFIGURATION).
MATCH_COLUMNS = figures.CONFIGURATION
# Evaluations: the run kind (training, inference) in place of the mode, the execution mode in
# place of precision, XLA and the serving path, named as the evaluation report names them.
_EXECUTION = ("mode", "precision", "xla", "serving_path", "trt_mode")
EVALUATION_MATCH_COLUMNS = tuple(c for c in MATCH_COLUMNS if c not in _EXECUTION) + (
    "kind", "execution_mode")
# Shown for every row, whether or not they vary ("devices" = num_devices x num_workers; the split
# is shown too when a row runs on several workers).
IDENTITY_COLUMNS = ("model", "mode", "kind", "execution_mode", "precision", "xla", "batch_size",
                    "devices")
# What a directory stands for: the first of these files in it.
DIRECTORY_FILES = (evaluation.ROWS_FILE, "sweep.csv", "tfbench_results.csv")
NO_ROW = "no row"
# The figures compared beside images/sec, each in a ratio_<metric> column (titled in tables).
RATIO_METRICS = figures.shown("compare")
# What the gate holds B to: images/sec and each figure compared beside it that declares which way
# is better.
GATED = tuple(m for m in ("images_per_sec",) + tuple(RATIO_METRICS) if figures.BY_NAME[m].better)


@dataclasses.dataclass
class Comparison:
    table: pd.DataFrame                 # matched configurations
    columns: list[str]                  # columns worth showing
    unmatched: pd.DataFrame             # configurations in one file only (or failed in one)
    compared: dict[str, tuple[str, str]]  # column -> (A value, B value) left out of the match
    keys: list[str]
    unmatched_columns: list[str] = dataclasses.field(default_factory=list)


def _interval(group: pd.DataFrame) -> tuple[Optional[float], Optional[float], str]:
    values = group["images_per_sec"]
    if len(values) >= 2:
        return values.min(), values.max(), "repeats n=%d" % len(values)
    row = group.iloc[0]
    lo, hi = row.get("images_per_sec_min"), row.get("images_per_sec_max")
    if pd.notna(lo) and pd.notna(hi) and hi > lo:
        runs = row.get("num_runs")
        return lo, hi, "min/max over %s runs" % ("%d" % runs if pd.notna(runs) else "its")
    pm = row.get("step_images_per_sec_plusminus")
    if pd.notna(pm) and pm > 0:
        # The Step line's +/- is one worker's part of the run's (Figure.workers "sum": worker
        # batch / step time), images_per_sec counts every worker: a synchronous step is one step
        # time for all workers, so the run's +/- is num_workers x the row's, in the unit of
        # images_per_sec.
        workers = _workers_part(row, "step_images_per_sec_plusminus")
        v, half = row["images_per_sec"], 2 * pm * workers
        basis = "Step +/- x2" + (" x %d workers" % workers if workers > 1 else "")
        return v - half, v + half, basis
    return None, None, "no spread"


def _workers_part(row: pd.Series, name: str) -> int:
    """How many of the row's parts figure `name` of one worker is: its workers when each holds
    its own part of the run's figure (Figure.workers "sum"), else 1."""
    if figures.BY_NAME[name].workers != "sum":
        return 1
    return max(int(row.get("num_workers") or 1), 1)


def _side(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    ok = studies.ok_rows(df)
    records = []
    for key, group in ok.groupby(keys, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        lo, hi, basis = _interval(group)
        rec = dict(zip(keys, key))
        rec.update(images_per_sec=group["images_per_sec"].median(), lo=lo, hi=hi, basis=basis)
        for metric in RATIO_METRICS:   # as every report table aggregates repeated rows
            rec[metric] = group[metric].agg(figures.AGGREGATED.get(metric, "median"))
            # Its spread: repeated rows' [min, max] (basis 1 above), the only one rows keep.
            measured = group[metric].dropna()
            rec[metric + "_lo"], rec[metric + "_hi"] = (
                (measured.min(), measured.max()) if len(measured) >= 2 else (None, None))
        records.append(rec)
    return pd.DataFrame(records, columns=keys + ["images_per_sec", "lo", "hi", "basis"]
                        + [m + part for m in RATIO_METRICS for part in ("", "_lo", "_hi")])


def _bound(value):
    return None if value is None or pd.isna(value) else value


def verdict(a: float, a_lo, a_hi, b: float, b_lo, b_hi) -> str:
    """'faster' / 'slower' (B against A) when the intervals do not overlap, else 'within noise';
    'unknown' when neither side has a spread."""
    if a_lo is None and b_lo is None:
        return "unknown (no spread data)"
    a_lo, a_hi = (a, a) if a_lo is None else (a_lo, a_hi)
    b_lo, b_hi = (b, b) if b_lo is None else (b_lo, b_hi)
    if b_lo > a_hi:
        return "faster"
    if b_hi < a_lo:
        return "slower"
    return "within noise"


def _range_text(lo, hi) -> str:
    return "" if lo is None or pd.isna(lo) else "%s-%s" % ("{:,.1f}".format(lo),
                                                            "{:,.1f}".format(hi))


def compare_frames(a: pd.DataFrame, b: pd.DataFrame,
                   match_columns: Sequence[str] = MATCH_COLUMNS) -> Comparison:
    compared = {}
    a_ok, b_ok = studies.ok_rows(a), studies.ok_rows(b)
    for col in match_columns:
        va, vb = set(a_ok[col]), set(b_ok[col])
        if len(va) == 1 and len(vb) == 1 and va != vb:
            compared[col] = (str(next(iter(va))), str(next(iter(vb))))
    keys = [c for c in match_columns if c not in compared]
    sa, sb = _side(a, keys), _side(b, keys)
    merged = sa.merge(sb, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    both = merged[merged["_merge"] == "both"].copy()
    rows = []
    for _, r in both.iterrows():
        lo_a = None if pd.isna(r["lo_a"]) else r["lo_a"]
        lo_b = None if pd.isna(r["lo_b"]) else r["lo_b"]
        rec = {k: r[k] for k in keys}
        rec.update(
            a_images_per_sec=r["images_per_sec_a"], b_images_per_sec=r["images_per_sec_b"],
            ratio=r["images_per_sec_b"] / r["images_per_sec_a"],
            a_range=_range_text(lo_a, r["hi_a"]), b_range=_range_text(lo_b, r["hi_b"]),
            verdict=verdict(r["images_per_sec_a"], lo_a, r["hi_a"], r["images_per_sec_b"], lo_b,
                            r["hi_b"]),
            basis="A: %s; B: %s" % (r["basis_a"], r["basis_b"]))
        for metric in RATIO_METRICS:
            a_value, b_value = r[metric + "_a"], r[metric + "_b"]
            rec["ratio_" + metric] = b_value / a_value
            # The same verdict on the figure's own spread ('faster' = B's is above A's).
            rec["noise_" + metric] = verdict(
                a_value, _bound(r[metric + "_lo_a"]), _bound(r[metric + "_hi_a"]), b_value,
                _bound(r[metric + "_lo_b"]), _bound(r[metric + "_hi_b"])) \
                if pd.notna(a_value) and pd.notna(b_value) else ""
        rows.append(rec)
    table = pd.DataFrame(rows, columns=keys + ["a_images_per_sec", "b_images_per_sec", "ratio",
                                               "a_range", "b_range", "verdict", "basis"]
                         + ["ratio_" + m for m in RATIO_METRICS]
                         + ["noise_" + m for m in RATIO_METRICS])
    ratio_cols = [c for c in ("ratio_" + m for m in RATIO_METRICS) if table[c].notna().any()]
    table = _with_devices(table, keys)
    # The worker split is shown in both tables when any row of either file ran multi-worker.
    split = bool((a["num_workers"] > 1).any() or (b["num_workers"] > 1).any())
    columns = identity_columns(table, keys, split) + [
        "a_images_per_sec", "b_images_per_sec", "ratio", "verdict", "a_range", "b_range",
        "basis"] + ratio_cols
    matched = set(map(tuple, both[keys].astype(str).values))
    unmatched = _with_devices(_unmatched(a, b, keys, matched), keys)
    unmatched_columns = identity_columns(unmatched, keys, split) + ["a_status", "b_status"]
    return Comparison(table, columns, unmatched, compared, keys, unmatched_columns)


def _with_devices(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """`frame` with devices = num_devices x num_workers, when both are match keys (when one is
    what is compared, the header says so and a per-row total would mix A and B)."""
    if {"num_devices", "num_workers"} <= set(keys):
        frame = frame.assign(devices=load.devices(frame) if len(frame) else [])
    return frame


def identity_columns(frame: pd.DataFrame, keys: list[str], split: bool = False) -> list[str]:
    """The columns that tell a row's configuration: IDENTITY_COLUMNS (those that are match
    keys), the worker split (devices per worker, workers) when `split`, and other varying
    keys."""
    cols = []
    for col in IDENTITY_COLUMNS:
        if col == "devices" and split:
            cols += [k for k in ("num_devices", "num_workers") if k in keys]
        if col in keys or (col == "devices" and col in frame):
            cols.append(col)
    rest = studies.varying(frame, [k for k in keys if k not in cols], ()) if len(frame) else []
    return cols + rest


def _statuses(df: pd.DataFrame, keys: list[str]) -> dict[tuple, str]:
    """Configuration (as strings) -> its statuses in `df`, ', '-joined."""
    out: dict[tuple, list[str]] = {}
    for ident, status in zip(map(tuple, df[keys].astype(str).values), df["status"]):
        if status not in out.setdefault(ident, []):
            out[ident].append(status)
    return {ident: ", ".join(sorted(found)) for ident, found in out.items()}


def _unmatched(a: pd.DataFrame, b: pd.DataFrame, keys: list[str],
               matched: set[tuple]) -> pd.DataFrame:
    """Every configuration of either file that is not in the matched table (ok in one file
    only, or in neither), in order of appearance (A, then B), with its own status in each
    file (NO_ROW where that file has none)."""
    a_status, b_status = _statuses(a, keys), _statuses(b, keys)
    rows, seen = [], set()
    for df in (a, b):
        for i, ident in enumerate(map(tuple, df[keys].astype(str).values)):
            if ident in matched or ident in seen:
                continue
            seen.add(ident)
            rows.append({**{k: df[k].iloc[i] for k in keys},
                         "a_status": a_status.get(ident, NO_ROW),
                         "b_status": b_status.get(ident, NO_ROW)})
    out = pd.DataFrame(rows, columns=keys + ["a_status", "b_status"])
    for col in ("batch_size", "image_size"):  # 0 = not known for a run that never started
        if col in out:
            out[col] = out[col].where(out[col] > 0)
    return out


def results_file(path: str) -> str:
    """The results CSV a path stands for: itself, or the first of DIRECTORY_FILES in a
    directory."""
    if not os.path.isdir(path):
        return path
    for name in DIRECTORY_FILES:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    raise UsageError("%s holds no results file (%s)" % (path, ", ".join(DIRECTORY_FILES)))


def _is_evaluation(path: str) -> bool:
    return os.path.basename(results_file(path)) == DIRECTORY_FILES[0]


def compare_files(a_path: str, b_path: str) -> Comparison:
    """Two results files, or directories (see the module docstring): two evaluations are matched
    by model, run and execution mode."""
    a, b = (load.read_results([results_file(p)]) for p in (a_path, b_path))
    if _is_evaluation(a_path) and _is_evaluation(b_path):
        a, b = (evaluation.latest(evaluation.with_method_columns(df), ok_only=False)
                for df in (a, b))
        comp = compare_frames(a, b, EVALUATION_MATCH_COLUMNS)
        if len(comp.table):   # the method's order: model (as in A), mode, training first
            models = list(dict.fromkeys(list(a["model"]) + list(b["model"])))
            rank = [(models.index(r["model"]), evaluation.MODES.index(r["execution_mode"]),
                     r["kind"] != "training") for _, r in comp.table.iterrows()]
            order = sorted(range(len(rank)), key=rank.__getitem__)
            comp.table = comp.table.iloc[order].reset_index(drop=True)
        return comp
    return compare_frames(a, b)


def render(comp: Comparison, a_path: str, b_path: str, fmt: str = "text") -> str:
    """The comparison as text (aligned), markdown or csv."""
    if fmt == "csv":
        shown = [c for c in comp.columns if c in comp.table.columns]
        return comp.table[shown].to_csv(index=False)
    writer = tables.markdown if fmt == "markdown" else tables.text
    head = ["A = %s" % a_path, "B = %s" % b_path]
    for col, (va, vb) in comp.compared.items():
        head.append("compared: %s  A: %s  B: %s" % (col, va, vb))
    parts = []
    if fmt == "markdown":
        parts.append("\n".join("- " + h for h in head) + "\n")
    else:
        parts.append("\n".join(head) + "\n")
    if comp.table.empty:
        parts.append("no matching configurations\n")
    else:
        parts.append(writer(comp.table, comp.columns))
    if not comp.unmatched.empty:
        parts.append(("\n**Not matched**\n\n" if fmt == "markdown" else "\nnot matched:\n")
                     + writer(comp.unmatched, comp.unmatched_columns))
    parts.append("\nverdict: faster/slower when the spreads of A and B do not overlap; "
                 "spread from repeats, else min/max over --num_runs, else the Step line's "
                 "+/- x2 (per worker, so times the workers)\n")
    return "\n".join(parts)


# --- the gate --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Worse:
    """A figure of B worse than A's by more than the gate's threshold."""
    figure: str
    pct: float      # how much worse, % of A's value
    ratio: float    # B/A
    noise: str      # the noise verdict: 'faster'/'slower' beyond the noise, else not


def worse_pct(figure: str, ratio: float) -> float:
    """How much worse B is than A, % of A, by the direction the figure declares better
    (negative: B is better)."""
    return (1.0 - ratio) * 100.0 if figures.BY_NAME[figure].better == "higher" \
        else (ratio - 1.0) * 100.0


@dataclasses.dataclass(frozen=True)
class Gate:
    """The gate's verdict: each configuration (as configuration() names it) with the figures
    worse beyond the threshold and the noise (failed), and those worse beyond the threshold
    whose noise is unknown (unjudged), out of `matched`."""
    threshold_pct: float
    matched: int
    failed: list[tuple[str, list[Worse]]]
    unjudged: list[tuple[str, list[Worse]]]

    def lines(self) -> list[str]:
        """One line per failed configuration, one per unjudged one, then the verdict."""
        def figures_text(found: list[Worse]) -> str:
            return ", ".join("%s %.1f%% worse (B/A %.3f)" % (w.figure, w.pct, w.ratio)
                             for w in found)
        out = ["regression: %s: %s, beyond %g%% and the noise" % (
            name, figures_text(found), self.threshold_pct) for name, found in self.failed]
        out += ["not judged: %s: %s, but neither file has a spread of it to tell it from "
                "noise" % (name, figures_text(found)) for name, found in self.unjudged]
        if self.failed:
            out.append("gate: %d of %d matched configurations worse than A by more than %g%% "
                       "and the noise (exit %d)" % (len(self.failed), self.matched,
                                                    self.threshold_pct, EXIT_REGRESSION))
        else:
            out.append("gate: no matched configuration (of %d) worse than A by more than %g%% "
                       "and the noise" % (self.matched, self.threshold_pct))
        return out


def configuration(comp: Comparison, row: pd.Series) -> str:
    """A matched row's configuration, as its identity columns name it ('model=resnet50
    mode=training batch_size=64 devices=1')."""
    shown = comp.columns[:comp.columns.index("a_images_per_sec")]
    parts = []
    for col in shown:
        value = row.get(col)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        parts.append("%s=%s" % (col, "" if value is None or pd.isna(value) else value))
    return " ".join(parts)


def gate(comp: Comparison, threshold_pct: float) -> Gate:
    """Every matched configuration held to the threshold (see the module): a figure of GATED
    worse than A by more than `threshold_pct` and beyond the noise fails it."""
    failed, unjudged = [], []
    for _, row in comp.table.iterrows():
        beyond, unknown = [], []
        for figure in GATED:
            if figure == "images_per_sec":
                ratio, noise = row["ratio"], row["verdict"]
            else:
                ratio, noise = row["ratio_" + figure], row["noise_" + figure]
            if pd.isna(ratio) or ratio in (float("inf"), float("-inf")):
                continue
            pct = worse_pct(figure, ratio)
            if pct <= threshold_pct:
                continue
            found = Worse(figure, pct, float(ratio), noise)
            if noise in ("faster", "slower"):   # no overlap: the medians' side, so worse
                beyond.append(found)
            elif noise.startswith("unknown"):
                unknown.append(found)
        if beyond:
            failed.append((configuration(comp, row), beyond))
        if unknown:
            unjudged.append((configuration(comp, row), unknown))
    return Gate(threshold_pct, len(comp.table), failed, unjudged)
