"""What tfbench wrote, read back for `tfbench history import` (tfbench.history.importer):
results CSVs of every schema version (csv_out's columns, by name: a version only ever added
columns, so a file with a column this tfbench does not know is a newer tfbench's), JSON run
manifests and validate.json; the source a directory names; which rows of a CSV are one run.
"""

from __future__ import annotations

import csv
import json
import os
from typing import Any, Iterable, Optional, Sequence

from tfbench.output.csv_out import COLUMN_NAMES

# The file that names a directory's source (the first found wins: a launch of a sweep or of a
# validation is the launch's).
DIRECTORY_SOURCES = (("evaluation.csv", "evaluate"), ("rows.csv", "launch"),
                     ("validate.json", "validate"), ("sweep.csv", "sweep"))
# Sub-folders whose files belong to the directory above (a point's row, a step's manifests).
INNER_FOLDERS = ("points", "runs")
CSV_SUFFIXES = (".csv", ".csv.replaced")   # evaluate --rerun_failed keeps earlier rows there
VERDICT_COLUMNS = ("host", "subject", "check", "status", "reason", "figure", "expectation")


class Refused(Exception):
    """A file that is not one tfbench wrote, or not one this tfbench reads; one line why."""


class NotResults(Refused):
    """A file that holds no results: named, it is refused; met in a directory, passed over."""


def is_csv(name: str) -> bool:
    return name.lower().endswith(CSV_SUFFIXES)


def read_csv(path: str) -> tuple[list[dict[str, str]], list[str]]:
    """(rows, reasons for rows refused) of a results CSV of any schema version. Refused: not a
    results CSV, or a newer one (columns this tfbench does not know)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if not header or header[:2] != ["schema_version", "run_id"]:
                if header and tuple(header[:len(VERDICT_COLUMNS)]) == VERDICT_COLUMNS:
                    raise NotResults("a validation's verdicts: import the validate.json beside "
                                     "it")
                raise NotResults("not a tfbench results CSV (its header does not start "
                                 "schema_version,run_id)")
            unknown = [c for c in header if c not in COLUMN_NAMES]
            if unknown:
                raise Refused("columns this tfbench does not know (%s): a newer tfbench wrote "
                              "it; import it with that one" % ", ".join(unknown[:3]))
            rows, refused = [], []
            for cells in reader:
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != len(header):
                    refused.append("a line of %d cells, not %d" % (len(cells), len(header)))
                    continue
                row = dict(zip(header, cells))
                if not row["run_id"].strip():
                    refused.append("a row without a run_id")
                    continue
                rows.append(row)
            return rows, refused
    except UnicodeDecodeError:
        raise NotResults("not a text file") from None
    except csv.Error as exc:
        raise Refused("not a readable CSV file (%s)" % str(exc).split(":")[0]) from None
    except OSError as exc:
        raise Refused("cannot be read (%s)" % (exc.strerror or "I/O error").lower()) from None


def read_json(path: str) -> tuple[str, dict[str, Any]]:
    """('manifest' or 'validation', its content) of a JSON file tfbench wrote."""
    from tfbench.report.validation import SCHEMA, SCHEMA_VERSION
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except UnicodeDecodeError:
        raise NotResults("not a text file") from None
    except ValueError as exc:
        raise Refused("not valid JSON (line %d)" % getattr(exc, "lineno", 0)) from None
    except OSError as exc:
        raise Refused("cannot be read (%s)" % (exc.strerror or "I/O error").lower()) from None
    if isinstance(data, dict) and data.get("schema") == SCHEMA:
        version = data.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise Refused("validate.json schema_version %r; this tfbench reads up to %d"
                          % (version, SCHEMA_VERSION))
        if not isinstance(data.get("rows"), list):
            raise Refused("a validate.json without its \"rows\"")
        return "validation", data
    if isinstance(data, dict) and isinstance(data.get("csv_row"), dict) and data.get("run_id"):
        return "manifest", data
    raise NotResults("not a tfbench run manifest (<run_id>.json with its csv_row) or "
                     "validate.json")


def source_of(path: str) -> str:
    """The source a file's results are recorded under: the directory that holds it (or the
    one above its points/ or runs/ folder) says sweep, evaluate, validate or launch."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    for _ in range(3):
        for marker, source in DIRECTORY_SOURCES:
            if os.path.isfile(os.path.join(folder, marker)):
                return source
        up = os.path.dirname(folder)
        if os.path.basename(folder) not in INNER_FOLDERS and os.path.basename(up) != "runs":
            break
        folder = up
    return "import"


def _count(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def runs(rows: Sequence[dict[str, str]]) -> list[list[dict[str, str]]]:
    """The rows as runs: tfbench launch appends the rows of one run's N workers together, the
    chief's first, each saying num_workers N and the launch's command; any other row is a run
    of its own."""
    out, i = [], 0
    while i < len(rows):
        n = _count(rows[i].get("num_workers"))
        group = list(rows[i:i + n]) if n > 1 else []
        if len(group) == n and rows[i].get("command") and len(
                {r["run_id"] for r in group}) == n and all(
                _count(r.get("num_workers")) == n and r.get("command") == rows[i]["command"]
                and r.get("model") == rows[i].get("model") for r in group):
            out.append(group)
            i += n
        else:
            out.append([rows[i]])
            i += 1
    return out


def json_files(folders: Iterable[str]) -> dict[str, str]:
    """run id (a file's name) -> path of the *.json files in `folders` and their runs/<step>/
    folders (validate keeps each step's manifests there)."""
    found: dict[str, str] = {}
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name.endswith(".json"):
                found.setdefault(name[:-len(".json")], path)
            elif os.path.basename(folder) == "runs" and os.path.isdir(path):
                found.update({k: v for k, v in json_files([path]).items() if k not in found})
    return found


def manifest(paths: dict[str, str], run_id: str) -> Optional[dict[str, Any]]:
    path = paths.get(run_id)
    if path is None:
        return None
    try:
        kind, data = read_json(path)
    except Refused:
        return None
    return data if kind == "manifest" and data.get("run_id") == run_id else None
