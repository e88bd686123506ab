"""The Validation section of `tfbench report`: a validate.json's verdict table, FAIL rows first,
with the validation's overall status line.

The report reads validate.json as data (it sits below tfbench.validate, which writes it, in the
layer order); the file's schema name and version are declared here, and tfbench.validate takes
them from here, so the writer and the reader name one schema.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Sequence

import pandas as pd

from tfbench.errors import UsageError
from tfbench.report.studies import Section

SCHEMA = "tfbench.validate"
SCHEMA_VERSION = 1
VALIDATE_JSON = "validate.json"

# The verdict table's columns (a row of validate.json's "rows", tfbench.validate.verdicts.Check).
COLUMNS = ["host", "subject", "check", "status", "reason", "figure", "expectation"]
# The rows in order of what needs doing: the faults first.
STATUS_ORDER = ("FAIL", "WARN", "PASS", "SKIP")


def validation_file(path: str) -> Optional[str]:
    """The validate.json `path` names (a .json file, or a directory holding validate.json),
    else None (a results CSV)."""
    if os.path.isdir(path):
        return os.path.join(path, VALIDATE_JSON)
    return path if path.lower().endswith(".json") else None


def split_inputs(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(validate.json files, results CSV files) among the report's inputs."""
    found = [(p, validation_file(p)) for p in paths]
    return [v for _, v in found if v], [p for p, v in found if not v]


def _refused(path: str, why: str) -> UsageError:
    return UsageError("%s is not a tfbench validate.json: %s" % (path, why))


def read_validation(path: str) -> dict[str, Any]:
    """The validate.json at `path`, checked to be one (UsageError in one line when not)."""
    if not os.path.isfile(path):
        raise UsageError("validation file not found: %s" % path)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except UnicodeDecodeError:
        raise _refused(path, "not a text file") from None
    except ValueError as exc:
        raise _refused(path, "invalid JSON (line %d)" % getattr(exc, "lineno", 0)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _refused(path, "its schema is not %s" % SCHEMA)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise _refused(path, "schema_version %s; this tfbench reads %d"
                       % (data.get("schema_version"), SCHEMA_VERSION))
    rows = data.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise _refused(path, "no \"rows\" list of checks")
    return data


def verdict_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a table of COLUMNS, FAIL first, then WARN, PASS and SKIP (each in the order
    the validation wrote them)."""
    frame = pd.DataFrame([{c: "" if r.get(c) is None else str(r.get(c)) for c in COLUMNS}
                          for r in rows], columns=COLUMNS)
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    order = frame["status"].map(lambda s: rank.get(s, len(rank)))
    return frame.iloc[order.argsort(kind="stable")].reset_index(drop=True)


def status_line(data: dict[str, Any], frame: pd.DataFrame) -> str:
    """'validate: FAIL (2 FAIL, 1 WARN, 40 PASS): GPU 5 straggler; ...': the validation's own
    summary where it wrote one, else its status and the rows counted by status."""
    status = str(data.get("status") or "unknown")
    summary = data.get("summary")
    if isinstance(summary, str) and summary:
        return "validate: %s" % summary
    counts = ", ".join("%d %s" % (n, s) for s in STATUS_ORDER
                       if (n := int((frame["status"] == s).sum())))
    return "validate: %s (%s)" % (status, counts or "no checks")


def _about(data: dict[str, Any]) -> str:
    """What ran: level, host, baseline, tolerance, when."""
    parts = [("level %s" % data["level"]) if data.get("level") else "",
             ("host %s" % data["host"]) if data.get("host") else "",
             ("baseline %s" % data["baseline"]) if data.get("baseline") else "no baseline",
             ("tolerance %g%%" % data["tolerance_pct"])
             if isinstance(data.get("tolerance_pct"), (int, float)) else "",
             ("%s to %s" % (data.get("started") or "?", data.get("finished") or "not finished"))
             if data.get("started") else ""]
    return "; ".join(p for p in parts if p)


def validation_section(data: dict[str, Any], source: str, slug: str = "validation") -> Section:
    """The section of one validate.json: its verdict table, each row classed by its status
    (`status-fail`, ...) for the page's colours, and its status line."""
    frame = verdict_frame(data["rows"])
    return Section(slug, "Validation", frame, list(COLUMNS),
                   note="%s (%s); rows FAIL first, then WARN, PASS and SKIP; "
                        "docs/validate.md says what each reason means and what to do about "
                        "each FAIL" % (source, _about(data)),
                   intro=status_line(data, frame),
                   row_classes=["status-%s" % s.lower() for s in frame["status"]])


def validation_sections(paths: Sequence[str]) -> list[Section]:
    """One Validation section per validate.json (titled by its file when there are several)."""
    sections = []
    for i, path in enumerate(paths):
        section = validation_section(read_validation(path), path,
                                     "validation" if len(paths) == 1 else "validation_%d" % (i + 1))
        if len(paths) > 1:
            section.title = "Validation: %s" % path
        sections.append(section)
    return sections
