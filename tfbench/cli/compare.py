"""`tfbench compare A B [--format=text|markdown|csv] [--threshold_pct=P]`: CLI over
tfbench.report.compare. A and B are results CSV files or directories (an evaluation's, a
sweep's). With --threshold_pct, a gate: exit 9 (errors.EXIT_REGRESSION) when a matched
configuration of B is worse than A by more than P percent and beyond the noise, its lines on
stderr (stdout and --out hold the comparison alone); exit 0 otherwise."""

from __future__ import annotations

import argparse
import math
import sys

from tfbench import errors
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
    p.add_argument("--threshold_pct", type=float, default=None, metavar="P",
                   help="a gate: exit %d when a matched configuration of B is worse than A by "
                        "more than P percent in images/sec or a figure compared beside it (each "
                        "by the way it declares better: latency, memory and power worse when "
                        "higher) and beyond the noise (the spreads do not overlap); one line per "
                        "such configuration on stderr (default: no gate, exit 0)"
                        % errors.EXIT_REGRESSION)
    return p


def main(argv: list[str]) -> int:
    """Entry point for `tfbench compare ...` (argv without the subcommand)."""
    args = _parser().parse_args(argv)
    if args.threshold_pct is not None and not (math.isfinite(args.threshold_pct)
                                               and args.threshold_pct >= 0):
        raise errors.UsageError("--threshold_pct=%g: give a percentage of 0 or more"
                                % args.threshold_pct)
    from tfbench.report import compare
    comp = compare.compare_files(args.a, args.b)
    out = compare.render(comp, args.a, args.b, args.format)
    sys.stdout.write(out)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(out)
    if args.threshold_pct is None:
        return errors.EXIT_OK
    verdict = compare.gate(comp, args.threshold_pct)
    sys.stdout.flush()
    sys.stderr.write("\n".join(verdict.lines()) + "\n")
    return errors.EXIT_REGRESSION if verdict.failed else errors.EXIT_OK
