"""Rendering study frames as readable tables: Markdown and HTML (pandas: to_markdown, which uses
`tabulate`, and to_html), CSV and aligned console text (rich).

Column titles carry units; NaN renders as an empty cell. Cells are formatted here once
(display_frame) and every format prints those strings as they are: numbers are not re-parsed,
so '1.00' stays '1.00'. Columns of numbers are right-aligned.
"""

from __future__ import annotations

import io
import math
import re
from typing import Callable, Optional

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from tfbench import figures

Style = tuple[str, Callable[[object], str]]


def _num(fmt: str) -> Callable[[object], str]:
    return lambda v: fmt.format(v)


def _bool(v: object) -> str:
    return "yes" if bool(v) else ""


_INT = _num("{:.0f}")


def figure_style(figure: figures.Figure) -> Style:
    """A figure's column in a report table: its declared title (its name without one) and how
    a cell shows it (Figure.format; integers whole, text as it is)."""
    title, fmt = figure.title or figure.name, figure.format
    if figure.type == "bool" and "|" in fmt:
        yes, no = fmt.split("|")
        return title, lambda v: yes if int(v) else no
    if figure.type == "text" and fmt.startswith("empty="):
        empty = fmt[len("empty="):]
        return title, lambda v: str(v) or empty
    if figure.type == "text":
        return title, (lambda v: str(v).split(";")[0]) if fmt == "first clause" else str
    if fmt:
        return title, _num(fmt)
    return title, _INT if figure.type == "int" else str


# Columns a report computes (no run writes them): title and formatter.
REPORT_COLUMNS: dict[str, Style] = {
    "execution": ("Execution", str),
    "execution_mode": ("Execution mode", str),
    "devices": ("Devices", _INT),
    "scaling": ("Scaling", str),
    "runs": ("Runs", _INT),
    "images_per_sec_per_device": ("Images/sec per device", _num("{:,.1f}")),
    "speedup": ("Speed-up (x)", _num("{:.2f}")),
    "efficiency_pct": ("Scaling efficiency (%)", _num("{:.1f}")),
    "pct_of_best": ("% of best", _num("{:.1f}")),
    "knee": ("Knee", _bool),
    "knee_pct": ("Knee at (% of best)", _num("{:g}")),
    "speedup_vs_fp32": ("Speed-up vs fp32 (x)", _num("{:.2f}")),
    "pixels_rel": ("Pixels (rel.)", _num("{:.2f}")),
    "images_per_sec_rel": ("Images/sec (rel.)", _num("{:.3f}")),
    "peak_mem_rel": ("Peak memory (rel.)", _num("{:.3f}")),
    "max_batch_size": ("Max batch/device", str),
    "name": ("Point", str),
    "seconds": ("Time (s)", _num("{:.1f}")),
    "probes": ("Probes (batch:status)", str),
    "exit_code": ("Exit code", str),
    "hosts": ("Hosts", _INT),                      # tfbench launch --sweep_hosts
    "interconnect": ("Interconnect", str),
    # --explain_scaling (tfbench.report.studies.explain_table)
    "explained_by": ("One device from", str),
    "step_ms": ("Step (ms)", _num("{:.2f}")),
    "reference_ms": ("One-device step (ms)", _num("{:.2f}")),
    "lost_pts_compute": ("Lost: slowest device (pts)", _num("{:.1f}")),
    "lost_pts_input": ("Lost: input wait (pts)", _num("{:.1f}")),
    "lost_pts_allreduce": ("Lost: all-reduce (pts)", _num("{:.1f}")),
    "lost_pts_unexplained": ("Unexplained (pts)", _num("{:.1f}")),
    # compare
    "a_images_per_sec": ("A images/sec", _num("{:,.1f}")),
    "b_images_per_sec": ("B images/sec", _num("{:,.1f}")),
    "a_range": ("A spread", str),
    "b_range": ("B spread", str),
    "ratio": ("B/A images/sec", _num("{:.3f}")),
    "verdict": ("Verdict", str),
    "basis": ("Spread from", str),
    "a_status": ("A status", str),
    "b_status": ("B status", str),
    "ratio_latency_ms_p50": ("B/A p50 latency", _num("{:.3f}")),
    "ratio_latency_ms_p99": ("B/A p99 latency", _num("{:.3f}")),
    "ratio_peak_mem_gb": ("B/A peak memory", _num("{:.3f}")),
    "ratio_power_w_mean": ("B/A power", _num("{:.3f}")),
    "ratio_images_per_sec_per_watt": ("B/A images/sec per W", _num("{:.3f}")),
    # evaluate (tfbench.report.evaluation): figures of the training or the inference run
    "device_label": ("Device", str),
    "kind": ("Run", str),
    "train_images_per_sec": ("Training images/sec", _num("{:,.1f}")),
    "infer_latency_ms_p50": ("Inference p50 (ms, batch 1)", _num("{:.2f}")),
    "infer_latency_ms_p99": ("Inference p99 (ms, batch 1)", _num("{:.2f}")),
    "train_peak_mem_gb": ("Peak training memory (GiB, largest device)", _num("{:.2f}")),
    "train_power_w_mean": ("Mean training power (W, all GPUs)", _num("{:.0f}")),
    "train_images_per_sec_per_watt": ("Training images/sec per W", _num("{:.2f}")),
    "train_temp_c_max": ("Max training temperature (°C, hottest GPU)", _num("{:.0f}")),
    "stable": ("Stable?", str),
    # tfbench validate's verdict rows (tfbench.report.validation)
    "host": ("Host", str),
    "subject": ("Subject", str),
    "check": ("Check", str),
    "reason": ("Reason", str),
    "figure": ("Figure", str),
    "expectation": ("Expectation", str),
}
# Column -> (title, formatter): the figures that declare a title, then the report's own columns.
# A column not listed keeps its name and str().
COLUMN_STYLE: dict[str, Style] = {
    **{f.name: figure_style(f) for f in figures.CSV_FIGURES if f.title}, **REPORT_COLUMNS}


