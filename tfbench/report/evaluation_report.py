"""The evaluation report (`tfbench evaluate`): report.md and report.html with the first table first,
then the mode matrix, the per-model figures, the published ranges, stability, the environment and
failed runs; one CSV file per table beside them. Written from an evaluation directory's CSV
(evaluation.csv) and its runs' JSON manifests (runs/) only.

The HTML page is meant to be read in a browser at 1,280 px: tables wrap their headers, figures
sit three to a row and open full size when clicked (tfbench.report.browser_check checks it).
"""

from __future__ import annotations

import dataclasses
import html as html_lib
import os
from typing import Optional, Sequence

import pandas as pd

from tfbench.report import evaluation as ev
from tfbench.report import (evaluation_env, evaluation_plots, load, plots, scaling_explained,
                            studies, tables)

ROWS_FILE = ev.ROWS_FILE


@dataclasses.dataclass
class EvaluationReport:
    markdown_path: str
    html_path: str
    plots: dict[str, list[str]]          # model -> its figures
    sections: list[studies.Section]
    first_table: pd.DataFrame
    mode: Optional[str]                  # the mode of the first table


def _unique(values) -> str:
    """'1,000', or '32/64' when the rows differ."""
    found = []
    for v in pd.unique(pd.Series(list(values)).dropna()):
        try:
            found.append("{:,}".format(int(v)) if float(v) == int(v) else str(v))
        except (TypeError, ValueError):
            found.append(str(v))
    return "/".join(found) if found else "?"


def method_note(df: pd.DataFrame, mode: Optional[str], thresholds: Sequence[float] = ()) -> str:
    """What the figures are, from the rows themselves (batch, steps, repeats, sizes, device);
    thresholds: the runs' --unstable_threshold_pct (from their manifests)."""
    train = df[df["kind"] == "training"]
    infer = df[df["kind"] == "inference"]
    labels = ev.mode_labels(df)
    parts = ["Mode of this table: %s (the mode matrix below has the others)."
             % labels.get(mode, mode)]
    if len(train):
        parts.append("Training: batch %s per device, %s timed steps after %s warm-up, %s "
                     "repeats in one process, median shown." % (
                         _unique(train["batch_size"]), _unique(train["num_batches"]),
                         _unique(train["num_warmup_batches"]), _unique(train["num_runs"])))
    if len(infer):
        parts.append("Inference: batch 1 on one device, %s timed steps after %s warm-up, %s "
                     "repeats; p50 and p99 over the timed steps of every repeat." % (
                         _unique(infer["num_batches"]), _unique(infer["num_warmup_batches"]),
                         _unique(infer["num_runs"])))
    if (infer["execution_mode"] == "tftrt").any():
        parts.append("TF-TRT: the fp32 model exported as a SavedModel, converted by TF-TRT "
                     "(engines built before the timed steps) and timed through its serving "
                     "signature; inference only.")
    parts.append("Image size %s px; %s data." % (_unique(df["image_size"]),
                                                 _unique(df["data_source"])))
    if (df["device_kind"] == "cpu").any():
        parts.append("On a CPU, peak memory is the process's peak host RSS, and power, "
                     "temperature and images/sec per W are empty (they need an NVIDIA GPU); "
                     "the first table leaves out a column no row has.")
    parts.append("FLOPs: forward pass, multiply-add = 2; achieved TFLOP/s counts training as 3x "
                 "forward; MFU needs a peak (datasheet for known GPUs, `tfbench peak` on "
                 "CPUs). Stable? = the spread (max - min) / median of the repeats stays within "
                 "%s, in training and in inference." % ("%s%%" % _unique(thresholds)
                                                       if len(thresholds) else "the threshold"))
    return " ".join(parts)


def _manifests(df: pd.DataFrame, eval_dir: str) -> dict[str, dict]:
    dirs = load.json_dirs_for([os.path.join(eval_dir, ROWS_FILE)])
    found = {}
    for run_id in df["run_id"]:
        manifest = load.load_manifest(dirs, run_id)
        if manifest:
            found[run_id] = manifest
    return found


