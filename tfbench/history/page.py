"""`tfbench history page`: the history as a static page, index.html, and a PNG per series in
plots/ (docs/history.md, "Pictures").

Made for a performance engineer to see within seconds which series moved and why: a summary
line and one line per change first (worse first, each with the environment facts that changed
with it), then the plots of the series that changed, then the change list, the fleet with its
outliers, every series' table and the plots of the series that did not change. A plot shows a
series' runs over time, each run's own spread as an error bar where it is known
(series.spread_of), the level (median) of each segment, each change point as a vertical line
labelled with its change and what changed, outliers and failed runs apart.

Tables, page style and figures are the reports' (tfbench.report.tables, tfbench.report.plots);
the page is checked in headless Chromium as the evaluation report is (--browser_check).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import html as html_lib
import os
from typing import Optional, TextIO

import numpy as np
import pandas as pd

from tfbench import errors, figures
from tfbench.history import changes as cp
from tfbench.history import series as hs
from tfbench.history import views

PAGE = "index.html"
PLOTS = "plots"
MAX_LINES = 10          # change lines under the summary; the change list has every one
# A plot's value axis spans at least this fraction of the series' level, so that run-to-run
# noise of 1% looks like noise and a shift of 5% like a step.
MIN_SPAN = 0.10
_FONT_PT = 9.5          # a change label's text, and its lines' height
_LINE_PT = _FONT_PT * 1.25
_COLOR = {"worse": "tab:red", "better": "tab:green", "changed": "tab:purple"}
_ROW_CLASS = {"worse": "status-fail", "better": "status-pass", "changed": "status-warn"}


def _css() -> str:
    """The reports' page style, and beside it: the plots of the series that changed two to a
    row, each change line's verdict in its colour."""
    from tfbench.report import tables
    return (tables.PAGE_CSS
            + ".figures.wide a{flex:0 1 calc(50% - 6px);min-width:420px}"
            # dates and numbers on one line; the series' name (first) and each table's last
            # column (what changed, the outlier's line, the trend) take what is left
            + "table.tfbench td{white-space:nowrap}table.tfbench td:last-child,"
            "table.tfbench td:first-child{white-space:normal;min-width:14em}"
            "table.tfbench td:last-child,table.tfbench th:last-child{text-align:left}"
            + "ul.changes{margin-top:0;padding-left:1.4em}ul.changes li{margin:2px 0}"
            + "b.worse{color:#b00000}b.better{color:#1b6e20}b.changed{color:#6a1b9a}")


@dataclasses.dataclass
class Marked:
    """A change point as the page shows it."""
    change: cp.Change
    direction: str          # worse, better, changed (series.direction)
    what: str               # the environment facts that changed (series.attribution)
    first_run: str
    date: str


@dataclasses.dataclass
class Entry:
    """A series with its change points and outliers, and its plot once drawn."""
    series: hs.Series
    marks: list[Marked]
    outliers: tuple[int, ...]
    plot: Optional[str] = None

    @property
    def rank(self) -> int:
        """0: a change for the worse, 1: another change, 2: none."""
        if any(m.direction == "worse" for m in self.marks):
            return 0
        return 1 if self.marks else 2


def entries(found: list[hs.Series], facts: dict[str, dict[str, str]]) -> list[Entry]:
    """The series in the page's order: those with a change for the worse first, then those
    with another change (each group by its latest change, newest first), then the rest by
    name."""
    out = []
    for s in found:
        seg = s.segment()
        ok = s.ok.reset_index(drop=True)
        marks = [Marked(c, hs.direction(s.figure, c.pct), hs.attribution(s, c, facts),
                        str(ok.iloc[c.index]["run_id"]),
                        str(ok.iloc[c.index]["timestamp"])[:10]) for c in seg.changes]
        out.append(Entry(s, marks, seg.outliers))
    latest = {id(e): max((m.date for m in e.marks), default="") for e in out}
    out.sort(key=lambda e: e.series.name)
    out.sort(key=lambda e: latest[id(e)], reverse=True)
    out.sort(key=lambda e: e.rank)
    return out


def _label(figure: str) -> str:
    """The value axis: the figure's title with its unit ('p50 latency (ms)', 'Images/sec')."""
    f = figures.BY_NAME[figure]
    title = f.title or f.name
    return title if not f.unit or f.unit.lower() in title.lower() else "%s (%s)" % (title, f.unit)


def _levels(values: np.ndarray, seg_changes: list[Marked], outliers: tuple[int, ...]
            ) -> list[tuple[int, int, float]]:
    """(first run, last run, median) of each segment, outliers left out as the changes leave
    them out."""
    starts = [0] + [m.change.index for m in seg_changes] + [len(values)]
    if seg_changes:
        medians = [seg_changes[0].change.before] + [m.change.after for m in seg_changes]
    else:
        kept = np.setdiff1d(np.arange(len(values)), outliers)
        medians = [float(np.median(values[kept] if kept.size else values))]
    return [(lo, hi - 1, level) for lo, hi, level in zip(starts, starts[1:], medians) if hi > lo]


