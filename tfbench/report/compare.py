"""Comparing two results files: matched configurations side by side, ratios B/A, noise verdict.

Matching: rows match on the configuration columns (MATCH_COLUMNS). A column that holds one value
in A and a different single value in B is what is being compared (e.g. device_name when A ran on
one GPU and B on another); it is left out of the match and named in the header.

Noise: each side's images/sec gets an interval, from the best evidence available:
  1. repeated rows of the configuration (two or more): [min, max] of their images/sec;
  2. one row measured with --num_runs > 1: its images_per_sec_min / images_per_sec_max;
  3. one row: the Step line's +/- (std / sqrt(n) of per-step speeds) x 2 around the figure.
A difference is significant when the two intervals do not overlap; with no spread on either side
the verdict is 'unknown'. The basis used is printed with each row.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import pandas as pd

from tfbench.report import load, studies, tables

MATCH_COLUMNS = ("model", "dataset", "mode", "precision", "xla", "batch_size", "num_devices",
                 "num_workers", "image_size", "data_source", "data_format", "accum_steps",
                 "variable_update", "device_name")
RATIO_METRICS = ("latency_ms_p50", "latency_ms_p99", "peak_mem_gb", "power_w_mean",
                 "images_per_sec_per_watt")  # each has a ratio_<metric> column title in tables


@dataclasses.dataclass
class Comparison:
    table: pd.DataFrame                 # matched configurations
    columns: list[str]                  # columns worth showing
    unmatched: pd.DataFrame             # configurations in one file only (or failed in one)
    compared: dict[str, tuple[str, str]]  # column -> (A value, B value) left out of the match
    keys: list[str]


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
        v = row["images_per_sec"]
        return v - 2 * pm, v + 2 * pm, "Step +/- x2"
    return None, None, "no spread"


def _side(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    ok = studies.ok_rows(df)
    records = []
    for key, group in ok.groupby(keys, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        lo, hi, basis = _interval(group)
        rec = dict(zip(keys, key))
        rec.update(images_per_sec=group["images_per_sec"].median(), lo=lo, hi=hi, basis=basis)
        for metric in RATIO_METRICS:
            rec[metric] = group[metric].median()
        records.append(rec)
    return pd.DataFrame(records, columns=keys + ["images_per_sec", "lo", "hi", "basis"]
                        + list(RATIO_METRICS))


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


def compare_frames(a: pd.DataFrame, b: pd.DataFrame) -> Comparison:
    compared = {}
    a_ok, b_ok = studies.ok_rows(a), studies.ok_rows(b)
    for col in MATCH_COLUMNS:
        va, vb = set(a_ok[col]), set(b_ok[col])
        if len(va) == 1 and len(vb) == 1 and va != vb:
            compared[col] = (str(next(iter(va))), str(next(iter(vb))))
    keys = [c for c in MATCH_COLUMNS if c not in compared]
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
            rec["ratio_" + metric] = r[metric + "_b"] / r[metric + "_a"]
        rows.append(rec)
    table = pd.DataFrame(rows, columns=keys + ["a_images_per_sec", "b_images_per_sec", "ratio",
                                               "a_range", "b_range", "verdict", "basis"]
                         + ["ratio_" + m for m in RATIO_METRICS])
    ratio_cols = [c for c in ("ratio_" + m for m in RATIO_METRICS) if table[c].notna().any()]
    shown = studies.varying(table, keys, ("model",)) if len(table) else ["model"]
    columns = shown + ["a_images_per_sec", "b_images_per_sec", "ratio", "verdict", "a_range",
                       "b_range", "basis"] + ratio_cols
    unmatched = _unmatched(a, b, merged, keys)
    return Comparison(table, columns, unmatched, compared, keys)


def _unmatched(a: pd.DataFrame, b: pd.DataFrame, merged: pd.DataFrame,
               keys: list[str]) -> pd.DataFrame:
    """Configurations measured (ok) in one file only, with the other file's status if it
    tried and failed."""
    out = []
    for side, name, other in (("left_only", "A", b), ("right_only", "B", a)):
        for _, r in merged[merged["_merge"] == side].iterrows():
            match = np.ones(len(other), dtype=bool)
            for k in keys:
                match &= (other[k] == r[k]).to_numpy()
            statuses = sorted(set(other.loc[match, "status"]))
            out.append({**{k: r[k] for k in keys}, "side": name,
                        "status": ", ".join(statuses) if statuses else "not run"})
    return pd.DataFrame(out, columns=keys + ["side", "status"])


def compare_files(a_path: str, b_path: str) -> Comparison:
    return compare_frames(load.read_results([a_path]), load.read_results([b_path]))


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
        cols = studies.varying(comp.unmatched, comp.keys, ("model",)) + ["side", "status"]
        parts.append(("\n**Not matched**\n\n" if fmt == "markdown" else "\nnot matched:\n")
                     + writer(comp.unmatched, cols))
    parts.append("\nverdict: faster/slower when the spreads of A and B do not overlap; "
                 "spread from repeats, else min/max over --num_runs, else the Step line's "
                 "+/- x2\n")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    """`tfbench compare ...`; the command-line layer lives in tfbench.report.compare_cli."""
    from tfbench.report import compare_cli
    return compare_cli.main(argv)