def _sections(df: pd.DataFrame, models: Sequence[str], manifests: dict[str, dict]
              ) -> tuple[list[studies.Section], pd.DataFrame, Optional[str]]:
    mode = ev.headline_mode(df)
    thresholds = sorted({float(t) for m in manifests.values()
                         for t in [(m.get("extra") or {}).get("unstable_threshold_pct")]
                         if t is not None})
    first = ev.first_table(df, models, mode)
    labels = ev.mode_labels(df)
    sections = [studies.Section(
        "first_table", "Results: one row per model and device (%s)" % labels.get(mode, "none"),
        first, ev.first_table_columns(first), method_note(df, mode, thresholds))]
    for kind, what in (("training", "training images/sec"),
                       ("inference", "inference p50 latency at batch 1")):
        matrix = ev.mode_matrix(df, kind, models)
        if len(matrix) and len(ev.mode_labels(df, kind)) > 1:
            sections.append(studies.Section(
                "mode_matrix_" + kind, "Mode matrix: %s, speed-up over native" % what, matrix,
                list(matrix.columns), "speed-up = images/sec / native images/sec"
                if kind == "training" else "speed-up = native p50 / p50"))
    return sections, first, mode


def _tail_sections(df: pd.DataFrame, raw: pd.DataFrame, manifests: dict[str, dict],
                   models: Sequence[str]) -> list[studies.Section]:
    sections = []
    lines = ev.expected_range_lines(df)
    if lines:
        sections.append(studies.Section("expected_range", "Published ranges", pd.DataFrame(
            {"expected_range": lines}), ["expected_range"]))
    unstable = ev.unstable_lines(df)
    note = ("Unstable (spread above the threshold): %s. Check %s, then run the evaluation "
            "again with --rerun_unstable." % ("; ".join(unstable), ev.WHAT_TO_CHECK)
            if unstable else "Every repeated configuration stayed within its spread threshold.")
    runs = ev.runs_table(df, models)
    sections.append(studies.Section("runs", "Every configuration: repeats and spread", runs,
                                    studies.varying(runs, ev.RUN_COLUMNS, (
                                        "model", "execution_mode", "precision", "xla", "kind",
                                        "status", "spread_pct", "stable")), note))
    sections += _scaling_sections(df)
    env = evaluation_env.environment_table(list(manifests.values()))
    changed = evaluation_env.changes(list(manifests.values()))
    if len(env):
        sections.append(studies.Section(
            "environment", "Environment (before the first run)", env, ["Field", "Value"],
            "Changed during the evaluation: " + ("; ".join(changed) if changed else "nothing "
                                                 "(every run's environment, before and after)")))
    failed = studies.failed_rows(raw)
    if not failed.empty:
        sections.append(studies.Section("failed_runs", "Failed runs", failed,
                                        list(failed.columns)))
    return sections


def _scaling_sections(df: pd.DataFrame) -> list[studies.Section]:
    """Training on several GPUs with --explain_scaling: where the efficiency against one GPU
    goes, each run against its own one-device probe (tfbench.report.scaling_explained)."""
    latest = ev.latest(df)
    explained = scaling_explained.explain_points(latest[latest["kind"] == "training"])
    if explained.empty:
        return []
    keys = ["model", "execution_mode"]
    return [studies.Section(
        "scaling_explained", "Where the multi-GPU efficiency goes", explained,
        keys + ["devices", "images_per_sec", "efficiency_pct"]
        + list(scaling_explained.EXPLAINED_PTS)
        + ["allreduce_busbw_gbs", "expected_busbw_gbs", "link"],
        scaling_explained.explain_note(explained, keys))]


def _figures(df: pd.DataFrame, manifests: dict[str, dict], out_dir: str,
             models: Sequence[str]) -> dict[str, list[str]]:
    rows = ev.latest(df)
    out: dict[str, list[str]] = {}
    for model, device in ev.model_devices(rows, models):
        mine = rows[(rows["model"] == model) & (rows["device_name"] == device)]
        train = mine[mine["kind"] == "training"]
        infer = mine[mine["kind"] == "inference"]
        stem = os.path.join(out_dir, "plots", plots.safe_name("%s_%s" % (model, device)))
        label = (train if len(train) else infer).iloc[0]["device_label"]
        paths = []
        if len(train):
            native = train.loc[train["execution_mode"] == "native", "images_per_sec"]
            base = float(native.iloc[0]) if len(native) else float("nan")
            modes = [{"label": ev.mode_label(r["execution_mode"], r["precision"],
                                             r["trt_mode"]),
                      "images_per_sec": r["images_per_sec"],
                      "images_per_sec_min": r["images_per_sec_min"],
                      "images_per_sec_max": r["images_per_sec_max"],
                      "speedup": r["images_per_sec"] / base, "peak_mem_gb": r["peak_mem_gb"],
                      "power_w_mean": r["power_w_mean"]} for _, r in _by_mode(train).iterrows()]
            evaluation_plots.throughput_by_mode(model, label, modes, stem + "_throughput.png")
            paths.append(stem + "_throughput.png")
        series = {ev.mode_label(r["execution_mode"], r["precision"], r["trt_mode"]):
                  [1000.0 * t for t in manifests.get(r["run_id"], {}).get("step_times") or []]
                  for _, r in _by_mode(infer).iterrows()}
        if any(series.values()):
            evaluation_plots.latency_distribution(model, label, series, stem + "_latency.png")
            paths.append(stem + "_latency.png")
        if len(train):
            cpu = (train["device_kind"] == "cpu").all()
            evaluation_plots.memory_and_power(
                model, label, modes, stem + "_memory_power.png",
                "Peak training memory, host RSS (GiB)" if cpu else "Peak training memory (GiB, largest device)")
            paths.append(stem + "_memory_power.png")
        out[model if model not in out else "%s (%s)" % (model, label)] = paths
    return out


