"""`tfbench history [list|changes|fleet|import|page]`: the results history (docs/history.md).

  tfbench history [FILTERS]                 the series: runs, dates, last value, current level
  tfbench history changes [FILTERS] [--since=DATE]
                                            change points, each with the environment that changed;
                                            exit 9 when a regression starts within --since
  tfbench history fleet [FILTERS]           every host's (and GPU's) latest value against the
                                            fleet's median, outliers named
  tfbench history import FILES_OR_DIRS      add results CSVs, manifests, sweep / evaluate /
                                            validate directories (idempotent)
  tfbench history page --out_dir=DIR        a static HTML page with a plot per series
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from tfbench.cli.guard import Parser
from tfbench.errors import EXIT_OK

COMMANDS = ("list", "changes", "fleet", "import", "page")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", default=None,
                   help="the store: a SQLite file or a postgresql:// URL (default: "
                        "$TFBENCH_HISTORY, else ~/.local/share/tfbench/history.sqlite)")
    p.add_argument("--model", default=None, help="only this model (fnmatch pattern)")
    p.add_argument("--host", default=None, help="only this host (fnmatch pattern)")
    p.add_argument("--gpu", default=None, help="only this GPU model (fnmatch pattern, e.g. "
                                               "'*H100*')")
    p.add_argument("--figure", default="images_per_sec",
                   help="the figure to follow (default images_per_sec; any numeric figure of "
                        "docs/csv.md)")
    p.add_argument("--after", default=None, help="only results from this date on (YYYY-MM-DD "
                                                 "or an ISO time)")
    p.add_argument("--before", default=None, help="only results before this date")
    p.add_argument("--format", choices=("text", "markdown", "csv"), default="text")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="tfbench history",
               description="The results history: every result tfbench produced, as series of "
                           "one configuration on one machine; change points with what changed "
                           "in the environment; the fleet.")
    sub = p.add_subparsers(dest="command")
    _filters(sub.add_parser("list", help="the series (the default)"))
    changes = sub.add_parser("changes", help="the change points of each series")
    _filters(changes)
    changes.add_argument("--since", default=None,
                         help="report changes whose first run is on or after this date (or "
                              "'7d', '24h'); exit 9 when a regression starts within it")
    fleet = sub.add_parser("fleet", help="every host's latest value against the fleet's median")
    _filters(fleet)
    fleet.add_argument("--threshold_pct", type=float, default=5.0,
                       help="name a host or GPU further than this from the median (default 5)")
    imp = sub.add_parser("import", help="add results CSVs, JSON manifests and result "
                                        "directories to the history")
    imp.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    imp.add_argument("--history", default=None, help="the store (as for list)")
    page = sub.add_parser("page", help="write the history page (HTML and PNGs)")
    _filters(page)
    page.add_argument("--out_dir", default="tfbench_history",
                      help="where to write index.html and its plots (default tfbench_history)")
    page.add_argument("--threshold_pct", type=float, default=5.0,
                      help="the fleet table names a host or GPU further than this from the "
                           "median (default 5)")
    page.add_argument("--max_plots", type=int, default=60,
                      help="plot at most this many series, those that changed first (default "
                           "60; the tables list every series)")
    page.add_argument("--browser_check", action="store_true",
                      help="check index.html in the system's headless Chromium (every image "
                           "loads, no table wider than 1,280 px) and save screenshot.png and "
                           "browser_check.json beside it")
    return p


def _store(value: Optional[str]):
    from tfbench.history.store import open_store
    return open_store(value)


def main(argv: list[str]) -> int:
    """Entry point for `tfbench history ...` (argv without the subcommand)."""
    argv = list(argv)
    if not argv or argv[0] not in COMMANDS + ("-h", "--help"):
        argv = ["list"] + argv
    args = _parser().parse_args(argv)
    store = _store(args.history)
    try:
        if args.command == "import":
            from tfbench.history import importer
            return importer.main(store, args.paths, sys.stdout)
        if args.command == "page":
            from tfbench.history import page
            return page.main(store, args, sys.stdout)
        from tfbench.history import views
        return views.main(store, args, sys.stdout)
    finally:
        store.close()
    return EXIT_OK
