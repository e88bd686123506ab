"""Every figure of a run, declared once, and what is derived from the declarations.

The declarations: tfbench/figures/table.py (the CSV columns, in order, and the console's
figures) and tfbench/figures/manifest.py (what the JSON manifest alone keeps); what one holds:
tfbench/figures/figure.py. Read from them, never listed again elsewhere:
  - the CSV's columns (CSV_FIGURES: tfbench.output.csv_out), docs/csv.md and the figure table
    of docs/measurements.md (tfbench.output.docgen);
  - the console's labels and sentences (label(), sentence(): tfbench.output.console and the
    engine's notices); the lines of the legacy log (Step lines, `total images/sec`) keep the
    legacy text, their labels here are checked against it by tests/figures/test_table.py;
  - how a report reads a column (TEXT_COLUMNS, INT_CONFIG_COLUMNS: tfbench.report.load), its
    title and cell format (tfbench.report.tables), which figures its tables aggregate over a
    configuration's rows and how (AGGREGATED: tfbench.report.studies, tfbench.report.compare),
    the Results and compare columns (shown()), the columns that identify a configuration
    (CONFIGURATION), and how the rows of one multi-worker run combine
    (tfbench.report.load.combine_workers).
Standard library only: every layer may read it.
"""

from __future__ import annotations

from tfbench.figures.figure import Figure
from tfbench.figures.manifest import MANIFEST_ONLY
from tfbench.figures.table import FIGURES as _TABLE, SCHEMA_VERSION

__all__ = ["Figure", "SCHEMA_VERSION", "FIGURES", "BY_NAME", "CSV_FIGURES", "CONFIGURATION",
           "TEXT_COLUMNS", "INT_CONFIG_COLUMNS", "AGGREGATED", "shown", "label", "meaning",
           "sentence"]

FIGURES: tuple[Figure, ...] = _TABLE + MANIFEST_ONLY
BY_NAME: dict[str, Figure] = {f.name: f for f in FIGURES}
CSV_FIGURES: tuple[Figure, ...] = tuple(f for f in _TABLE if f.csv)

# The columns that identify a configuration (what ran, where): rows that agree on all of them
# are repeats of one configuration in every report table, and compare matches on them.
CONFIGURATION: tuple[str, ...] = tuple(f.name for f in CSV_FIGURES if f.identifies)
# Columns a report reads as text; integers that say what ran (0 when a failed row does not
# know them). Every other column is a number (NaN when empty).
TEXT_COLUMNS: tuple[str, ...] = tuple(f.name for f in CSV_FIGURES if f.type == "text")
INT_CONFIG_COLUMNS: tuple[str, ...] = tuple(
    f.name for f in CSV_FIGURES if f.role == "config" and f.type in ("int", "bool"))
# Figure -> how a configuration's rows make its figure in a report's tables (table order).
AGGREGATED: dict[str, str] = {f.name: f.repeats for f in CSV_FIGURES if f.repeats != "none"}


def shown(where: str) -> tuple[str, ...]:
    """The CSV figures a report table shows (Figure.shows: "summary", "compare"), in CSV
    order."""
    return tuple(f.name for f in CSV_FIGURES if where in f.shows)


def label(name: str) -> str:
    """The console's label of figure `name`."""
    return BY_NAME[name].label


def sentence(name: str, value: object) -> str:
    """The console sentence that says figure `name` (Figure.sentence) with its value."""
    return BY_NAME[name].sentence % value


def meaning(figure: Figure) -> str:
    """The definition with its unit, as docs/csv.md says it."""
    return "%s, %s" % (figure.definition, figure.unit) if figure.unit else figure.definition
