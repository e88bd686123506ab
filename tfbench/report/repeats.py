"""A configuration's repeats, as every table shows them: how many, min and max images/sec, the
spread and the stability verdict, by the rule `tfbench evaluate` and --num_runs apply
(tfbench.measure.stats.repeat_summary: spread = (max - min) / median, unstable above the
threshold).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from tfbench.measure import stats

# A configuration's repeats: how many, min and max images/sec, spread % and the verdict.
REPEAT_COLUMNS = ("images_per_sec_min", "images_per_sec_max", "num_runs", "spread_pct",
                  "unstable", "stable")
# What a table with repeats shows of them, after images/sec (the median).
SHOWN_REPEAT_COLUMNS = ["images_per_sec_min", "images_per_sec_max", "num_runs", "spread_pct",
                        "stable"]


def _given(row: Optional[pd.Series], column: str) -> bool:
    value = None if row is None else row.get(column)
    return value is not None and value != "" and not pd.isna(value)


def stable(rows: Sequence[Optional[pd.Series]]) -> str:
    """The stability verdict of `tfbench evaluate` and of every study table: 'no' when one of
    `rows` (a configuration: a CSV row, or an aggregate of repeated rows) spread more than its
    threshold (`unstable` 1), 'yes' when every row is there, was repeated (num_runs >= 2) and
    none did, '' otherwise (a row missing or not repeated)."""
    present = [r for r in rows if r is not None]
    if any(_given(r, "unstable") and r["unstable"] == 1 for r in present):
        return "no"
    if present and len(present) == len(rows) and all(
            _given(r, "num_runs") and r["num_runs"] >= 2 for r in present):
        return "yes"
    return ""


def summarize(group: pd.DataFrame,
            unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT) -> dict:
    """REPEAT_COLUMNS of one configuration's ok rows. Several rows are its repeats (`tfbench
    sweep --repeats`, re-runs), summarised as --num_runs summarises a run's own repeats
    (stats.repeat_summary: spread = (max - min) / median, unstable above the threshold); a
    single row keeps what its own --num_runs measured."""
    if len(group) > 1:
        s = stats.repeat_summary(group["images_per_sec"], unstable_threshold_pct)
        out = {k: s[k] for k in ("images_per_sec_min", "images_per_sec_max", "num_runs",
                                 "spread_pct")}
        out["unstable"] = int(bool(s["unstable"]))
    else:
        row = group.iloc[0]
        if _given(row, "num_runs") and row["num_runs"] >= 2:
            out = {k: row.get(k, np.nan) for k in ("images_per_sec_min", "images_per_sec_max",
                                                   "num_runs", "spread_pct", "unstable")}
        else:
            ips = row["images_per_sec"]
            out = {"images_per_sec_min": ips, "images_per_sec_max": ips, "num_runs": 1,
                   "spread_pct": np.nan, "unstable": np.nan}
    out["stable"] = stable([pd.Series(out)])
    return out


def with_repeats(table: pd.DataFrame, columns: list[str]) -> list[str]:
    """`columns` with SHOWN_REPEAT_COLUMNS after images/sec when a row of `table` was
    repeated."""
    if "num_runs" not in table or not (table["num_runs"] >= 2).any() or \
            "images_per_sec" not in columns:
        return columns
    at = columns.index("images_per_sec") + 1
    return columns[:at] + [c for c in SHOWN_REPEAT_COLUMNS if c not in columns] + columns[at:]


def unstable_text(row: pd.Series) -> str:
    """' (UNSTABLE: spread 43.2% over 2 repeats)' for a configuration whose repeats spread
    above the threshold, '' otherwise."""
    if stable([row]) != "no":
        return ""
    return " (UNSTABLE: %s)" % _spread_text(row)


def _spread_text(row: pd.Series) -> str:
    return "spread %.1f%% over %d repeats" % (row["spread_pct"], row["num_runs"])


def note(table: pd.DataFrame, point: list[str], threshold: float) -> str:
    """What the repeat columns mean, and every unstable point, for a table with repeats."""
    if not (table["num_runs"] >= 2).any():
        return ""
    text = ("; images/sec is the median of a point's repeats, spread = (max - min) / median, "
            "stable as in tfbench evaluate (unstable above %g%%)" % threshold)
    unstable = ["%s (%s)" % (label(r, point), _spread_text(r)) for _, r in table.iterrows()
                if stable([r]) == "no"]
    if unstable:
        text += ". Unstable: %s" % "; ".join(unstable)
    return text


def label(row: pd.Series, columns: Sequence[str]) -> str:
    """`batch_size=16, model=resnet50`: the point a row is, by `columns`."""
    return ", ".join("%s=%s" % (k, row[k]) for k in columns if row[k] != "")


