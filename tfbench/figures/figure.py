"""What one figure's declaration holds (the Figure type) and the words each field takes.

A declaration that uses a word outside these vocabularies fails when tfbench.figures is
imported, so a typo in the table cannot leave a figure out of a report unnoticed.
"""

from __future__ import annotations

import dataclasses

# How the report reads a CSV cell: text as it is; int and bool (0/1) as integers where the
# figure says what ran (role "config", 0 when a failed row does not know it), else as numbers;
# json: a structure only the JSON manifest holds (lists, dicts).
TYPES = ("float", "int", "bool", "text", "json")
# record: the row's own bookkeeping (run_id, status); config: what ran; measure: what was
# measured; environment: the software and machine it ran on.
ROLES = ("record", "config", "measure", "environment")
# How the rows of one configuration (repeats: re-runs, --repeats) make its figure in a report's
# tables: their median, min, max or the first row's; "none": no table aggregates it.
REPEATS = ("median", "min", "max", "first", "none")
# How the rows of one multi-worker run (one row per worker, each from its own process) make the
# run's figure (tfbench.report.load.combine_workers):
#   same        every worker's row holds the run's figure (what ran, the all-worker images/sec):
#               the chief's (first) row
#   sum         each row holds its worker's part: the sum (energy, power, a worker's Step speed)
#   max, min    the largest (memory, temperature, the slowest device) or smallest row
#   mean        a mean over equal shares (per image, per sample): the mean of the rows
#   per_worker  images/sec of this worker over its own resources (memory, power): every worker
#               runs the same images/sec in a synchronous step, so the run's figure (all images/sec
#               over all resources) is the harmonic mean of the rows
#   none        each worker's own record (run_id, hostname, notices): the chief's row's, which
#               is no figure of the other workers
WORKERS = ("same", "sum", "max", "min", "mean", "per_worker", "none")
# Which way a figure is better, for the history's changes and the gates (tfbench.history):
# "higher" (images/sec), "lower" (latency, memory, power, energy per image), "" (neither: what
# ran, a count, a description).
BETTER = ("higher", "lower", "")
# Report tables a figure is a column of, beside the study tables (which take every figure whose
# `repeats` is not "none"): "summary" (tfbench report's Results), "compare" (tfbench compare's
# B/A ratio columns).
SHOWS = ("summary", "compare")


@dataclasses.dataclass(frozen=True)
class Figure:
    name: str                # CSV column and JSON key
    definition: str          # one line (docs/csv.md, docs/measurements.md)
    unit: str = ""           # "" for a count, a flag or a description; GiB = 2^30 bytes
    label: str = ""          # how the console names it ("": not on the console)
    csv: bool = True         # a CSV column (False: the JSON manifest and the console only)
    line: str = ""           # the console line it is on (its first words)
    type: str = "float"      # TYPES
    role: str = "measure"    # ROLES
    identifies: bool = False  # one of the columns that identify a configuration
    title: str = ""          # its column title in report tables, unit included ("": its name)
    format: str = ""         # a report cell: str.format spec ("{:,.1f}"); bool "yes|no" texts;
    #                          text "first clause" (up to the first ';'), or
    #                          "empty=WORD" (the value, WORD where it is empty)
    repeats: str = "none"    # REPEATS
    workers: str = "none"    # WORKERS
    shows: frozenset[str] = frozenset()   # SHOWS
    sentence: str = ""       # the whole console sentence that says it, %d for the value
    better: str = ""         # BETTER

    def __post_init__(self) -> None:
        for field, value, allowed in (("type", self.type, TYPES), ("role", self.role, ROLES),
                                      ("repeats", self.repeats, REPEATS),
                                      ("workers", self.workers, WORKERS)):
            if value not in allowed:
                raise ValueError("figure %s: %s %r is none of %s"
                                 % (self.name, field, value, ", ".join(allowed)))
        if self.better not in BETTER:
            raise ValueError("figure %s: better %r is none of %s"
                             % (self.name, self.better, ", ".join(repr(b) for b in BETTER)))
        if self.better and self.type not in ("float", "int"):
            raise ValueError("figure %s: a %s figure has no better direction"
                             % (self.name, self.type))
        if not set(self.shows) <= set(SHOWS):
            raise ValueError("figure %s: shows %s, not among %s"
                             % (self.name, sorted(self.shows), ", ".join(SHOWS)))
