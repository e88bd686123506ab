"""`tfbench report`: Markdown + HTML tables and PNG plots from results CSV files, and the
verdict table of each validate.json given (tfbench.report.validation), first.

Only rows with status ok enter tables of measurements and the figures; the others are listed in a
'Failed runs' table. Study tables appear when the rows support them (two or more device counts,
batch sizes, precisions or image sizes in one configuration). A figure is the run's: the report
recomputes none, so a cell no run wrote stays empty.
"""

from __future__ import annotations

import dataclasses
import html as html_lib
import os
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from tfbench import figures
from tfbench.measure import expected_range as er, stats
from tfbench.report import load, plots, repeats, studies, tables, validation

# The Results table: what tells its rows apart, the figures that show there (Figure.shows
# "summary", from images_per_sec on), and the scaling efficiency of the configuration's series.
SUMMARY_COLUMNS = ["model", "device_name", "devices", "mode", "precision", "xla", "serving_path",
                   "trt_mode", "batch_size", "image_size", "data_source",
                   *figures.shown("summary"), "efficiency_pct"]
_ALWAYS = ("model", "device_name", "devices", "mode", "precision", "batch_size")


@dataclasses.dataclass
class Report:
    markdown_path: str
    html_path: str
    plots: list[str]
    sections: list[studies.Section]