def cell(column: str, value: object) -> str:
    """`value` as a report table shows it in `column` (empty for a missing value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    try:
        if pd.isna(value):
            return ""
    except (TypeError, ValueError):
        pass
    fmt = COLUMN_STYLE.get(column, (column, str))[1]
    try:
        return fmt(value)
    except (TypeError, ValueError):
        return str(value)


def display_frame(df: pd.DataFrame, columns: Optional[list[str]] = None) -> pd.DataFrame:
    """Strings with titled columns, ready to print."""
    columns = [c for c in (columns or list(df.columns)) if c in df.columns]
    out = pd.DataFrame({COLUMN_STYLE.get(c, (c, str))[0]: [cell(c, v) for v in df[c]]
                        for c in columns})
    return out


_NUMBER = re.compile(r"^[-+]?[0-9][0-9,]*(\.[0-9]+)?$")


def _aligns(shown: pd.DataFrame) -> list[str]:
    """'right' for a column of numbers (every non-empty cell one), else 'left'."""
    return ["right" if any(shown[c]) and all(_NUMBER.match(v) for v in shown[c] if v)
            else "left" for c in shown.columns]


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(df: pd.DataFrame, columns: Optional[list[str]] = None) -> str:
    shown = display_frame(df, columns)
    if shown.columns.empty:
        return ""
    escaped = shown.apply(lambda column: column.map(_escape_md)).rename(columns=_escape_md)
    # disable_numparse: tabulate would reformat '1.00' as '1' and '0.062' as '0.062'.
    return escaped.to_markdown(index=False, tablefmt="pipe", disable_numparse=True,
                               colalign=_aligns(shown)) + "\n"


# The style of report pages (tfbench report, tfbench evaluate), made to be read at 1,280 px:
# headers wrap at spaces; tables of figures break their cells only at spaces and never in the
# first column (model names); tables of text ("text") break anywhere rather than widen the page;
# tables of many columns ("dense", "denser" from DENSER_COLUMNS) are set smaller. tfbench.report.browser_check checks it.
PAGE_CSS = (
    "body{font-family:sans-serif;margin:16px;font-size:15px;line-height:1.35}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:1.4em}h3{font-size:16px}"
    "table.tfbench{border-collapse:collapse;margin-bottom:6px;font-size:13px;max-width:100%}"
    "table.tfbench td,table.tfbench th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
    "table.tfbench th{background:#f0f0f0;vertical-align:bottom;font-weight:600}"
    "table.tfbench td:first-child,table.tfbench th:first-child{text-align:left}"
    "table.numbers td:first-child{white-space:nowrap}"
    "table.text td{overflow-wrap:anywhere;text-align:left}"
    "table.dense{font-size:12px}table.dense td,table.dense th{padding:2px 4px}"
    "table.denser{font-size:11px}table.denser td,table.denser th{padding:2px 3px}"
    ".note{color:#444;font-size:13px;max-width:1200px}"
    # a verdict row (tfbench validate) by its status; the status line above its table
    "tr.status-fail td{background:#f8d7da}tr.status-warn td{background:#fff3cd}"
    "tr.status-pass td{background:#e2f0d9}tr.status-skip td{background:#eeeeee;color:#555}"
    "p.status-line{font-weight:600;font-size:16px}"
    ".figures{display:flex;flex-wrap:wrap;gap:6px}"
    ".figures a{flex:0 1 calc(33.3% - 6px);min-width:300px}"
    ".figures img{width:100%;height:auto;border:1px solid #ddd}"
    "img{max-width:100%}")
DENSE_COLUMNS = 15
DENSER_COLUMNS = 18   # e.g. the report's Results with repeats, latency, memory and power


def html(df: pd.DataFrame, columns: Optional[list[str]] = None, kind: str = "numbers",
         row_classes: Optional[list[str]] = None) -> str:
    """An HTML table in the page style (PAGE_CSS); kind: numbers (figures) or text;
    row_classes: a class for each row's <tr>."""
    shown = display_frame(df, columns)
    width = len(shown.columns)
    classes = ["tfbench", kind] + (["dense"] if width >= DENSE_COLUMNS else []) + (
        ["denser"] if width >= DENSER_COLUMNS else [])
    if row_classes is None:
        return shown.to_html(index=False, border=0, classes=classes, escape=True)
    import html as html_lib
    head = "".join("<th>%s</th>" % html_lib.escape(str(c)) for c in shown.columns)
    body = "".join("<tr class='%s'>%s</tr>" % (html_lib.escape(cls), "".join(
        "<td>%s</td>" % html_lib.escape(cell) for cell in row))
        for cls, row in zip(row_classes, shown.itertuples(index=False)))
    return "<table class='%s'><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (
        " ".join(classes), head, body)