def series_plot(entry: Entry, path: str):
    """One series over time: its runs (error bars: each run's own spread, where known), each
    segment's level, the change points labelled, outliers and failed runs marked."""
    from matplotlib import dates as mdates
    from matplotlib import transforms

    from tfbench.report import plots
    s = entry.series
    ok = s.ok.reset_index(drop=True)
    when = pd.to_datetime(ok["when"], utc=True).dt.tz_convert(None).to_numpy()
    values = np.asarray(s.values, dtype=float)
    spreads = np.array([np.nan if v is None else v for v in
                        hs.spreads(ok, s.figure)], dtype=float)
    fig = plots.figure()
    ax = fig.add_subplot(1, 1, 1)
    normal = np.setdiff1d(np.arange(len(values)), entry.outliers)
    if len(normal):
        known = not np.isnan(spreads[normal]).all()
        ax.errorbar(when[normal], values[normal],
                    yerr=np.nan_to_num(values[normal] * spreads[normal]) if known else None,
                    fmt="o", markersize=4, color="tab:blue", ecolor="#9ec5e8", elinewidth=1,
                    capsize=2, zorder=3,
                    label="run (bar: its repeats' or steps' spread)" if known else "run")
    if entry.outliers:
        pick = list(entry.outliers)
        ax.plot(when[pick], values[pick], "X", color="tab:orange", markersize=10,
                markeredgecolor="black", markeredgewidth=0.6, zorder=4, linestyle="none",
                label="outlier (one run; not a change)")
    for i, (lo, hi, level) in enumerate(_levels(values, entry.marks, entry.outliers)
                                         if len(values) else []):
        ax.hlines(level, when[lo], when[hi], colors="0.3", linestyles="--", linewidth=1.3,
                  zorder=2, label="level (median of its runs)" if i == 0 else None)
    failed = s.rows[s.rows["status"] != "ok"]
    if len(failed):
        at = pd.to_datetime(failed["when"], utc=True).dt.tz_convert(None).to_numpy()
        ax.plot(at, np.full(len(at), 0.03), "v", color="0.45", markersize=7, linestyle="none",
                transform=transforms.blended_transform_factory(ax.transData, ax.transAxes),
                clip_on=False, label="failed run (no value)")
    times = np.concatenate([when, pd.to_datetime(failed["when"], utc=True).dt.tz_convert(None)
                            .to_numpy()])
    if len(times) and times.min() == times.max():       # one day's runs: a day either side
        ax.set_xlim(times.min() - np.timedelta64(1, "D"), times.max() + np.timedelta64(1, "D"))
    locator = mdates.AutoDateLocator(maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("Run date (UTC)")
    ax.set_ylabel(_label(s.figure))
    ax.grid(True, alpha=0.3)
    # Under the axes, where it hides no run.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, fontsize=7.5,
              frameon=False, handletextpad=0.3, columnspacing=1.2)
    level, change = s.current()
    ax.set_title("%s\n%d runs%s; %s%s" % (
        s.name, len(s.rows), " (%d failed)" % s.failed if s.failed else "",
        "level %s" % views.value_text(level) if level is not None else "no value",
        " (%s against the level before)" % views.pct_text(change)
        if change is not None else ""), fontsize=9.5)
    labels = ["%s %s\n%s" % (m.direction, views.pct_text(m.change.pct), m.what.replace("; ", "\n"))
              for m in entry.marks]
    # The change labels stack down from the top, each under the one before, in room kept
    # above the runs for them.
    heights = [(label.count("\n") + 1) * _LINE_PT + 10 for label in labels]
    fig.tight_layout()
    axes_pt = ax.get_position().height * fig.get_figheight() * 72
    ax.set_ylim(*_value_range(values, spreads, min(0.7, sum(heights) / axes_pt)))
    if len(when):
        first, last = when.min(), when.max()
        for i, (mark, label) in enumerate(zip(entry.marks, labels)):
            at = when[mark.change.index - 1] + (
                when[mark.change.index] - when[mark.change.index - 1]) / 2
            color = _COLOR[mark.direction]
            ax.axvline(at, color=color, linewidth=2, zorder=1)
            right = last > first and (at - first) / (last - first) > 0.6
            ax.annotate(label, xy=(at, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(-5 if right else 5, -5 - sum(heights[:i])),
                        textcoords="offset points", ha="right" if right else "left", va="top",
                        fontsize=_FONT_PT, color=color, zorder=5,
                        bbox={"boxstyle": "round,pad=0.3", "facecolor": "white",
                              "edgecolor": color, "alpha": 0.92})
    return plots.save(fig, path)


def _value_range(values: np.ndarray, spreads: np.ndarray, labels: float
                 ) -> tuple[float, float]:
    """The value axis: every run and its error bar, at least MIN_SPAN of the level, and the
    fraction `labels` of the axis above them for the change labels."""
    if not len(values):
        return 0.0, 1.0
    bars = np.nan_to_num(values * spreads)
    low, high = float(np.min(values - bars)), float(np.max(values + bars))
    centre = float(np.median(values))
    need = MIN_SPAN * abs(centre) if centre else 1.0
    if high - low < need:
        middle = (high + low) / 2
        low, high = middle - need / 2, middle + need / 2
    low, high = low - 0.08 * (high - low), high + 0.05 * (high - low)
    return low, low + (high - low) / (1.0 - labels)


# --- the page --------------------------------------------------------------------------------
def _change_line(entry: Entry, mark: Marked) -> str:
    esc = html_lib.escape
    return ("<li><b class='%s'>%s %s</b> %s, from %s (run %s): %s</li>" % (
        mark.direction, esc(mark.direction), esc(views.pct_text(mark.change.pct)),
        esc(entry.series.name), esc(mark.date), esc(mark.first_run), esc(mark.what)))


def summary(ordered: list[Entry], fleet_outliers: int) -> str:
    """'2 of 14 series changed; 1 worse, 1 better; 1 fleet outlier'."""
    changed = [e for e in ordered if e.marks]
    ways = [m.direction for e in changed for m in e.marks]
    parts = ["%d of %d series changed" % (len(changed), len(ordered))]
    counts = ["%d %s" % (ways.count(w), w) for w in ("worse", "better", "changed")
              if ways.count(w)]
    if counts:
        parts.append(", ".join(counts))
    if fleet_outliers:
        parts.append("%d fleet outlier%s" % (fleet_outliers, "" if fleet_outliers == 1 else "s"))
    return "; ".join(parts)


def _fleet_sections(frame: pd.DataFrame, figure: str, threshold_pct: float):
    """The fleet tables of configurations run on two hosts or more, outliers highlighted (by
    GPU only where it tells more than by host: a host's single-GPU results on several of its
    GPUs); and the number of outliers by host."""
    from tfbench.report import studies
    sections, outliers, seen = [], 0, None
    for by, what in (("host", "host"), ("gpu", "GPU (single-GPU results, by UUID)")):
        rows = [r for r in hs.fleet(frame, figure, by) if r.members > 1]
        same = sorted((r.config, r.gpu_model, r.latest) for r in rows)
        if not rows or same == seen:
            continue
        seen = same
        table = views.fleet_table(rows, threshold_pct, by)
        far = [bool(v) for v in table["Outlier"]]
        outliers += sum(far) if by == "host" else 0
        sections.append(studies.Section(
            "fleet_" + by, "Fleet by %s" % what, table,
            [c for c in table.columns if c != "GPU"],   # the configuration names the GPU
            "Each member's latest value against the median of every member's latest value; "
            "named when further than %g%% from it. Configurations run on one %s only are left "
            "out." % (threshold_pct, "host" if by == "host" else "GPU"),
            row_classes=["status-warn" if f else "" for f in far]))
    return sections, outliers


def _filters(args: argparse.Namespace) -> str:
    parts = ["%s %s" % (name, value) for name, value in (
        ("model", args.model), ("host", args.host), ("GPU", args.gpu), ("from", args.after),
        ("before", args.before)) if value]
    return ", ".join(parts) if parts else "none"


def _figures_div(paths: list[str], out_dir: str, wide: bool) -> str:
    esc = html_lib.escape
    links = []
    for p in paths:
        rel = esc(os.path.relpath(p, out_dir))
        links.append("<a href='%s'><img src='%s' alt='%s'></a>" % (rel, rel,
                                                                  esc(os.path.basename(p))))
    return "<div class='figures%s'>%s</div>" % (" wide" if wide else "", "".join(links))


def html_page(title: str, head: list[str], line: str, ordered: list[Entry],
              sections_changed: list, sections_rest: list, out_dir: str, max_lines: int) -> str:
    """The page: summary line and change lines, plots of the series that changed, the tables,
    plots of the others."""
    from tfbench.report import tables
    esc = html_lib.escape
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             "<title>%s</title><style>%s</style></head><body>" % (esc(title), _css()),
             "<h1>%s</h1><p class='status-line'>%s</p>" % (esc(title), esc(line))]
    lines = [(e, m) for e in ordered for m in e.marks]
    lines.sort(key=lambda em: em[1].direction != "worse")   # stable: the series' order
    if lines:
        parts.append("<ul class='changes'>%s%s</ul>" % (
            "".join(_change_line(e, m) for e, m in lines[:max_lines]),
            "<li>... and %d more in the change points below</li>" % (len(lines) - max_lines)
            if len(lines) > max_lines else ""))
    parts.append("<p class='note'>%s</p>" % "<br>".join(map(esc, head)))
    moved = [e.plot for e in ordered if e.marks and e.plot]
    if moved:
        parts.append("<h2>Series that changed</h2>" + _figures_div(moved, out_dir, True))
    parts += [tables.section_html(s) for s in sections_changed]
    parts += [tables.section_html(s) for s in sections_rest]
    still = [e.plot for e in ordered if not e.marks and e.plot]
    if still:
        parts.append("<h2>Series without a change</h2>" + _figures_div(still, out_dir, False))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def main(store, args: argparse.Namespace, out: TextIO) -> int:
    """Writes index.html and plots/*.png under args.out_dir; prints one line saying where."""
    from tfbench.report import studies
    figure = args.figure
    hs.check_figure(figure)
    if args.max_plots < 0:
        raise errors.UsageError("--max_plots=%d: give 0 or more" % args.max_plots)
    frame = hs.filtered(store.frame(columns=hs.columns_for(args.figure)), args.model, args.host,
                        args.gpu, args.after, args.before)
    found = hs.build(frame, figure)
    facts = store.environment(hs.runs_around_changes(found))
    ordered = entries(found, facts)
    out_dir = args.out_dir
    os.makedirs(os.path.join(out_dir, PLOTS), exist_ok=True)
    for e in ordered[:args.max_plots]:     # those that changed first
        e.plot = os.path.join(out_dir, PLOTS, "%s_%s.png" % (_plot_stem(e.series.name),
                                                            e.series.key[:8]))
        series_plot(e, e.plot)
    fleet, fleet_outliers = _fleet_sections(frame, figure, args.threshold_pct)
    changes, outliers, _ = views.changes_table([e.series for e in ordered], facts)
    sections_changed = []
    if not changes.empty:
        rank = changes["Direction"].map(lambda d: d != "worse")
        changes = changes.assign(_r=rank).sort_values("_r", kind="stable").drop(columns="_r")
        changes["Date"] = changes["Date"].map(_minute)
        first = ["Series", "Change", "Direction"]
        sections_changed.append(studies.Section(
            "changes", "Change points", changes,
            first + [c for c in changes.columns if c not in first],
            "A change point is a sustained shift of the level (E-Divisive means with a t-test, "
            "docs/history.md), reported with the medians before and after it and the "
            "environment facts that differ between the runs on either side.",
            row_classes=[_ROW_CLASS.get(d, "") for d in changes["Direction"]]))
    sections_changed += fleet
    sections_rest = []
    if not outliers.empty:
        outliers["Date"] = outliers["Date"].map(_minute)
        sections_rest.append(studies.Section(
            "outliers", "Outliers: single runs far from their level (not changes)", outliers,
            list(outliers.columns)))
    listing = views.list_table([e.series for e in ordered])
    if not listing.empty:
        sections_rest.append(studies.Section(
            "series", "Every series (those that changed first)", listing, list(listing.columns),
            row_classes=[_ROW_CLASS["worse"] if e.rank == 0 else
                         _ROW_CLASS["better"] if e.rank == 1 else "" for e in ordered]))
    line = summary(ordered, fleet_outliers) if ordered else "no results%s" % (
        " match the filters" if _filters(args) != "none" else " yet")
    drawn = sum(1 for e in ordered if e.plot)
    head = ["Store: %s" % store.where(),
            "Figure: %s (%s is better)" % (_label(figure), figures.BY_NAME[figure].better
                                           or "no direction declared"),
            "Filters: %s" % _filters(args),
            "Plots: %d of %d series%s" % (drawn, len(ordered), "" if drawn == len(ordered)
                                          else " (those that changed first; --max_plots)"),
            "Written %s" % datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC")]
    path = os.path.join(out_dir, PAGE)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(html_page("tfbench history", head, line, ordered, sections_changed,
                               sections_rest, out_dir, MAX_LINES))
    out.write("History page: %s (%s; %d plots)\n" % (os.path.abspath(path), line, drawn))
    if args.browser_check:
        from tfbench.report import browser_check
        passed, text = browser_check.check_report(path)
        out.write(text + "\n")
        if passed is False:
            return errors.EXIT_RUN_ERROR
    return errors.EXIT_OK


def _minute(stamp: str) -> str:
    """'2026-10-16 09:30' from an ISO time."""
    return stamp[:16].replace("T", " ")


def _plot_stem(name: str) -> str:
    from tfbench.report import plots
    return plots.safe_name(name.replace(" @ ", "_"))[:100]

