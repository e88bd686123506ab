"""Reports over results CSV files: study tables, plots, comparisons and the expected range.

Submodules import pandas/matplotlib themselves; this package import stays light so the runner can
use `tfbench.measure.expected_range` without them.
"""


def main(argv: list) -> int:
    """`tfbench report ...`; the command-line layer lives in tfbench.cli.report."""
    from tfbench.cli import report as cli
    return cli.main(argv)
