"""`tfbench report CSV_OR_VALIDATE_JSON... [--out DIR]`: the command-line layer over
tfbench.report.build."""

from __future__ import annotations

import argparse
import os

from tfbench.cli.guard import Parser
from tfbench.measure import stats


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="tfbench report",
        description="Markdown and HTML tables and PNG plots from tfbench results CSV files; "
                    "a validate.json given adds its Validation section (the verdict table).")
    p.add_argument("csv", nargs="+", help="results CSV files (e.g. tfbench_results.csv, "
                                           "<sweep out_dir>/sweep.csv), and validate.json "
                                           "files of tfbench validate (or its --out_dir)")
    p.add_argument("--out", default="tfbench_report", help="output directory "
                                                            "(default tfbench_report)")
    p.add_argument("--json_dir", default=None,
                   help="where the runs' JSON manifests are (default: runs/ or tfbench_runs/ "
                        "next to each CSV); used for the time-series plots")
    p.add_argument("--knee_pct", type=float, default=90.0,
                   help="batch-size knee: smallest batch reaching this %% of the best")
    p.add_argument("--unstable_threshold_pct", type=float,
                   default=stats.DEFAULT_UNSTABLE_THRESHOLD_PCT,
                   help="repeated configurations whose spread ((max - min) / median) exceeds "
                        "this are marked unstable, as tfbench evaluate marks them (default "
                        "%(default)g)")
    p.add_argument("--max_plots", type=int, default=12,
                   help="at most this many plots of each kind (default 12)")
    p.add_argument("--title", default="tfbench report")
    p.add_argument("--browser_check", action="store_true",
                   help="check report.html in the system's headless Chromium (every image loads, "
                        "no table wider than 1,280 px) and save screenshot.png beside it")
    return p


def main(argv: list[str]) -> int:
    """Entry point for `tfbench report ...` (argv without the subcommand)."""
    args = _parser().parse_args(argv)
    from tfbench.report.build import build_report
    report = build_report(args.csv, args.out, args.json_dir, args.knee_pct, args.max_plots,
                          args.title, args.unstable_threshold_pct)
    print("report: %s\n        %s\nplots:  %d in %s" % (
        report.markdown_path, report.html_path, len(report.plots),
        os.path.join(args.out, "plots")))
    if args.browser_check:
        from tfbench.report import browser_check
        passed, line = browser_check.check_report(report.html_path)
        print(line)
        return 1 if passed is False else 0
    return 0
