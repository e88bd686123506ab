"""The tables of a GPU evaluation (`tfbench evaluate`), from its CSV rows and JSON manifests only.

An evaluation runs, per model and execution mode, one training configuration and one inference
configuration at batch 1, each repeated (--num_runs) in its child process
(tfbench.sweep.evaluation). A row's execution mode comes from its precision, XLA and trt_mode
columns: native = fp32 without XLA (TensorFlow runs fp32 matmuls and convolutions as TF32 on
Ampere and newer GPUs, its default), mixed = fp16 or bf16 mixed precision, mixed_xla = mixed
precision compiled with XLA, tftrt = the model served as a TF-TRT converted SavedModel
(--trt_mode; inference only, where TF-TRT runs). A row's run kind comes from its mode column:
training, or inference (forward_only).

Tables: the first table (one row per model and device, the published shape), the mode matrix
(speed-ups over native), every configuration with its repeats' spread, the environment and what
changed in it. When a configuration has several rows (re-run with --rerun_failed), the latest
row counts.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from tfbench.measure import expected_range as er
from tfbench.report import load, plots, repeats, studies

MODES = ("native", "mixed", "mixed_xla", "tftrt")
ROWS_FILE = "evaluation.csv"   # an evaluation directory's rows (tfbench.sweep.evaluation)
KINDS = ("training", "inference")
MIXED_PRECISIONS = ("fp16", "bf16")
WHAT_TO_CHECK = ("other processes on the GPU or CPU (nvidia-smi, top), clocks (boost or locked: "
                 "nvidia-smi -q -d CLOCK), thermals and power limits (throttling)")
FIRST_COLUMNS = ["model", "device_label", "train_images_per_sec", "gflops_per_image",
                 "tflops_per_sec", "mfu_pct", "infer_latency_ms_p50", "infer_latency_ms_p99",
                 "train_peak_mem_gb", "train_power_w_mean", "train_images_per_sec_per_watt",
                 "train_temp_c_max", "expected_range", "stable"]
RUN_COLUMNS = ["model", "execution_mode", "precision", "xla", "kind", "batch_size", "devices",
               "variable_update",
               "image_size", "status", "images_per_sec", "images_per_sec_min",
               "images_per_sec_max", "num_runs", "spread_pct", "stable", "latency_ms_p50",
               "latency_ms_p99"]


def execution_mode(precision: str, xla: object, trt_mode: str = "") -> str:
    """native, mixed, mixed_xla or tftrt; '' for a combination the method does not run."""
    if trt_mode:
        return "" if int(xla or 0) else "tftrt"
    mixed = precision in MIXED_PRECISIONS
    if int(xla or 0):
        return "mixed_xla" if mixed else ""
    return "mixed" if mixed else ("native" if precision in ("", "fp32") else "")


def mode_label(mode: str, precision: str = "", trt_mode: str = "") -> str:
    """'native fp32', 'mixed bf16', 'mixed fp16 + XLA', 'TF-TRT FP16' (what ran, from a row's
    precision and trt_mode)."""
    if mode == "native":
        return "native fp32"
    if mode == "tftrt":
        return ("TF-TRT %s" % trt_mode).strip()
    label = "mixed %s" % precision if precision in MIXED_PRECISIONS else "mixed"
    return label + " + XLA" if mode == "mixed_xla" else label


def run_kind(mode: str) -> str:
    return {"training": "training", "forward_only": "inference"}.get(mode, "")


def with_method_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A typed results frame (report.load) with execution_mode, kind, devices and the device
    label; rows outside the method (eval runs, fp32 + XLA) are dropped."""
    out = df.assign(
        execution_mode=[execution_mode(p, x, t) for p, x, t in zip(
            df["precision"], df["xla"], df["trt_mode"])],
        kind=[run_kind(m) for m in df["mode"]],
        devices=load.devices(df))
    out = out[(out["execution_mode"] != "") & (out["kind"] != "")].copy()
    out["device_label"] = [plots.device_label(r) for _, r in out.iterrows()]
    return out.reset_index(drop=True)


