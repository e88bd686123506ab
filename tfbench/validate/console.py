"""The verdict table as text: one line per Check, the subject, check, status and reason in
aligned columns, then the figure and what it was judged against. Plain text, so it reads the
same in a terminal, a log file or a pipe (the line is as long as its figure: nothing is cut).
"""

from __future__ import annotations

from typing import Sequence

from tfbench.validate import verdicts
from tfbench.validate.verdicts import Check

HEADER = ("subject", "check", "status", "reason")


def table_lines(rows: Sequence[Check], with_host: bool = False) -> list[str]:
    """The table (header first); `with_host` adds the host column (several hosts)."""
    head = (("host",) if with_host else ()) + HEADER
    cells = [((r.host,) if with_host else ()) + (r.subject, r.check, r.status, r.reason)
             for r in rows]
    widths = [max(len(c[i]) for c in [head] + cells) for i in range(len(head))]

    def line(values: Sequence[str], tail: str) -> str:
        return ("  ".join(v.ljust(w) for v, w in zip(values, widths)) + "  " + tail).rstrip()
    out = [line(head, "figure [expected]")]
    for row, values in zip(rows, cells):
        out.append(line(values, "%s [%s]" % (row.figure, row.expectation) if row.expectation
                        else row.figure))
    return out


def overall_line(rows: Sequence[Check]) -> str:
    """'validate: FAIL (2 FAIL, 1 WARN, 40 PASS): GPU 5 straggler; GPU 3 wrong_results'."""
    return "validate: " + verdicts.summary(rows)
