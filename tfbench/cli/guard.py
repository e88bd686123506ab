"""How a long-running subcommand (sweep, launch, evaluate) ends: a signal stops it as
Interrupted, so that what it measured is written first, and a TfbenchError is one line."""

from __future__ import annotations

import signal
import sys
from typing import Callable, Sequence

from tfbench import errors


def guarded(name: str, run: Callable[[list[str]], int], argv: Sequence[str],
            signums: tuple[int, ...] = (signal.SIGTERM,)) -> int:
    """run(argv) with `signums` raising errors.Interrupted (SIGINT stays KeyboardInterrupt
    unless listed); a TfbenchError ends it with `tfbench NAME: error: ...` and its exit code."""
    restore = errors.interrupt_on_signals(signums)
    try:
        return run(list(argv))
    except errors.TfbenchError as exc:
        print("tfbench %s: error: %s" % (name, exc), file=sys.stderr)
        return exc.exit_code
    finally:
        restore()
