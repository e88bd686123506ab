"""Where a scaling study's efficiency goes: each point's step split into causes
(tfbench.measure.scaling) from the --explain_scaling figures its row holds, held against the
one-device step of its series. A study table (tfbench.report.studies adds it after the scaling
table) and the data of its stacked-bar plot (tfbench.report.plots.scaling_explained_plot).
"""

from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

from tfbench.measure import scaling
from tfbench.report import repeats


# The points of efficiency each cause costs, as explain_table names them (its ms: lost_ms_*).
EXPLAINED_PTS = tuple("lost_pts_%s" % c for c in scaling.CAUSES)


def explain_table(table: pd.DataFrame) -> pd.DataFrame:
    """Where each scaling point's efficiency goes (tfbench.measure.scaling), for the points of
    `table` (scaling_table's) beyond their baseline that hold --explain_scaling's probes.

    step_ms = 1000 x global batch / images/sec. The one-device step it is held against: the
    baseline's when the series starts at one device (step_ms x efficiency / 100: the
    baseline's step for weak scaling, its step over N for strong), else the point's own probe
    (one_device_step_ms), with the efficiency against it. `explained_by` says which."""
    rows = []
    if table.empty or "one_device_step_ms" not in table:
        return pd.DataFrame()
    for _, group in table.groupby("group", sort=False):
        base = group.iloc[0]
        for _, row in group.iloc[1:].iterrows():
            reference = None
            if base["devices"] == 1 and _probed(row):
                reference = scaling.step_ms(row["global_batch_size"], row["images_per_sec"]) \
                    * row["efficiency_pct"] / 100.0
            out = explain_row(row, reference)
            if out is not None:
                rows.append(out)
    return pd.DataFrame(rows)


def explain_points(df: pd.DataFrame) -> pd.DataFrame:
    """Each row on several devices that holds the probes, against its own one-device probe
    (`tfbench evaluate` on several GPUs: no one-device training row to hold it against)."""
    rows = [explain_row(row) for _, row in df.iterrows()] if "one_device_step_ms" in df else []
    return pd.DataFrame([r for r in rows if r is not None])


def _probed(row: pd.Series) -> bool:
    return row["images_per_sec"] > 0 and any(
        pd.notna(row[c]) for c in ("one_device_step_ms", "allreduce_ms", "input_step_ms"))


def explain_row(row: pd.Series, reference: Optional[float] = None) -> Optional[dict]:
    """The row with its step split against `reference` ms (None: its own one-device probe),
    or None when it holds no probe (or no reference)."""
    if not _probed(row):
        return None
    by = "one-device row"
    if reference is None:
        if pd.isna(row["one_device_step_ms"]):
            return None
        reference, by = float(row["one_device_step_ms"]), "one-device probe"
    step_ms = scaling.step_ms(row["global_batch_size"], row["images_per_sec"])
    d = scaling.decompose(step_ms, reference, _value(row["slowest_device_step_ms"]),
                          _value(row["allreduce_ms"]), _value(row["input_step_ms"]))
    out = row.to_dict()
    out.update(step_ms=step_ms, reference_ms=reference, explained_by=by,
               efficiency_pct=d.efficiency_pct, largest=d.largest,
               verdict=scaling.verdict(d, scaling.evidence(
                   out, str(row["device_kind"]), int(row["global_batch_size"]))))
    out.update({"lost_ms_%s" % c: d.lost_ms[c] for c in scaling.CAUSES})
    out.update({"lost_pts_%s" % c: d.lost_pts[c] for c in scaling.CAUSES})
    return out


def explain_note(explained: pd.DataFrame, keys: Sequence[str]) -> str:
    """How the table is made, then each point's verdict."""
    verdicts = []
    keys = [k for k in keys if k in explained and explained[k].nunique() > 1]
    for _, row in explained.iterrows():
        label = repeats.label(row, keys)
        verdicts.append("%s%d devices: %s. " % ("%s, " % label if label else "", row["devices"],
                                                row["verdict"]))
    return ("".join(verdicts) + "--explain_scaling's probes split each step against the "
            "one-device step (docs/measurements.md): points lost = 100 x ms lost / step ms, in "
            "the order slowest device's extra compute, input wait, all-reduce not hidden "
            "behind the backward pass; unexplained is the rest, so the points add up to 100 - "
            "efficiency")


def _value(x) -> Optional[float]:
    return None if pd.isna(x) else float(x)