# Plain ASCII: a rule of dashes under the header, columns apart by spaces (files, pipes, any
# locale).
_RULE = box.Box("    \n"
                "    \n"
                " -  \n"
                "    \n"
                "    \n"
                "    \n"
                "    \n"
                "    \n", ascii=True)


# What rich changes as it prints a cell (control characters, ':name:' emoji codes): a table
# with one is laid out by rich itself, any other by _plain, rich's layout at a fraction of its
# cost (1,000 rows of `tfbench history` take rich most of a second).
_NOT_PLAIN = re.compile(r"[\x00-\x1f\x7f-\x9f]|:\S*?:")
_RICH_WIDTH = 100000


def text(df: pd.DataFrame, columns: Optional[list[str]] = None) -> str:
    """Aligned plain text (rich's table layout, no colour, never wrapped or cut)."""
    shown = display_frame(df, columns)
    if shown.columns.empty:
        return ""
    titles, aligns = [str(t) for t in shown.columns], _aligns(shown)
    rows = [[cell.replace("\n", " ") for cell in row] for row in shown.itertuples(index=False)]
    plain = _plain(titles, rows, aligns)
    if plain is not None:
        return plain
    table = Table(box=_RULE, show_edge=False, pad_edge=False, collapse_padding=True,
                  header_style="", highlight=False)
    for title, align in zip(titles, aligns):
        table.add_column(title, justify=align, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=_RICH_WIDTH, color_system=None, force_terminal=False,
            highlight=False, markup=False).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def _plain(titles: list[str], rows: list[list[str]], aligns: list[str]) -> Optional[str]:
    """The table as text() lays it out with rich (`_RULE`, no edge, padding collapsed: each
    column as wide as its widest cell, two spaces apart; a rule of dashes one wider, but the
    last column's; a right-aligned cell's trailing spaces dropped, as rich does), or None
    where rich would change a cell or cut a line (then rich lays it out)."""
    from rich.cells import cell_len
    cells = [titles] + rows
    if any(_NOT_PLAIN.search(c) for row in cells for c in row):
        return None
    widths = [max(cell_len(row[i]) for row in cells) for i in range(len(titles))]
    if min(widths) == 0 or sum(widths) + 2 * len(widths) >= _RICH_WIDTH:
        return None

    def line(row: list[str]) -> str:
        out = []
        for cell, width, align in zip(row, widths, aligns):
            if align == "right":
                cell = cell.rstrip()
                out.append(" " * (width - cell_len(cell)) + cell)
            else:
                out.append(cell + " " * (width - cell_len(cell)))
        return "  ".join(out).rstrip()
    rule = " ".join("-" * (w + 1) for w in widths[:-1]) + (" " if len(widths) > 1 else "") \
        + "-" * widths[-1]
    return "\n".join([line(titles), rule] + [line(r) for r in rows]) + "\n"


