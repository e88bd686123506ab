"""`tfbench compare A B [--format=text|markdown|csv]`: CLI over tfbench.report.compare. A and B
are results CSV files or directories (an evaluation's, a sweep's)."""

from __future__ import annotations

import argparse
import sys

from tfbench.cli.guard import Parser


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="tfbench compare",
        description="Match configurations of two results CSV files (or two evaluation "
                    "directories: by model, run and execution mode), show B/A ratios and "
                    "whether each difference is larger than the runs' spread.")
    p.add_argument("a", help="baseline results CSV, or a directory of `tfbench evaluate` or "
                             "`tfbench sweep` (A)")
    p.add_argument("b", help="results CSV or directory to compare (B)")
    p.add_argument("--format", choices=("text", "markdown", "csv"), default="text")
    p.add_argument("--out", default=None, help="also write the output to this file")
    return p


def main(argv: list[str]) -> int:
    """Entry point for `tfbench compare ...` (argv without the subcommand)."""
    args = _parser().parse_args(argv)
    from tfbench.report import compare
    comp = compare.compare_files(args.a, args.b)
    out = compare.render(comp, args.a, args.b, args.format)
    sys.stdout.write(out)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(out)
    return 0
