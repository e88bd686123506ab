"""Starting one benchmark child: in its own session, stdout and stderr into a log file,
optionally under an address-space cap or a timeout; stopping it with the caller's signal."""

from __future__ import annotations

import dataclasses
import os
import resource
import signal
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

import tfbench
from tfbench import errors

# `python -m tfbench` with this interpreter; tests inject a fake child script instead.
DEFAULT_CHILD: tuple[str, ...] = (sys.executable, "-m", "tfbench")


@dataclasses.dataclass
class ChildOutcome:
    exit_code: int          # negative: killed by that signal
    seconds: float
    timed_out: bool = False
    interrupted: Optional[BaseException] = None  # the caller itself was interrupted meanwhile


def limit_memory(limit_mb: int) -> Callable[[], None]:
    """A preexec function capping the child's address space (RLIMIT_AS) at limit_mb MiB."""
    def apply() -> None:
        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def stop(proc: subprocess.Popen, sig: int, grace_sec: float = 10.0) -> None:
    """Signals the child's process group, then kills it if it does not end within grace_sec."""
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=grace_sec)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def child_env() -> dict[str, str]:
    """This environment, unbuffered, with the folder holding this tfbench package first on the
    child's path: the child imports the same tfbench as this process, installed or not."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(tfbench.__file__)))
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONUNBUFFERED="1",
                PYTHONPATH=root + (os.pathsep + path if path else ""))


def run_child(cmd: Sequence[str], log_path: str, memory_limit_mb: Optional[int] = None,
              timeout_sec: Optional[float] = None) -> ChildOutcome:
    """Runs one child in its own session, stdout+stderr into log_path, until it ends.

    Its address space is capped (RLIMIT_AS) when memory_limit_mb is set; after timeout_sec it
    gets SIGTERM (then SIGKILL) and the outcome says timed_out. When this process is interrupted
    (SIGINT, or errors.Interrupted from a SIGTERM handler), the child gets the same signal, is
    waited for (so it can write its row) and the outcome carries the exception for the caller
    to re-raise.
    """
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=child_env(),
                                start_new_session=True,
                                preexec_fn=limit_memory(memory_limit_mb)
                                if memory_limit_mb else None)
        try:
            code = proc.wait(timeout=timeout_sec)
            return ChildOutcome(code, time.monotonic() - start)
        except subprocess.TimeoutExpired:
            stop(proc, signal.SIGTERM)
            return ChildOutcome(proc.returncode, time.monotonic() - start, timed_out=True)
        except (KeyboardInterrupt, errors.Interrupted) as exc:
            sig = exc.signum if isinstance(exc, errors.Interrupted) else signal.SIGINT
            stop(proc, sig)
            return ChildOutcome(proc.returncode, time.monotonic() - start, interrupted=exc)


def log_tail(log_path: str, size: int = 8192) -> str:
    """The last `size` bytes of a log, as text ('' when it cannot be read)."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    """The last non-blank line of `text`, stripped ('' when there is none)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""