def _expected(summary: pd.DataFrame, df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Verdict per summary row (the runner's column when present) and the one-line texts."""
    verdicts, lines = [], []
    for _, row in summary.iterrows():
        same = df["status"] == "ok"
        for col in studies.CONFIG_COLUMNS:
            same &= df[col] == row[col]
        recorded = df.loc[same, "expected_range"]
        verdict, text = er.expected_range(row["device_name"], row["model"], row["mode"],
                                          row["precision"], int(row["devices"]),
                                          float(row["images_per_sec"]),
                                          batch_per_gpu=er.batch_value(row.get("batch_size")))
        recorded = [v for v in recorded if v]
        verdicts.append(recorded[0] if recorded else (verdict or ""))
        if text:
            lines.append(text)
    return verdicts, lines


def summary_frame(df: pd.DataFrame,
                  unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                  ) -> tuple[pd.DataFrame, list[str]]:
    summary = studies.summary_table(df, unstable_threshold_pct)
    if summary.empty:
        return summary, []
    summary["expected_range"], lines = _expected(summary, df)
    return summary, sorted(set(lines))


# What a by-device table's column names beyond the device, precision and XLA, when its rows
# differ in it: every other configuration column but the batch, whose best the cell is (so a
# 32 px run never lands in a 64 px column, nor a SavedModel's in the in-process one).
_PIVOT_SETTINGS = tuple(c for c in figures.CONFIGURATION if c not in (
    "model", "mode", "precision", "xla", "batch_size", "global_batch_size", "num_devices",
    "num_workers", "device_kind", "device_name"))


def _setting(column: str, value: object) -> str:
    """One setting in a column title, as report tables show its cell: with its unit ('64 px'),
    after its name where the cell alone is a bare number ('accum_steps 2')."""
    figure, text = figures.BY_NAME[column], tables.cell(column, value)
    if not text or figure.unit:
        return ("%s %s" % (text, figure.unit)).strip()
    return text if figure.type == "text" else "%s %s" % (column, text)


def pivot_frame(summary: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Model x device: the best images/sec over batch sizes, one column per device and
    precision (the table people publish), and per any other setting its rows differ in
    (_PIVOT_SETTINGS: image size, serving path, ...)."""
    rows = summary[summary["mode"] == mode]
    if rows.empty:
        return pd.DataFrame()
    differ = studies.varying(rows, _PIVOT_SETTINGS, ())
    column = [", ".join(part for part in [
        plots.device_label(r), r["precision"] + (" + XLA" if r["xla"] else "")]
        + [_setting(c, r[c]) for c in differ] if part) for _, r in rows.iterrows()]
    table = rows.assign(column=column).pivot_table(index="model", columns="column",
                                                   values="images_per_sec", aggfunc="max")
    table = table[list(dict.fromkeys(column))]  # columns in order of appearance, not sorted
    table = table.map(lambda v: "" if pd.isna(v) else "{:,.1f}".format(v))
    return table.reset_index().rename(columns={"model": "Model"})


def _plot_groups(section: studies.Section, out_dir: str, limit: int) -> list[str]:
    draw = {"batch_size": plots.batch_size_plot, "scaling": plots.scaling_plot,
            "scaling_explained": plots.scaling_explained_plot,
            "precision": plots.precision_plot}.get(section.slug)
    paths: list[str] = []
    if draw is None or "group" not in section.frame:
        return paths
    for gid, group in section.frame.groupby("group", sort=False):
        if len(paths) >= limit:
            break
        first = group.iloc[0]
        name = plots.safe_name("%s_%s_%s_%s" % (section.slug, first["model"],
                                                plots.device_label(first), gid))
        path = os.path.join(out_dir, "plots", name + ".png")
        draw(group, path)
        paths.append(path)
    return paths


def build_report(paths: Sequence[str], out_dir: str, json_dir: Optional[str] = None,
                 knee_pct: float = 90.0, max_plots: int = 12,
                 title: str = "tfbench report",
                 unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT) -> Report:
    """The report of `paths`: results CSV files, and validate.json files (or directories
    holding one), each a Validation section before the results."""
    validations, csv_paths = validation.split_inputs(paths)
    sections: list[studies.Section] = validation.validation_sections(validations)
    plot_paths: list[str] = []
    if csv_paths:
        plot_paths = _results(csv_paths, sections, out_dir, json_dir, knee_pct, max_plots,
                              unstable_threshold_pct)
    os.makedirs(out_dir, exist_ok=True)
    md_path = os.path.join(out_dir, "report.md")
    html_path = os.path.join(out_dir, "report.html")
    _write_markdown(md_path, title, list(paths), sections, plot_paths, out_dir)
    _write_html(html_path, title, list(paths), sections, plot_paths, out_dir)
    for section in sections:
        tables.write_section_csv(out_dir, section)
    return Report(md_path, html_path, plot_paths, sections)


def _results(csv_paths: Sequence[str], sections: list[studies.Section], out_dir: str,
             json_dir: Optional[str], knee_pct: float, max_plots: int,
             unstable_threshold_pct: float) -> list[str]:
    """The results' sections (appended to `sections`) and plots (their paths)."""
    df = load.read_results(csv_paths)
    os.makedirs(out_dir, exist_ok=True)
    summary, range_lines = summary_frame(df, unstable_threshold_pct)
    if not summary.empty:
        # Every figure a row holds is shown (constant or not); one no row holds is not.
        measured = tuple(c for c in SUMMARY_COLUMNS[SUMMARY_COLUMNS.index("images_per_sec"):]
                         if c in summary and summary[c].replace("", np.nan).notna().any())
        columns = studies.varying(summary, SUMMARY_COLUMNS, _ALWAYS + measured)
        note = "median over repeated rows; ok runs only"
        if (summary["num_runs"] >= 2).any():
            note += ("; spread = (max - min) / median of the repeats, stable as in tfbench "
                     "evaluate (unstable above %g%%)" % unstable_threshold_pct)
        sections.append(studies.Section("results", "Results", summary,
                                        repeats.with_repeats(summary, columns), note))
        for mode, label in (("training", "Training"), ("forward_only", "Inference")):
            pivot = pivot_frame(summary, mode)
            if not pivot.empty and pivot.shape[1] > 1:
                sections.append(studies.Section(
                    "%s_by_device" % mode, "%s images/sec by model and device (best batch)"
                    % label, pivot, list(pivot.columns)))
    sections += studies.study_sections(df, knee_pct=knee_pct,
                                       unstable_threshold_pct=unstable_threshold_pct)
    if range_lines:
        lines = pd.DataFrame({"expected_range": range_lines})
        sections.append(studies.Section("expected_range", "Expected range (published figures)",
                                        lines, ["expected_range"]))
    failed = studies.failed_rows(df)
    if not failed.empty:
        sections.append(studies.Section("failed_runs", "Failed runs", failed,
                                        list(failed.columns)))

    plot_paths: list[str] = []
    for section in sections:
        plot_paths += _plot_groups(section, out_dir, max_plots)
    json_dirs = load.json_dirs_for(csv_paths, json_dir)
    count = 0
    for _, row in studies.ok_rows(df).iterrows():
        if count >= max_plots:
            break
        manifest = load.load_manifest(json_dirs, row["run_id"])
        if not manifest:
            continue
        path = os.path.join(out_dir, "plots", plots.safe_name(
            "timeseries_%s_%s" % (row["model"], row["run_id"])) + ".png")
        if plots.timeseries_plot(manifest, row, path) is not None:
            plot_paths.append(path)
            count += 1
    return plot_paths


def _write_markdown(path, title, csv_paths, sections, plot_paths, out_dir) -> None:
    parts = ["# %s\n" % title, "Sources: %s\n" % ", ".join(csv_paths)]
    parts += [tables.section_markdown(section) for section in sections]
    if plot_paths:
        parts.append("## Plots\n")
        for p in plot_paths:
            rel = os.path.relpath(p, out_dir)
            parts.append("![%s](%s)\n" % (os.path.basename(p), rel))
    with open(path, "w") as handle:
        handle.write("\n".join(parts))


def _write_html(path, title, csv_paths, sections, plot_paths, out_dir) -> None:
    esc = html_lib.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>%s</title>"
             "<style>%s</style></head><body>" % (esc(title), tables.PAGE_CSS),
             "<h1>%s</h1><p>Sources: %s</p>" % (esc(title), esc(", ".join(csv_paths)))]
    parts += [tables.section_html(section) for section in sections]
    if plot_paths:
        parts.append("<h2>Plots</h2>")
        for p in plot_paths:
            parts.append("<div><img src='%s' alt='%s'></div>"
                         % (esc(os.path.relpath(p, out_dir)), esc(os.path.basename(p))))
    parts.append("</body></html>\n")
    with open(path, "w") as handle:
        handle.write("\n".join(parts))