def _by_mode(rows: pd.DataFrame) -> pd.DataFrame:
    rank = {m: i for i, m in enumerate(ev.MODES)}
    order = [rank[m] for m in rows["execution_mode"]]
    return rows.assign(_r=order).sort_values("_r", kind="stable")


def build(eval_dir: str, out_dir: Optional[str] = None, models: Sequence[str] = (),
          title: str = "tfbench evaluate", notes: Sequence[str] = ()) -> EvaluationReport:
    """Writes the report of the evaluation in eval_dir into out_dir (default eval_dir/report).
    notes: lines shown under the title (the command, how mixed precision was chosen)."""
    out_dir = out_dir or os.path.join(eval_dir, "report")
    os.makedirs(out_dir, exist_ok=True)
    raw = load.read_results([os.path.join(eval_dir, ROWS_FILE)])
    df = ev.with_method_columns(raw)
    manifests = _manifests(df, eval_dir)
    sections, first, mode = _sections(df, models, manifests)
    figures = _figures(df, manifests, out_dir, models)
    tail = _tail_sections(df, raw, manifests, models)
    md_path, html_path = os.path.join(out_dir, "report.md"), os.path.join(out_dir, "report.html")
    head = ["Rows: %s" % os.path.relpath(os.path.join(eval_dir, ROWS_FILE), out_dir)]
    head += list(notes)
    with open(md_path, "w") as handle:
        handle.write(markdown_page(title, head, sections, figures, tail, out_dir))
    with open(html_path, "w") as handle:
        handle.write(html_page(title, head, sections, figures, tail, out_dir))
    for section in sections + tail:
        tables.write_section_csv(out_dir, section)
    return EvaluationReport(md_path, html_path, figures, sections + tail, first, mode)


def markdown_page(title, head, sections, figures, tail, out_dir) -> str:
    parts = ["# %s\n" % title, "".join("%s  \n" % line for line in head)]
    for section in sections:
        parts.append(tables.section_markdown(section))
    if figures:
        parts.append("## Per-model figures\n")
        for model, paths in figures.items():
            parts.append("### %s\n" % model)
            parts += ["![%s](%s)\n" % (os.path.basename(p), os.path.relpath(p, out_dir))
                      for p in paths]
    parts += [tables.section_markdown(s) for s in tail]
    return "\n".join(parts)


# Beside the shared page style: a device column keeps a readable width.
CSS = tables.PAGE_CSS + "table.numbers td:nth-child(2){min-width:9em;text-align:left}" \
    "table.numbers th:nth-child(2){text-align:left}"


def html_page(title, head, sections, figures, tail, out_dir) -> str:
    esc = html_lib.escape
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             "<title>%s</title><style>%s</style></head><body>" % (esc(title), CSS),
             "<h1>%s</h1><p class='note'>%s</p>" % (esc(title), "<br>".join(map(esc, head)))]
    parts += [tables.section_html(s) for s in sections]
    if figures:
        parts.append("<h2>Per-model figures</h2>")
        for model, paths in figures.items():
            parts.append("<h3>%s</h3><div class='figures'>" % esc(model))
            for p in paths:
                rel = esc(os.path.relpath(p, out_dir))
                parts.append("<a href='%s'><img src='%s' alt='%s'></a>"
                             % (rel, rel, esc(os.path.basename(p))))
            parts.append("</div>")
    parts += [tables.section_html(s) for s in tail]
    parts.append("</body></html>\n")
    return "\n".join(parts)

