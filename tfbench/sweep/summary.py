"""The tables at the end of a sweep (summary.md and one file per table): the studies its swept
keys call for (tfbench.report.studies), or the max-batch results, then every point.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from tfbench.config.argv import settings_of_flags
from tfbench.output import csv_out
from tfbench.sweep.max_batch import MaxBatchResult
from tfbench.sweep.grid import point_flags
from tfbench.sweep.study import PointRecord, SweepConfig


def max_batch_rows(results: Sequence[MaxBatchResult]) -> list[dict[str, object]]:
    """Table rows for the max-batch results (what to print and write)."""
    out = []
    for res in results:
        row = res.row or {}
        s = res.search
        if s.max_batch is None:
            value = "" if s.error else "none fits"
        elif s.limit_reached:
            value = ">= %d (limit)" % s.max_batch
        elif s.error:
            value = ">= %d (search stopped)" % s.max_batch
        else:
            value = str(s.max_batch)
        out.append({**res.values,
                    "max_batch_size": value,
                    "images_per_sec": _float(row.get("images_per_sec")),
                    "peak_mem_gb": _float(row.get("peak_mem_gb")),
                    "probes": " ".join("%d:%s" % (b, st) for b, st in s.probes),
                    "error": s.error})
    return out


def _float(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


# Swept flags whose effect the CSV records under another column.
KEY_COLUMNS = {"num_gpus": "num_devices", "forward_only": "mode", "eval": "mode",
               "use_fp16": "precision", "xla_compile": "xla"}


def study_kinds(keys: Sequence[str]) -> list[str]:
    """Which studies a sweep over `keys` makes."""
    kinds = []
    if "num_gpus" in keys:
        kinds.append("scaling")
    if "batch_size" in keys:
        kinds.append("batch_size")
    if {"precision", "xla", "use_fp16", "xla_compile"} & set(keys):
        kinds.append("precision")
    if "image_size" in keys:
        kinds.append("resolution")
    return kinds


def extra_keys(keys: Sequence[str]) -> list[str]:
    """Swept flags with no CSV column of their own (optimizer, data_dir, ...): they become
    grouping columns so their points are kept apart in the study tables."""
    return [k for k in keys if k not in csv_out.COLUMN_NAMES and k not in KEY_COLUMNS]


def study_sections(records: Sequence[PointRecord], config: SweepConfig, knee_pct: float = 90.0,
                   max_results: Optional[Sequence[MaxBatchResult]] = None) -> list:
    """Tables for the end of a sweep: the studies its keys call for, max batch, all points."""
    import pandas as pd

    from tfbench.report import load, studies
    extra = extra_keys(config.keys)
    # The children's own threshold, as their --num_runs would judge their repeats: read from a
    # point's flags, since the base flags alone need not be a run (--saved_model with
    # --sweep=forward_only=true).
    first = records[0].point.flags if records else {}
    threshold = settings_of_flags(
        point_flags(config.base_flags, first)).measurement.unstable_threshold_pct
    pairs = [(r.point, row) for r in records for row in r.rows]
    df = load.rows_frame([row for _, row in pairs])
    for key in extra:
        df[key] = [p.values.get(key, "") for p, _ in pairs]
    sections = []
    if max_results is not None:
        table = pd.DataFrame(max_batch_rows(max_results))
        sections.append(studies.Section(
            "max_batch", "Largest batch that fits", table, list(table.columns),
            "doubling, then bisection; each probe a separate process; oom = does not fit"))
    else:
        sections += studies.study_sections(df, study_kinds(config.keys), config.scaling,
                                           knee_pct, extra, threshold)
    points = pd.DataFrame([{
        "name": p.name, "status": row["status"], "images_per_sec": _float(row["images_per_sec"]),
        "peak_mem_gb": _float(row["peak_mem_gb"]), "seconds": r.seconds, "error": row["error"]}
        for r in records for p, row in [(r.point, x) for x in r.rows]])
    failed = int((points["status"] != "ok").sum()) if len(points) else 0
    sections.append(studies.Section(
        "all_points", "All points", points, list(points.columns),
        "%d of %d runs not ok; logs in %s" % (failed, len(points),
                                              os.path.join(config.out_dir, "logs"))))
    return sections
