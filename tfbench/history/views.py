"""What `tfbench history`, `history changes` and `history fleet` print, from the store: tables
in text, Markdown or CSV (`history page` draws them, tfbench.history.page). Exit codes:
docs/history.md."""

from __future__ import annotations

import argparse
import math
from typing import Any, Mapping, Optional, TextIO

import pandas as pd

from tfbench import errors
from tfbench.history import series as hs
from tfbench.history.store import Store


def value_text(value: Any, digits: int = 4) -> str:
    """A figure's value as the history's tables and page show it ('' for none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return "{:,.1f}".format(value) if abs(value) >= 100 else "{:.{}g}".format(value, digits)
    return str(value)


def pct_text(value: Any) -> str:
    """A change in percent, signed ('+3.1%'; '' for none)."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else "%+.1f%%" % value


def _write(out: TextIO, frame: pd.DataFrame, fmt: str, empty: str) -> None:
    from tfbench.report import tables
    if frame.empty:
        out.write(empty + "\n")
    elif fmt == "csv":
        out.write(frame.to_csv(index=False))
    elif fmt == "markdown":
        out.write(tables.markdown(frame, list(frame.columns)))
    else:
        out.write(tables.text(frame, list(frame.columns)))


def _results(store: Store, args: argparse.Namespace, columns: list[str]) -> pd.DataFrame:
    """The results the filters keep, with `columns`."""
    return hs.filtered(store.frame(columns=columns), args.model, args.host, args.gpu,
                       args.after, args.before)


def list_table(found: list[hs.Series],
               levels: Optional[Mapping[str, tuple[Optional[float], Optional[float]]]] = None
               ) -> pd.DataFrame:
    """The series' table; `levels`: series key -> Series.current() where already known
    (tfbench.history.levels), else each series finds its own."""
    rows = []
    for s in found:
        level, change = levels[s.key] if levels is not None else s.current()
        values, stamps = s.values, s.timestamps
        rows.append({
            "Series": s.name, "Runs": str(s.runs), "Failed": str(s.failed),
            "First": str(stamps[0])[:10], "Last": str(stamps[-1])[:10],
            "Last value": value_text(values[-1]) if values else "",
            "Current level (median)": value_text(level),
            "Change vs previous level": pct_text(change),
            "Trend": hs.sparkline(values)})
    return pd.DataFrame(rows)


def changes_table(found: list[hs.Series], facts: dict[str, dict[str, str]],
                  since: Any = None) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """(the change points, the outliers, whether a regression starts on or after `since`)."""
    rows, outliers, regression = [], [], False
    for s in found:
        seg = s.segment()
        if not (seg.changes or seg.outliers):
            continue
        ok = s.ok.reset_index(drop=True)
        for c in seg.changes:
            first = ok.iloc[c.index]
            when = first["when"]
            if since is not None and not (pd.notna(when) and when >= since):
                continue
            way = hs.direction(s.figure, c.pct)
            regression |= way == "worse"
            rows.append({
                "Series": s.name, "First run after": str(first["run_id"]),
                "Date": str(first["timestamp"])[:19],
                "Before (median)": value_text(c.before), "After (median)": value_text(c.after),
                "Change": pct_text(c.pct), "Direction": way, "p": "%.2g" % c.p_value,
                "Runs before/after": "%d/%d" % (c.runs_before, c.runs_after),
                "What changed": hs.attribution(s, c, facts)})
        for i in seg.outliers:
            run = ok.iloc[i]
            if since is not None and not (pd.notna(run["when"]) and run["when"] >= since):
                continue
            outliers.append({"Series": s.name, "Run": str(run["run_id"]),
                             "Date": str(run["timestamp"])[:19],
                             "Value": value_text(float(run[s.figure]))})
    return pd.DataFrame(rows), pd.DataFrame(outliers), regression


