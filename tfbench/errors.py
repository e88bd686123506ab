"""Errors a user can cause, each with the exit code the CLI ends with.

Exit codes (documented in the README):
  0  success
  1  run error (a failure during the run that is not one below)
  2  usage error (bad flag, value, combination, file or path)
  3  out of memory
  4  NaN or Inf loss
  5  distributed runtime failure (a peer unreachable or lost)
  130 / 143  interrupted by SIGINT / SIGTERM
"""

from __future__ import annotations

from typing import Optional

EXIT_OK = 0
EXIT_RUN_ERROR = 1
EXIT_USAGE = 2
EXIT_OOM = 3
EXIT_NAN = 4
EXIT_DISTRIBUTED = 5
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class TfbenchError(Exception):
    """Base: an error with a one-line message meant for the user."""

    exit_code = EXIT_RUN_ERROR
    status = "error"


class UsageError(TfbenchError):
    """Bad flag, value, combination, file or path."""

    exit_code = EXIT_USAGE


class OutOfMemory(TfbenchError):
    exit_code = EXIT_OOM
    status = "oom"


class NanLoss(TfbenchError):
    exit_code = EXIT_NAN
    status = "nan"


class DistributedError(TfbenchError):
    exit_code = EXIT_DISTRIBUTED


class Interrupted(TfbenchError):
    status = "interrupted"

    def __init__(self, signum: int):
        import signal
        self.signum = signum
        self.exit_code = EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT
        super().__init__("interrupted by %s" % signal.Signals(signum).name)


# The signal the CLI's handler received. The handler also raises Interrupted, but Python can
# deliver it inside code that swallows exceptions (a finalizer during a TensorFlow call), so
# every step loop checks this as well.
_stop_signal: list[int] = []


def request_stop(signum: int) -> None:
    if not _stop_signal:
        _stop_signal.append(signum)


def clear_stop() -> None:
    _stop_signal.clear()


def stop_requested() -> Optional[Interrupted]:
    """Interrupted for the SIGINT/SIGTERM received, or None."""
    return Interrupted(_stop_signal[0]) if _stop_signal else None


def raise_if_stopped() -> None:
    """Raises Interrupted once SIGINT/SIGTERM has been received."""
    stop = stop_requested()
    if stop is not None:
        raise stop
