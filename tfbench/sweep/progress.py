"""The sweep's progress bar on stderr, drawn by rich:
`━━━━━━━━━━━━            3/6 points | elapsed 0:01:23 | ETA 0:01:23 | <name>`.

On a terminal rich redraws it in place (elapsed time ticking) and prints notices above it.
Elsewhere (a log file, a pipe, a test's StringIO) each update is one plain line, no control
codes, however FORCE_COLOR is set: the terminal is what the stream says it is.

The ETA is the mean time of the finished points times the points left: every point is a fresh
process of similar length, and rich's own estimate (the rate over its last 30 s) knows nothing
while one point runs for minutes. total=None (the max-batch search) shows a count only.
"""

from __future__ import annotations

import datetime
import sys
import time
from typing import Callable, Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.progress import Progress as _RichProgress
from rich.progress import Task
from rich.text import Text


def _hms(seconds: float) -> str:
    return str(datetime.timedelta(seconds=int(round(seconds))))


def _fixed(text: str) -> TextColumn:
    """A text column that is never wrapped."""
    return TextColumn(text, table_column=Column(no_wrap=True))


class _Count(ProgressColumn):
    """`3/6 points`, or `3 probes done` without a total."""

    def __init__(self, unit: str):
        super().__init__(Column(no_wrap=True))
        self.unit = unit

    def render(self, task: Task) -> Text:
        done = int(task.completed)
        if task.total:
            return Text("%d/%d %s" % (done, int(task.total), self.unit))
        return Text("%d %s done" % (done, self.unit))


class _Eta(ProgressColumn):
    """`ETA 0:01:23`: the mean finished point time times the points left."""

    def __init__(self):
        super().__init__(Column(no_wrap=True))

    def render(self, task: Task) -> Text:
        done = int(task.completed)
        if not done or not task.total:
            return Text("ETA --:--:--")
        left = max(0, int(task.total) - done)
        return Text("ETA " + _hms(task.fields["busy"] / done * left))


class Progress:
    """Progress over `total` points (see the module docstring); show() before each point,
    finished() after it, close() at the end (also when interrupted)."""

    def __init__(self, total: Optional[int], stream: Optional[TextIO] = None,
                 unit: str = "points", width: int = 24,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        # Off a terminal: no colour, no control codes (line() renders each update).
        self.console = Console(file=self.stream, force_terminal=self.tty, highlight=False,
                               color_system="auto" if self.tty else None)
        # On a narrow terminal the bar and the point name shrink, never the figures.
        columns: list[ProgressColumn] = [BarColumn(bar_width=width)] if total else []
        columns += [_Count(unit), _fixed("| elapsed"),
                    TimeElapsedColumn(table_column=Column(no_wrap=True))]
        columns += [_fixed("|"), _Eta()] if total else []
        columns += [_fixed("{task.fields[sep]}"),
                    TextColumn("{task.fields[current]}", table_column=Column(overflow="ellipsis"))]
        self._bar = _RichProgress(*columns, console=self.console, get_time=clock,
                                  auto_refresh=self.tty)
        self._task = self._bar.add_task("", total=total, busy=0.0, sep="", current="")
        self._live = False

    def _set(self, current: str) -> None:
        self._bar.update(self._task, sep="|" if current else "", current=current)

    def line(self, current: str = "") -> str:
        """The progress as one line of plain text (what a log file gets)."""
        self._set(current)
        # The stream's own encoding decides the bar's characters (ASCII on an ASCII stream).
        plain = Console(file=self.stream, width=10000, color_system=None, highlight=False,
                        force_terminal=False)
        with plain.capture() as capture:
            plain.print(self._bar.make_tasks_table(self._bar.tasks))
        return capture.get().rstrip()

    def show(self, current: str = "") -> None:
        if not self.tty:
            self.stream.write(self.line(current) + "\n")
            self.stream.flush()
            return
        self._set(current)
        if self._live:
            self._bar.refresh()
        else:
            self._bar.start()
            self._live = True

    def print(self, text: str) -> None:
        """A notice: above the bar on a terminal, else a line of its own."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def finished(self, seconds: float) -> None:
        task = self._bar.tasks[0]
        self._bar.update(self._task, advance=1, busy=task.fields["busy"] + seconds)

    def close(self, last: str = "done") -> None:
        self.show(last)
        if self._live:
            self._bar.stop()
            self._live = False
