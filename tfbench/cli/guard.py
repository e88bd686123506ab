"""How a subcommand ends on bad arguments, an error or a signal, in the one form every failure
has (docs/output.md): `tfbench: error: MESSAGE`, one line on stderr, and the error's exit code.

Parser turns argparse's mistakes into UsageError (argparse would print its usage and
`PROG: error:` itself); guarded() runs a long-running subcommand (sweep, launch, evaluate) with
SIGTERM (and SIGINT when listed) raising Interrupted, so that what it measured is written first.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Callable, Sequence

from tfbench import errors


def print_error(message: str) -> None:
    """The one line a failed command ends with: `tfbench: error: MESSAGE` on stderr."""
    sys.stdout.flush()
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
