"""Reading results CSV files (csv_out schema) and the JSON manifests their rows point to."""

from __future__ import annotations

import csv
import json
import os
from typing import Iterable, Mapping, Optional, Union

import numpy as np
import pandas as pd

from tfbench import figures
from tfbench.output.csv_out import COLUMN_NAMES
from tfbench.errors import UsageError

# How each column is read, as its figure declares it (tfbench.figures): text, integers that say
# what ran (0 when a failed row does not know them), numbers (NaN when empty).
TEXT_COLUMNS = figures.TEXT_COLUMNS
INT_CONFIG_COLUMNS = figures.INT_CONFIG_COLUMNS
NUMERIC_COLUMNS = tuple(c for c in COLUMN_NAMES if c not in TEXT_COLUMNS + INT_CONFIG_COLUMNS)


def devices(df: Union[pd.DataFrame, pd.Series, Mapping[str, int]]) -> Union[pd.Series, int]:
    """Devices of every worker together: num_devices x num_workers (each at least 1), of a
    frame's rows (a Series) or of one row."""
    return np.maximum(df["num_devices"], 1) * np.maximum(df["num_workers"], 1)


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Typed copy of raw string rows: metrics float (NaN when empty), config ints, text str;
    with `devices`, every worker's devices together."""
    df = df.copy()
    for name in COLUMN_NAMES:
        if name not in df.columns:
            df[name] = ""
    for name in TEXT_COLUMNS:
        df[name] = df[name].fillna("").astype(str)
    for name in NUMERIC_COLUMNS:
        df[name] = pd.to_numeric(df[name], errors="coerce")
    for name in INT_CONFIG_COLUMNS:
        df[name] = pd.to_numeric(df[name], errors="coerce").fillna(0).astype(int)
    df["num_workers"] = df["num_workers"].clip(lower=1)
    df["num_devices"] = df["num_devices"].clip(lower=1)
    df["devices"] = devices(df)
    df["precision"] = df["precision"].replace("", "fp32")
    df["mode"] = df["mode"].replace("", "training")
    df["status"] = df["status"].replace("", "ok")
    return df


def combine_workers(rows: pd.DataFrame) -> pd.Series:
    """The row of one multi-worker run from its workers' rows (typed, the chief's first), each
    figure as it declares (tfbench.figures.figure.WORKERS): the chief's where every row holds
    the run's figure or its own record, the sum, largest, smallest or mean of the rows, and the
    harmonic mean of a worker's images/sec over its own resources. An empty cell is left out;
    a figure no row holds stays empty."""
    out = rows.iloc[0].copy()
    for figure in figures.CSV_FIGURES:
        how = figure.workers
        if how in ("same", "none") or figure.name not in rows or figure.type == "text":
            continue
        values = pd.to_numeric(rows[figure.name], errors="coerce").dropna()
        if values.empty:
            continue
        if how == "sum":
            out[figure.name] = values.sum()
        elif how == "max":
            out[figure.name] = values.max()
        elif how == "min":
            out[figure.name] = values.min()
        elif how == "mean":
            out[figure.name] = values.mean()
        elif how == "per_worker":
            out[figure.name] = len(values) / (1.0 / values).sum() if (values > 0).all() \
                else float("nan")
    return out


def rows_frame(rows: Iterable[dict]) -> pd.DataFrame:
    """Typed frame from csv_out-style row dicts (the sweep's in-memory rows)."""
    return normalize(pd.DataFrame(list(rows), columns=list(COLUMN_NAMES), dtype=object))


# The columns that make a CSV file a results file, whatever its schema version.
REQUIRED_COLUMNS = ("run_id", "status", "images_per_sec")


def _not_results(path: str, why: str) -> UsageError:
    """The one line for a file that is no results CSV: what it is, and what was expected."""
    return UsageError("%s is not a tfbench results CSV (%s): expected the CSV a run writes "
                      "with --csv_file, a header row naming %s, then one row per run"
                      % (path, why, _listed(REQUIRED_COLUMNS, "and")))


def _listed(names: Iterable[str], last: str) -> str:
    """'a', 'a and b', 'a, b and c' (or `last` = 'or')."""
    names = list(names)
    return names[0] if len(names) == 1 else "%s %s %s" % (", ".join(names[:-1]), last,
                                                          names[-1])


def _checked_header(path: str) -> list[str]:
    """The header row of a results CSV; UsageError (one line, no parser's text) when the file
    is not one."""
    with open(path, "rb") as handle:
        first = handle.readline(1 << 20)
    try:
        header = next(csv.reader([first.decode("utf-8-sig")]), None)
    except UnicodeDecodeError:
        raise _not_results(path, "it is not UTF-8 text") from None
    except csv.Error:
        raise _not_results(path, "its first line is not a CSV row") from None
    if not header:
        raise _not_results(path, "it is empty")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise _not_results(path, "its first line names no %s" % _listed(missing, "or"))
    return header


def _damage(path: str, width: int) -> str:
    """What makes a results CSV with a good header unreadable: the first line that is not
    UTF-8, or the first row with more fields than the header's `width`."""
    with open(path, "rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return "line %d is not UTF-8 text" % number
    reader = csv.reader(line.decode("utf-8-sig") for line in lines)
    try:
        for row in reader:
            if len(row) > width:
                return "line %d has more fields than the header" % reader.line_num
    except csv.Error:
        return "line %d is not a CSV row" % reader.line_num
    return "a row does not parse as CSV"


def read_results(paths: Iterable[str]) -> pd.DataFrame:
    """All rows of the given CSV files, typed, with a `source_file` column."""
    frames = []
    for path in paths:
        if not os.path.isfile(path):
            raise UsageError("results file not found: %s" % path)
        header = _checked_header(path)
        try:
            raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, csv.Error, UnicodeDecodeError):
            raise UsageError("%s is a tfbench results CSV that is damaged: %s" % (
                path, _damage(path, len(header)))) from None
        raw["source_file"] = path
        frames.append(raw)
    if not frames:
        raise UsageError("no results files given")
    return normalize(pd.concat(frames, ignore_index=True))


def json_dirs_for(csv_paths: Iterable[str], json_dir: Optional[str] = None) -> list[str]:
    """Where manifests may be: --json_dir, else next to each CSV (runs/, tfbench_runs/, itself)."""
    dirs = [json_dir] if json_dir else []
    for path in csv_paths:
        base = os.path.dirname(os.path.abspath(path))
        dirs += [os.path.join(base, "runs"), os.path.join(base, "tfbench_runs"), base]
    seen: list[str] = []
    for d in dirs:
        if d and os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def load_manifest(json_dirs: Iterable[str], run_id: str) -> Optional[dict]:
    """The run's JSON manifest, or None when absent or unreadable (reports go on without it)."""
    for d in json_dirs:
        path = os.path.join(d, run_id + ".json")
        if os.path.isfile(path):
            try:
                with open(path) as handle:
                    return json.load(handle)
            except (OSError, ValueError):
                return None
    return None
