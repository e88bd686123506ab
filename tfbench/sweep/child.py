"""One point's child process: running it (in its own session, its output into a log file,
optionally under a memory cap or a timeout), classifying how it ended, and the CSV rows it
leaves (its own, or one failure row the sweep writes for it).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Iterable, Optional, Sequence

import tfbench
from tfbench import errors
from tfbench.config import params as params_lib
from tfbench.output import csv_out
from tfbench.results import new_run_id
from tfbench.sweep.grid import child_params

# `python -m tfbench` with this interpreter; tests inject a fake child script instead.
DEFAULT_CHILD: tuple[str, ...] = (sys.executable, "-m", "tfbench")


@dataclasses.dataclass
class ChildOutcome:
    exit_code: int          # negative: killed by that signal
    seconds: float
    timed_out: bool = False
    interrupted: Optional[BaseException] = None  # the sweep itself was interrupted meanwhile


def limit_memory(limit_mb: int) -> Callable[[], None]:
    def apply() -> None:
        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def _stop(proc: subprocess.Popen, sig: int) -> None:
    """Signals the child's process group, then kills it if it does not end within 10 s."""
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_child(cmd: Sequence[str], log_path: str, memory_limit_mb: Optional[int] = None,
              timeout_sec: Optional[float] = None) -> ChildOutcome:
    """Runs one child in its own session, stdout+stderr into log_path.

    The child's address space is capped (RLIMIT_AS) when memory_limit_mb is set. When the sweep
    itself is interrupted, the child gets the same signal, is waited for (so it can write its
    row) and the outcome carries the exception for the caller to re-raise.
    """
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    # The child imports the same tfbench as this process, installed or not: the folder that
    # holds the tfbench package goes first on its path.
    root = os.path.dirname(os.path.dirname(os.path.abspath(tfbench.__file__)))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=root + (os.pathsep + path if path else ""))
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                preexec_fn=limit_memory(memory_limit_mb)
                                if memory_limit_mb else None)
        try:
            code = proc.wait(timeout=timeout_sec)
            return ChildOutcome(code, time.monotonic() - start)
        except subprocess.TimeoutExpired:
            _stop(proc, signal.SIGTERM)
            return ChildOutcome(proc.returncode, time.monotonic() - start, timed_out=True)
        except (KeyboardInterrupt, errors.Interrupted) as exc:
            sig = exc.signum if isinstance(exc, errors.Interrupted) else signal.SIGINT
            _stop(proc, sig)
            return ChildOutcome(proc.returncode, time.monotonic() - start, interrupted=exc)


def log_tail(log_path: str, size: int = 8192) -> str:
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


def classify_failure(outcome: ChildOutcome, tail: str,
                     memory_capped: bool = False) -> tuple[str, str]:
    """(status, error) of a child that wrote no row of its own.

    Under an address-space cap (--child_memory_limit_mb), native libraries report a failed
    allocation by aborting (oneDNN: 'could not create a primitive', C++: std::bad_alloc), so an
    abort or segfault of a capped child counts as oom.
    """
    code = outcome.exit_code
    line = last_line(tail)
    if outcome.timed_out:
        return "error", "timed out after %.0f s; last output: %s" % (outcome.seconds, line)
    if outcome.interrupted is not None:
        # Stopped along with the sweep. A child that outlived the signal (one that ignores
        # SIGINT, as jobs started in the background do) was killed, which says nothing of memory.
        how = "killed by %s" % _signal_name(-code) if code < 0 else "exit code %d" % code
        return "interrupted", "stopped with the interrupted sweep (%s); last output: %s" % (
            how, line or "none")
    if code < 0:
        name = _signal_name(-code)
        if code == -signal.SIGKILL:
            return "oom", "killed by SIGKILL (likely the kernel OOM killer or a memory cap)"
        if code in (-signal.SIGINT, -signal.SIGTERM):
            return "interrupted", "killed by %s" % name
        if memory_capped and code in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS):
            return "oom", "killed by %s under the memory cap (allocation failure): %s" % (
                name, line)
        # A failed child without a row of its own is an OOM when its log ends like one.
        status = "oom" if errors.is_out_of_memory(tail) else "error"
        return status, "killed by %s: %s" % (name, line)
    if code == errors.EXIT_OOM or errors.is_out_of_memory("\n".join(tail.splitlines()[-20:])):
        status = "oom"
    elif code == errors.EXIT_NAN:
        status = "nan"
    elif code in (errors.EXIT_SIGINT, errors.EXIT_SIGTERM):
        status = "interrupted"
    else:
        status = "error"
    return status, "%s (exit code %d)" % (line or "no output", code)


def _config(p: "params_lib.Params") -> dict[str, str]:
    """What a failed child would have run (for rows it could not write), from its Params.

    Values that need the model registry or the devices (TensorFlow) stay empty: a batch or
    image size left at the model's default, the device kind unless --device was given.
    """
    # The mode rule of tfbench.engine.runner.resolve (which imports TensorFlow).
    mode = "eval" if p.eval else ("forward_only" if p.forward_only else "training")
    if p.data_only:
        mode = "data_only"
    batch = p.batch_size or 0
    real = bool(p.data_dir) and not p.use_synthetic_data
    return {
        "model": p.model, "mode": mode, "precision": params_lib.resolve_precision(p),
        "xla": "1" if params_lib.xla_requested(p) else "0",
        "batch_size": str(batch) if batch else "",
        "global_batch_size": str(batch * p.num_gpus) if batch else "",
        "num_devices": str(p.num_gpus),
        "device_kind": p.device.lower() if p.is_explicit("device") else "",
        "data_source": (p.data_name or "real") if real else "synthetic",
        "image_size": str(p.image_size) if p.image_size else "",
    }


def failure_row(args: Sequence[str], status: str, error: str, command: str) -> dict[str, str]:
    """A schema row for a point whose child wrote none: its configuration, status and error."""
    from tfbench import __version__
    row = {name: "" for name in csv_out.COLUMN_NAMES}
    row.update(_config(child_params(args)))
    row.update({
        "schema_version": str(csv_out.SCHEMA_VERSION), "run_id": new_run_id(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "status": status, "error": error, "hostname": socket.gethostname(),
        "tfbench_version": __version__, "command": command, "steps_run": "0",
    })
    return row


def read_rows(path: str) -> list[dict[str, str]]:
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


def point_rows(args: Sequence[str], outcome: ChildOutcome, csv_path: str, log_path: str,
               command: str, memory_capped: bool = False) -> list[dict[str, str]]:
    """The point's rows: the child's own (marked error if it then exited non-zero), else one
    failure row classified from the exit code and the log."""
    rows = read_rows(csv_path)
    tail = log_tail(log_path)
    if not rows:
        status, error = classify_failure(outcome, tail, memory_capped)
        return [failure_row(args, status, error, command)]
    if outcome.exit_code != 0 or outcome.timed_out:
        _, error = classify_failure(outcome, tail)
        mark_abnormal(rows, "exited abnormally after writing its row: " + error)
    return rows