def latest(df: pd.DataFrame, ok_only: bool = True) -> pd.DataFrame:
    """The latest row of each configuration (model, execution mode, kind, device)."""
    rows = studies.ok_rows(df) if ok_only else df
    keys = ["model", "execution_mode", "kind", "device_name"]
    return rows.drop_duplicates(keys, keep="last").reset_index(drop=True)


def model_devices(df: pd.DataFrame, models: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(model, device_name) pairs: the method's model order, then order of appearance."""
    seen = list(dict.fromkeys(zip(df["model"], df["device_name"])))
    rank = {m: i for i, m in enumerate(models)}
    return sorted(seen, key=lambda md: (rank.get(md[0], len(rank)), seen.index(md)))


def headline_mode(df: pd.DataFrame) -> Optional[str]:
    """The mode the first table shows: native when evaluated, else the first one measured."""
    present = set(latest(df)["execution_mode"])
    return next((m for m in MODES if m in present), None)


def _value(row: Optional[pd.Series], column: str) -> float:
    if row is None:
        return np.nan
    value = row.get(column)
    return np.nan if value is None or value == "" or pd.isna(value) else value


def _find(rows: pd.DataFrame, model: str, device: str, mode: str, kind: str):
    hit = rows[(rows["model"] == model) & (rows["device_name"] == device)
               & (rows["execution_mode"] == mode) & (rows["kind"] == kind)]
    return hit.iloc[-1] if len(hit) else None


def first_table(df: pd.DataFrame, models: Sequence[str] = (),
                mode: Optional[str] = None) -> pd.DataFrame:
    """One row per model and device, the published shape, for one execution mode (see
    headline_mode): training images/sec, FLOPs and MFU beside it, inference latency at batch 1,
    peak training memory, mean training power, images/sec per W, the published-range verdict
    and whether every repeat stayed within the spread threshold."""
    rows = latest(df)
    mode = mode or headline_mode(df)
    out = []
    for model, device in model_devices(rows, models):
        train = _find(rows, model, device, mode, "training")
        infer = _find(rows, model, device, mode, "inference")
        if train is None and infer is None:
            continue
        label = (train if train is not None else infer)["device_label"]
        verdict = "" if train is None else train["expected_range"]
        if train is not None and not verdict:
            verdict = er.expected_range(
                device, model, "training", train["precision"], int(train["devices"]),
                train["images_per_sec"],
                batch_per_gpu=er.batch_value(train.get("batch_size")))[0] or ""
        out.append({
            "model": model, "device_label": label,
            "train_images_per_sec": _value(train, "images_per_sec"),
            "gflops_per_image": _value(train if train is not None else infer,
                                       "gflops_per_image"),
            "tflops_per_sec": _value(train, "tflops_per_sec"),
            "mfu_pct": _value(train, "mfu_pct"),
            "infer_latency_ms_p50": _value(infer, "latency_ms_p50"),
            "infer_latency_ms_p99": _value(infer, "latency_ms_p99"),
            "train_peak_mem_gb": _value(train, "peak_mem_gb"),
            "train_power_w_mean": _value(train, "power_w_mean"),
            "train_images_per_sec_per_watt": _value(train, "images_per_sec_per_watt"),
            "train_temp_c_max": _value(train, "temp_c_max"),
            "expected_range": verdict,
            "stable": repeats.stable([train, infer])})
    return pd.DataFrame(out, columns=FIRST_COLUMNS)


def first_table_columns(table: pd.DataFrame) -> list[str]:
    """The published shape's columns that some row has: on a CPU, MFU without `tfbench peak`,
    power, images/sec per W and temperature are empty in every row and left out, as is the
    published-range verdict where no row has one."""
    def held(column: str) -> bool:
        return column in ("model", "device_label") or (
            column in table and table[column].replace("", np.nan).notna().any())
    return [c for c in FIRST_COLUMNS if held(c)]


def mode_labels(df: pd.DataFrame, kind: Optional[str] = None) -> dict[str, str]:
    """mode -> label of what ran ('mixed bf16 + XLA'), for the modes in the rows (of `kind`)."""
    rows = latest(df)
    if kind is not None:
        rows = rows[rows["kind"] == kind]
    labels = {}
    for mode in MODES:
        mine = rows[rows["execution_mode"] == mode]
        if len(mine):
            labels[mode] = mode_label(mode, mine["precision"].iloc[0], mine["trt_mode"].iloc[0])
    return labels


def mode_matrix(df: pd.DataFrame, kind: str, models: Sequence[str] = ()) -> pd.DataFrame:
    """Per model and device, each mode's figure and its speed-up over native.

    training: images/sec, speed-up = images/sec / native images/sec; inference: p50 latency at
    batch 1, speed-up = native p50 / p50. Columns are titled with what ran."""
    rows = latest(df)
    labels = mode_labels(df, kind)
    metric, unit = (("images_per_sec", "images/sec") if kind == "training"
                    else ("latency_ms_p50", "p50 ms"))
    out = []
    for model, device in model_devices(rows, models):
        cells = {m: _find(rows, model, device, m, kind) for m in labels}
        if all(c is None for c in cells.values()):
            continue
        label = next(c for c in cells.values() if c is not None)["device_label"]
        record = {"Model": model, "Device": label}
        base = _value(cells.get("native"), metric)
        for mode, row in cells.items():
            value = _value(row, metric)
            record["%s: %s" % (labels[mode], unit)] = _fmt(value, "{:,.1f}" if kind ==
                                                           "training" else "{:.2f}")
            if mode != "native":
                speedup = value / base if kind == "training" else base / value
                record["%s: speed-up (x)" % labels[mode]] = _fmt(speedup, "{:.2f}")
        out.append(record)
    return pd.DataFrame(out)


def _fmt(value: float, fmt: str) -> str:
    return "" if value is None or pd.isna(value) else fmt.format(value)


def runs_table(df: pd.DataFrame, models: Sequence[str] = ()) -> pd.DataFrame:
    """Every configuration's latest row (failed ones too): median, min, max and spread of its
    repeats, and whether it stayed within the threshold."""
    rows = latest(df, ok_only=False)
    if rows.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    models = list(dict.fromkeys(m for m, _ in model_devices(rows, models)))
    inference = (rows["kind"] == "inference").to_numpy()
    rows = rows.assign(
        _model=[models.index(m) for m in rows["model"]],
        _mode=[MODES.index(m) for m in rows["execution_mode"]],
        _kind=[KINDS.index(k) for k in rows["kind"]],
        stable=[repeats.stable([r]) if r["status"] == "ok" else "" for _, r in rows.iterrows()],
        # A training row's step-time percentiles are per batch of 32, not the latency figure.
        latency_ms_p50=rows["latency_ms_p50"].where(inference),
        latency_ms_p99=rows["latency_ms_p99"].where(inference))
    rows = rows.sort_values(["_model", "_mode", "_kind"], kind="stable")
    return rows[[c for c in RUN_COLUMNS if c in rows]].reset_index(drop=True)


def unstable_lines(df: pd.DataFrame) -> list[str]:
    """One line per configuration whose repeats spread more than their threshold."""
    rows = latest(df)
    lines = []
    for _, r in rows.iterrows():
        if _value(r, "unstable") == 1:
            lines.append("%s %s %s: spread %.1f%% over %d repeats (%s-%s images/sec)" % (
                r["model"], mode_label(r["execution_mode"], r["precision"], r["trt_mode"]),
                r["kind"],
                r["spread_pct"], int(r["num_runs"]), _fmt(r["images_per_sec_min"], "{:,.1f}"),
                _fmt(r["images_per_sec_max"], "{:,.1f}")))
    return lines


def expected_range_lines(df: pd.DataFrame) -> list[str]:
    """The published band and verdict of every training row on a GPU of the published table,
    or, where nothing published matches its model version and batch, what is published
    instead."""
    lines = []
    for _, r in latest(df).iterrows():
        if r["kind"] != "training":
            continue
        _, text = er.expected_range(r["device_name"], r["model"], "training", r["precision"],
                                    int(r["devices"]), r["images_per_sec"],
                                    batch_per_gpu=er.batch_value(r.get("batch_size")))
        if text and not text.startswith("Expected range: none for"):   # not a MIG slice
            lines.append(text)
    return list(dict.fromkeys(lines))
