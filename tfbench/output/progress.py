"""A run's progress on a terminal: the warm-up and the timed steps, each with a bar, the steps
done, the elapsed time and an ETA, drawn by rich on stderr:
`timed ━━━━━━━━━━━━━━━━╺━━━━━━━━━━━━━━━━━━━━━━━ 42/100 steps 0:00:21 ETA 0:00:29`.

Only where stderr is a terminal: a file or a pipe (a log, a sweep's child, a parser) gets
nothing, so the classic log is what it always was. The bar is transient: where the log shares
the terminal (stdout one too) it is erased before each line of the classic log (ClassicLog
asks), and it is erased when the run ends, so the screen holds the log as a file would and
nothing follows the footer.

During warm-up rich redraws it once a second from a thread (the first step, which builds the
step function, can take most of a minute); during the timed steps no thread runs beside them:
it is redrawn between two steps, at most 4 times a second (about a millisecond each).
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

# What StepProgress.update's phase names, and how the bar says it.
PHASES = {"warmup": "warm-up", "timed": "timed"}


class StepProgress:
    """The progress of one run's steps on `stream` (stderr), drawn only when it is a terminal.

    update(phase, done, total) after each step (and with done=0 as a phase starts);
    before_line() before a line of the classic log; close() when the run ends, however it ends.
    log_on_screen: whether the log's lines land on the same screen (default: stdout is a
    terminal)."""

    def __init__(self, stream: Optional[TextIO] = None, log_on_screen: Optional[bool] = None,
                 min_interval: float = 0.25, clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self.stream)
        self.log_on_screen = _isatty(sys.stdout) if log_on_screen is None else log_on_screen
        self.min_interval = min_interval
        self._clock = clock
        self._bar: Optional[Progress] = None
        self._task = None
        self._phase = ""
        self._shown = False
        self._drawn_at = float("-inf")

    def _start(self, phase: str, total: int) -> None:
        console = Console(file=self.stream, force_terminal=True, highlight=False)
        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("steps"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=console, transient=True, redirect_stdout=False, redirect_stderr=False,
            # Warm-up: a thread redraws it (the first step alone can take a minute); timed
            # steps: no thread beside them, update() redraws between steps.
            auto_refresh=phase == "warmup", refresh_per_second=1, get_time=self._clock)
        self._task = self._bar.add_task(PHASES[phase], total=total)
        self._phase = phase

    def update(self, phase: str, done: int, total: int) -> None:
        """`done` of `total` steps of `phase` (PHASES) are done."""
        if not self.enabled or total <= 0:
            return
        now = self._clock()
        begins = phase != self._phase or self._bar is None or done == 0
        if begins:
            self.clear()
            self._start(phase, total)
        self._bar.update(self._task, completed=done, total=total)
        if begins or done == total or now - self._drawn_at >= self.min_interval:
            if self._shown:
                self._bar.refresh()
            else:
                self._bar.start()
                self._shown = True
            self._drawn_at = now

    def before_line(self) -> None:
        """A line of the log comes next: off the screen with the bar, where they share it."""
        if self.log_on_screen:
            self.clear()

    def clear(self) -> None:
        """Erases the bar (it comes back at a later update)."""
        if self._shown:
            self._bar.stop()
            self._shown = False

    def close(self) -> None:
        """The run ended: the bar is erased for good."""
        self.clear()
        self._bar, self._phase = None, ""


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())   # type: ignore[attr-defined]
    except (AttributeError, ValueError):   # none, or closed
        return False
