"""The results CSV: one row per run, a documented and stable schema.

Appends take an exclusive file lock, so concurrent runs (one per GPU, say) never interleave rows.
A file written with an older schema is migrated in place (new columns empty) and the caller is
told in one line; it is never silently mixed.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import uuid
from typing import Any, Iterator, Optional, TextIO

from tfbench import figures
from tfbench.results import FIELD_NAMES, RunResult

# The columns and their version are declared with every figure in tfbench/figures/table.py;
# docs/csv.md's column table is generated from them.
SCHEMA_VERSION = figures.SCHEMA_VERSION
# (column, meaning with its unit), in the CSV's order.
COLUMNS: tuple[tuple[str, str], ...] = tuple((f.name, figures.meaning(f))
                                              for f in figures.CSV_FIGURES)
COLUMN_NAMES: tuple[str, ...] = tuple(c for c, _ in COLUMNS)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return "%.6g" % value
    return str(value)


def row_for(result: RunResult) -> dict[str, str]:
    """The CSV row of a result: RunResult fields and the figures derived from them (its
    properties, steps_run), then
    `extra` (monitors, studies) for the other columns only: a key of `extra` never replaces a
    figure of the same name (one name, one definition in the console, CSV and JSON)."""
    from tfbench import __version__
    values: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "params": result.params,
        "tfbench_version": __version__,
        "notices": "; ".join(result.notices),
    }
    for name in COLUMN_NAMES:
        if name not in values and hasattr(result, name):
            values[name] = getattr(result, name)
    for name, value in result.extra.items():
        if name in COLUMN_NAMES and name not in values and name not in FIELD_NAMES:
            values[name] = value
    values.update(dict.fromkeys(result.unmeasured()))   # no timed step: empty, never 0
    return {name: _fmt(values.get(name)) for name in COLUMN_NAMES}


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock on a side file, PATH.lock, so the CSV itself may be replaced while
    held. The side file is removed before the lock is let go, so none stays beside the CSV: a
    process that was waiting holds the lock of a removed file then, sees that PATH.lock is not
    (or no longer) that file, and takes the lock again on the current one."""
    lock_path = path + ".lock"
    while True:
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            held = os.fstat(fd)
            current = os.stat(lock_path)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(lock_path)
        os.close(fd)   # lets the lock go


def append_row(path: str, result: RunResult) -> Optional[str]:
    """Appends the result's row; returns a one-line notice if an older file was migrated."""
    return append_rows(path, [row_for(result)])


def append_rows(path: str, rows: list[dict[str, str]]) -> Optional[str]:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    notice = None
    with _locked(path):
        existing = ""
        if os.path.exists(path):
            with open(path, newline="") as handle:
                existing = handle.read()
        if existing:
            header = next(csv.reader(io.StringIO(existing)))
            if tuple(header) != COLUMN_NAMES:
                notice = _migrate(path, existing, header)
                existing = "migrated"
        with open(path, "a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMN_NAMES, extrasaction="ignore")
            if not existing:
                writer.writeheader()
            for row in rows:
                writer.writerow(row)
            handle.flush()
            os.fsync(handle.fileno())
    return notice


def _migrate(path: str, existing: str, header: list[str]) -> str:
    """Rewrites an older-schema file with the current columns (new ones empty), atomically."""
    unknown = [c for c in header if c not in COLUMN_NAMES]
    if unknown:
        backup = path + ".unknown-schema.bak"
        os.replace(path, backup)
        with open(path, "w", newline="") as fresh:
            csv.DictWriter(fresh, fieldnames=COLUMN_NAMES).writeheader()
        return ("%s had columns tfbench does not know (%s); it was moved to %s and a new file "
                "started" % (path, ", ".join(unknown[:3]), backup))
    rows = list(csv.DictReader(io.StringIO(existing)))
    with replacing(path, newline="") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMN_NAMES)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMN_NAMES})
    return "%s used an older column set; migrated it to schema %d (%d rows kept)" % (
        path, SCHEMA_VERSION, len(rows))


@contextlib.contextmanager
def replacing(path: str, newline: Optional[str] = None) -> Iterator[TextIO]:
    """A text file written beside `path` that replaces it once complete (os.replace: a reader
    sees the old file or the new one, never half of one; a failed write leaves no temporary
    file). It is created with mode 0666 less the umask, as open() creates a file:
    tempfile.mkstemp's 0600 would hide results from the colleagues a shared host's umask lets
    read them."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    while True:
        tmp = os.path.join(parent, ".%s.%s.tmp" % (os.path.basename(path), uuid.uuid4().hex[:12]))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "w", newline=newline) as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def write_json_atomic(path: str, data: Any) -> None:
    """`data` as indented JSON in `path`, replaced atomically (see replacing)."""
    with replacing(path) as out:
        json.dump(data, out, indent=1, sort_keys=True, default=str)
        out.write("\n")
