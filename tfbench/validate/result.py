"""A validation's result files in its --out_dir: validate.json (the whole validation: settings,
plan, each step, every row, the figures measured; schema below, docs/validate.md field by field)
rewritten after every step, so a crash, a hang or a signal leaves every check already run; and
validate.csv, one row per Check. load() reads a validate.json back (tfbench launch -- validate
reads each host's, a baseline may be one).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from typing import Any, Optional, Sequence

from tfbench import errors
from tfbench.validate import verdicts
from tfbench.validate.verdicts import Check

# validate.json's schema, named once for its writer and its readers (the report among them).
from tfbench.report.validation import SCHEMA, SCHEMA_VERSION  # noqa: E402
JSON_FILE = "validate.json"
CSV_FILE = "validate.csv"
CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(Check))

# How a step ended (the `status` of each entry of `steps`).
STEP_OK = "ok"                    # it ran and its rows are in
STEP_FAILED = "failed"            # its child failed: a check_failed row says how
STEP_HUNG = "hung"                # its child ran past its timeout and was stopped
STEP_INTERRUPTED = "interrupted"  # the validation was stopped while it ran
STEP_SKIPPED = "skipped"          # not run: what it needs was not measured (the row says)


@dataclasses.dataclass
class StepRecord:
    """One step that ran: how it ended, how long it took, its command and log."""
    name: str
    status: str
    seconds: float
    command: str          # the child's command line, shell-quoted ('' for a step run here)
    log: str              # the child's log, relative to the out_dir ('' when none)
    error: str = ""       # one line: why it did not end ok

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["seconds"] = round(self.seconds, 2)
        return data


class Result:
    """The validation as it goes: `meta` (settings and plan), the steps that ran, every row and
    the figures measured; write() puts it in validate.json and validate.csv."""

    def __init__(self, out_dir: str, meta: dict[str, Any]):
        self.out_dir = out_dir
        self.meta = dict(meta)
        self.steps: list[StepRecord] = []
        self.rows: list[Check] = []
        self.measured: dict[str, Any] = {"key": {}, "figures": {}}
        # The figures in the shape a later validation takes as its baseline (run_figures).
        self.figures: list[dict[str, Any]] = []
        self.finished: Optional[str] = None
        self.interrupted: Optional[str] = None
        self.exit_code: Optional[int] = None

    @property
    def json_path(self) -> str:
        return os.path.join(self.out_dir, JSON_FILE)

    @property
    def csv_path(self) -> str:
        return os.path.join(self.out_dir, CSV_FILE)

    def add(self, step: StepRecord, rows: Sequence[Check]) -> None:
        self.steps.append(step)
        self.rows.extend(rows)

    def status(self) -> str:
        return verdicts.overall(self.rows)

    def final_exit_code(self) -> int:
        """verdicts.exit_code, or 130/143 when the validation was interrupted."""
        if self.exit_code is not None:
            return self.exit_code
        return verdicts.exit_code(self.rows)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION}
        data.update(self.meta)
        data.update({
            "finished": self.finished, "interrupted": self.interrupted,
            "steps": [s.to_json() for s in self.steps],
            "rows": [r.to_json() for r in self.rows],
            "measured": self.measured,
            "figures": self.figures,
            "status": self.status(),
            "summary": verdicts.summary(self.rows),
            "exit_code": self.final_exit_code() if self.finished else None,
        })
        return data

    def write(self) -> None:
        """validate.json and validate.csv, each replaced whole (a reader never sees half)."""
        os.makedirs(self.out_dir, exist_ok=True)
        _replace(self.json_path, json.dumps(_finite(self.to_json()), indent=1,
                                            allow_nan=False) + "\n")
        with open(self.csv_path + ".tmp", "w", newline="") as handle:
            writer = csv.DictWriter(handle, CSV_COLUMNS)
            writer.writeheader()
            for row in self.rows:
                writer.writerow({k: "" if v is None else v for k, v in row.to_json().items()})
        os.replace(self.csv_path + ".tmp", self.csv_path)


def _finite(value: Any) -> Any:
    """`value` with every non-finite float as None: JSON has no inf or NaN (a row's figure
    says it in words: 'max_rel_diff inf')."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _replace(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


def load(path: str) -> tuple[dict[str, Any], list[Check]]:
    """(everything of a validate.json but its rows, its rows as Checks). `path` is the file or
    a directory holding one. UsageError, in one line, when it is missing, not JSON, not a
    tfbench validation or of a newer schema than this tfbench reads."""
    if os.path.isdir(path):
        path = os.path.join(path, JSON_FILE)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise errors.UsageError("%s: no such file" % path) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise errors.UsageError("%s: not a tfbench validate.json (%s)" % (
            path, type(exc).__name__)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise errors.UsageError("%s: not a tfbench validate.json (no \"schema\": \"%s\")"
                                % (path, SCHEMA))
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise errors.UsageError("%s: validate.json schema_version %r; this tfbench reads up to "
                                "%d" % (path, version, SCHEMA_VERSION))
    try:
        rows = [Check.from_json(r) for r in data.get("rows") or []]
    except (TypeError, ValueError) as exc:
        raise errors.UsageError("%s: a row is not a validate row (%s)" % (path, exc)) from None
    meta = {k: v for k, v in data.items() if k != "rows"}
    return meta, rows
