"""Reading results CSV files (csv_out schema) and the JSON manifests their rows point to."""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional

import pandas as pd

from tfbench.output.csv_out import COLUMN_NAMES
from tfbench.errors import UsageError

# Columns that name a configuration or carry text; every other schema column is numeric.
TEXT_COLUMNS = ("run_id", "timestamp", "status", "error", "model", "dataset", "mode", "precision",
                "device_kind", "device_name", "variable_update", "data_source", "data_format",
                "expected_range", "expected_range_source", "tf_version", "keras_version",
                "tfbench_version", "hostname",
                "notices", "command", "slowest_device", "link", "serving_path", "trt_mode",
                "trt_precisions", "tensorrt_version")
# Integer-valued configuration columns (0 when a failed row does not know them).
INT_CONFIG_COLUMNS = ("xla", "batch_size", "global_batch_size", "num_devices", "num_workers",
                      "image_size", "accum_steps", "num_batches")
NUMERIC_COLUMNS = tuple(c for c in COLUMN_NAMES if c not in TEXT_COLUMNS + INT_CONFIG_COLUMNS)


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Typed copy of raw string rows: metrics float (NaN when empty), config ints, text str."""
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
    df["precision"] = df["precision"].replace("", "fp32")
    df["mode"] = df["mode"].replace("", "training")
    df["status"] = df["status"].replace("", "ok")
    return df


def rows_frame(rows: Iterable[dict]) -> pd.DataFrame:
    """Typed frame from csv_out-style row dicts (the sweep's in-memory rows)."""
    return normalize(pd.DataFrame(list(rows), columns=list(COLUMN_NAMES), dtype=object))


def read_results(paths: Iterable[str]) -> pd.DataFrame:
    """All rows of the given CSV files, typed, with a `source_file` column."""
    frames = []
    for path in paths:
        if not os.path.isfile(path):
            raise UsageError("results file not found: %s" % path)
        try:
            raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise UsageError("%s is not a readable CSV file: %s" % (path, exc)) from None
        if not {"run_id", "status", "images_per_sec"} <= set(raw.columns):
            raise UsageError("%s is not a tfbench results CSV (no run_id/status/images_per_sec "
                             "columns)" % path)
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
