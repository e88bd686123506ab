"""The rows a study keeps for each child: the child's own (marked error when it then ended
badly), or one failure row written for it from its flags, with what it would have run; appended
to the study's file and to --csv_file."""

from __future__ import annotations

import csv
import datetime
import os
import socket
from typing import Callable, Iterable, Optional, Sequence

from tfbench import errors
from tfbench.children.outcome import classify_failure
from tfbench.children.process import ChildOutcome, log_tail
from tfbench.config import data_source
from tfbench.config import settings as settings_lib
from tfbench.config.argv import settings_of_flags
from tfbench.output import csv_out
from tfbench.results import new_run_id


def configuration(p: "settings_lib.Settings", workers: int = 1) -> dict[str, str]:
    """The columns a failed child could not write, as its run would have written them, from
    its Settings alone (the owners in tfbench.config). `workers`: the cluster's workers (tfbench
    launch's hosts; 1 for a sweep point, one process).

    Values that need the model registry or the devices (TensorFlow) stay empty: a batch or
    image size left at the model's default, the device kind unless --device was given, and
    what flags that contradict each other (say --gpu_indices and --num_gpus) leave undecided.
    """
    batch = settings_lib.timed_batch(p, 0)
    micro = p.asks.accum_steps
    try:
        devices: Optional[int] = p.asks.devices
    except errors.UsageError:
        devices = None
    try:
        source = data_source.data_source_label(p.data)
    except errors.UsageError:   # a --data_dir this host cannot read (or name)
        source = ""
    return {
        "model": p.workload.model, "mode": p.asks.run_mode,
        "precision": p.asks.precision,
        "xla": "1" if p.asks.xla else "0",
        "batch_size": str(batch) if batch else "",
        "global_batch_size": str(settings_lib.global_batch(batch, micro, devices, workers))
        if batch and devices else "",
        "num_devices": str(devices) if devices else "",
        "num_workers": str(workers),
        "accum_steps": str(micro),
        "device_kind": p.devices.device.lower() if p.is_explicit("device") else "",
        "data_source": source,
        "image_size": str(p.workload.image_size) if p.workload.image_size else "",
    }


def failure_row(flags: Sequence[str], status: str, error: str, command: str, *,
                hostname: Optional[str] = None, workers: int = 1) -> dict[str, str]:
    """A schema row for a child that wrote none: its configuration (from `flags`, read as the
    child reads them), status and error, the command, and the host it ran on (this one unless
    `hostname` names another)."""
    from tfbench import __version__
    row = {name: "" for name in csv_out.COLUMN_NAMES}
    row.update(configuration(settings_of_flags(flags), workers))
    row.update({
        "schema_version": str(csv_out.SCHEMA_VERSION), "run_id": new_run_id(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "status": status, "error": error, "hostname": hostname or socket.gethostname(),
        "tfbench_version": __version__, "command": command, "steps_run": "0",
    })
    return row


def read_rows(path: str) -> list[dict[str, str]]:
    """The schema rows of a CSV file ([] when there is none)."""
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as handle:
        return parse_rows(handle)


def parse_rows(lines: Iterable[str]) -> list[dict[str, str]]:
    """CSV rows (header first) as schema rows: every column, '' where empty or missing."""
    return [{c: row.get(c) or "" for c in csv_out.COLUMN_NAMES} for row in csv.DictReader(lines)]


def mark_abnormal(rows: list[dict[str, str]], why: str) -> None:
    """Rows a process wrote before it ended badly: an ok one becomes an error saying why."""
    for row in rows:
        if row["status"] == "ok":
            row["status"] = "error"
            row["error"] = why


def child_rows(flags: Sequence[str], outcome: ChildOutcome, csv_path: str, log_path: str,
               command: str, memory_capped: bool = False) -> list[dict[str, str]]:
    """A child's rows: its own in csv_path (marked error if it then exited non-zero or timed
    out), else one failure row classified from its exit code and its log."""
    rows = read_rows(csv_path)
    tail = log_tail(log_path)
    if not rows:
        status, error = classify_failure(outcome, tail, memory_capped)
        return [failure_row(flags, status, error, command)]
    if outcome.exit_code != 0 or outcome.timed_out:
        _, error = classify_failure(outcome, tail)
        mark_abnormal(rows, "exited abnormally after writing its row: " + error)
    return rows


def rows_status(rows: Sequence[dict[str, str]]) -> str:
    """One point's status: ok when every row of it is, else its first row's that is not."""
    if not rows:
        return "error"
    return next((r["status"] or "error" for r in rows if r["status"] != "ok"), "ok")


def save_rows(rows: list[dict[str, str]], study_path: str, csv_file: Optional[str],
              say: Callable[[str], None], one_run: bool = False) -> None:
    """Appends `rows` to the study's file and, when given, to --csv_file, as a run appends its
    row; `say` gets the one line of a file migrated to the current schema. `one_run`: the rows
    are the workers of one run (a launch's hosts), the first the chief's: the history keeps
    them as one result, under the chief's run id."""
    for path in (study_path, csv_file):
        if path:
            notice = csv_out.append_rows(path, rows)
            if notice:
                say(notice)
    # The history: what a child recorded itself is already there (said only when this adds
    # something, such as the failure row of a child that wrote none, or cannot write).
    from tfbench.history import location, record
    line = record.write(location.resolve(None),
                        record.from_rows(rows, record.source(), one_run=one_run),
                        [study_path], quiet_when_already=True)
    if line:
        say(line)