def parse_markdown(text_: str) -> list[dict[str, str]]:
    """Rows of the first Markdown table in `text_` (used by tests and by anyone post-processing
    a report)."""
    rows: list[dict[str, str]] = []
    header: Optional[list[str]] = None
    for line in text_.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            if header is not None:
                break
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line[1:-1])]
        if header is None:
            header = cells
        elif set(line) <= set("|-: "):
            continue
        else:
            rows.append(dict(zip(header, cells)))
    return rows


# Sections of text lines (messages, versions): their cells may break anywhere rather than widen
# the page.
TEXT_SECTIONS = ("expected_range", "environment", "failed_runs", "validation")


def section_markdown(section) -> str:
    """A study Section (report.studies) as `## title`, its table and its note."""
    body = markdown(section.frame, section.columns) or "(no rows)\n"
    intro = "**%s**\n\n" % section.intro if section.intro else ""
    return "## %s\n\n%s%s%s" % (section.title, intro, body,
                                 "\n%s\n" % section.note if section.note else "")


def section_html(section) -> str:
    """A study Section as <h2>, its table (text or numbers, by TEXT_SECTIONS) and its note."""
    import html as html_lib
    # validation_2, ...: one of several sections of a kind
    kind = "text" if section.slug.rstrip("0123456789_") in TEXT_SECTIONS else "numbers"
    text = "<h2>%s</h2>" % html_lib.escape(section.title)
    if section.intro:
        text += "<p class='status-line'>%s</p>" % html_lib.escape(section.intro)
    text += html(section.frame, section.columns, kind, section.row_classes)
    if section.note:
        text += "<p class='note'>%s</p>" % html_lib.escape(section.note)
    return text


def write_section_csv(out_dir: str, section) -> None:
    """<out_dir>/<slug>.csv: the section's shown columns, unformatted."""
    import os
    shown = [c for c in section.columns if c in section.frame.columns]
    section.frame[shown].to_csv(os.path.join(out_dir, section.slug + ".csv"), index=False)


def write_sections(out_dir: str, sections, title: str) -> str:
    """Writes each section as <slug>.csv and <slug>.md, plus summary.md; returns the Markdown."""
    import os
    os.makedirs(out_dir, exist_ok=True)
    parts = ["# %s\n" % title]
    for section in sections:
        write_section_csv(out_dir, section)
        text_ = section_markdown(section)
        with open(os.path.join(out_dir, section.slug + ".md"), "w") as handle:
            handle.write(text_)
        parts.append(text_)
    summary = "\n".join(parts)
    with open(os.path.join(out_dir, "summary.md"), "w") as handle:
        handle.write(summary)
    return summary
