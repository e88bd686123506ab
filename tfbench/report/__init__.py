"""Reports over results CSV files: study tables, plots, comparisons and the expected range.

Submodules import pandas/matplotlib themselves; this package import stays light so the runner can
use `tfbench.report.expected_range` without them.
"""


def main(argv: list) -> int:
    """`tfbench report ...`; the command-line layer lives in tfbench.report.cli."""
    from tfbench.report import cli
    return cli.main(argv)
