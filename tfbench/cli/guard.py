"""How a subcommand ends on bad arguments, an error or a signal, in the one form every failure
has (docs/output.md): `tfbench: error: MESSAGE`, one line on stderr, and the error's exit code.

Parser turns argparse's mistakes into UsageError (argparse would print its usage and
`PROG: error:` itself); guarded() runs a long-running subcommand (sweep, launch, evaluate) with
SIGTERM (and SIGINT when listed) raising Interrupted, so that what it measured is written first.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Callable, Sequence

from tfbench import errors


def flush_native_stdout() -> None:
    """Writes out what native libraries left in C's stdout buffer: on a pipe or a file it is
    written only at exit, which entry_point skips (os._exit), so it would be lost. NCCL logs
    to stdout with fwrite and no fflush when NCCL_DEBUG is set without NCCL_DEBUG_FILE
    (src/debug.cc; from 2.22 its version line too under NCCL_DEBUG=WARN, src/init.cc
    showVersion). Called before a command's last lines (the run's summary and footer, an
    error line), so what NCCL said comes above them."""
    if os.name != "posix":
        return
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (ImportError, OSError, AttributeError):
        # No ctypes, no dlopen (a static interpreter) or no fflush: no native buffer to reach.
        return


def print_error(message: str) -> None:
    """The one line a failed command ends with: `tfbench: error: MESSAGE` on stderr."""
    sys.stdout.flush()
    flush_native_stdout()
    sys.stderr.write(errors.error_line(message) + "\n")
    sys.stderr.flush()


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser for a subcommand: UsageError for bad arguments (`sweep: ...
    (see tfbench sweep --help)`), no abbreviated option names."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise errors.UsageError("%s: %s (see %s --help)" % (self.prog.split()[-1], message,
                                                            self.prog))


def guarded(run: Callable[[list[str]], int], argv: Sequence[str],
            signums: tuple[int, ...] = (signal.SIGTERM,)) -> int:
    """run(argv) with `signums` raising errors.Interrupted (SIGINT stays KeyboardInterrupt
    unless listed); a TfbenchError ends it with its one error line and exit code."""
    restore = errors.interrupt_on_signals(signums)
    try:
        return run(list(argv))
    except errors.TfbenchError as exc:
        print_error(str(exc))
        return exc.exit_code
    finally:
        restore()
