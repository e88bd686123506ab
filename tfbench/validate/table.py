"""The verdict table as plain text: one line per Check in the rows' order, columns aligned."""

from __future__ import annotations

from typing import Sequence

from tfbench.validate.verdicts import Check

COLUMNS = ("host", "subject", "check", "status", "reason", "figure", "expectation")


def render(rows: Sequence[Check]) -> str:
    """The rows under a header, each column as wide as its widest cell; '' for no rows."""
    if not rows:
        return ""
    cells = [list(COLUMNS)] + [[str(getattr(r, c)) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
             for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