def fleet_table(rows: list[hs.FleetRow], threshold_pct: float, by: str) -> pd.DataFrame:
    out = []
    for r in sorted(rows, key=lambda r: (r.config, r.gpu_model, r.pct)):
        far = not math.isnan(r.pct) and abs(r.pct) > threshold_pct
        out.append({"Configuration": r.config, "GPU": r.gpu_model,
                    ("Host" if by == "host" else "GPU UUID"): r.member,
                    "Latest": value_text(r.latest), "Fleet median": value_text(r.median),
                    "Members": str(r.members), "vs median": pct_text(r.pct),
                    "Outlier": ("%s: %.1f%% %s the median of %d %s" % (
                        r.member, abs(r.pct), "below" if r.pct < 0 else "above", r.members,
                        "hosts" if by == "host" else "GPUs"))
                    if far else ""})
    return pd.DataFrame(out)


def main(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    figure = args.figure
    since = hs._date(getattr(args, "since", None), "--since")
    hs.check_figure(figure)
    label = "%s (%s)" % (figure, hs.figures.BY_NAME[figure].unit or "value")
    if args.command == "list":
        return _list(store, args, label, out)
    frame = _results(store, args, hs.columns_for(figure))
    if args.command == "fleet":
        for by in ("host", "gpu"):
            rows = hs.fleet(frame, figure, by)
            if by == "gpu" and not rows:
                continue
            if args.format != "csv":
                out.write("Fleet by %s, %s: each member's latest value against the median of "
                          "the members' latest values\n" % (by, label))
            _write(out, fleet_table(rows, args.threshold_pct, by), args.format,
                   "no results with a value of %s" % figure)
        return errors.EXIT_OK
    found = hs.build(frame, figure)
    if args.command == "changes":
        facts = store.environment(hs.runs_around_changes(found))
        table, outliers, regression = changes_table(found, facts, since)
        if args.format != "csv":
            out.write("Change points of %s, in %d series%s\n" % (
                label, len(found), " since %s" % since.isoformat()[:19] if since is not None
                else ""))
        _write(out, table, args.format, "no change points")
        if not outliers.empty and args.format != "csv":
            out.write("\nOutliers (single runs far from their level; not changes):\n")
            _write(out, outliers, args.format, "")
        if regression and since is not None:
            return errors.EXIT_REGRESSION
    return errors.EXIT_OK


def listing(store: Store, args: argparse.Namespace) -> tuple[list[hs.Series], dict]:
    """The series the listing shows and their current levels: every result's few cells the
    table needs, each series' name from its latest result alone, the levels the store keeps
    for series whose results did not change (found and kept for the others, unless the listing
    is cut in time: its series are not the whole ones)."""
    from tfbench.history import levels
    frame = _results(store, args, hs.list_columns(args.figure, args.model, args.host, args.gpu))
    found = hs.build(frame, args.figure,
                     details=lambda ids: store.frame(columns=hs.NAME_COLUMNS, ids=ids))
    return found, levels.current(store, found, save=not (args.after or args.before))


def keep_levels(store: Store, figure: str = "images_per_sec") -> int:
    """Finds and keeps the current level of every series of `figure` that lacks a kept one, as
    the first listing would (after an import, so that the listing reads them); the series."""
    args = argparse.Namespace(figure=figure, model=None, host=None, gpu=None, after=None,
                              before=None)
    return len(listing(store, args)[0])


def _list(store: Store, args: argparse.Namespace, label: str, out: TextIO) -> int:
    """`tfbench history`: every result's few cells the table needs, each series' name from
    its latest result alone, and the current levels the store keeps for series whose results
    did not change (a listing cut in time keeps none: its series are not the whole ones)."""
    found, current = listing(store, args)
    if args.format != "csv":
        out.write("History at %s: %d series of %s\n" % (store.where(), len(found), label))
    _write(out, list_table(found, current), args.format,
           "no results%s" % (" match the filters" if any(
               (args.model, args.host, args.gpu, args.after, args.before)) else " yet"))
    return errors.EXIT_OK
