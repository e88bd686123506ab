"""The sweep's progress line on stderr."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return "%d:%02d:%02d" % (seconds // 3600, seconds % 3600 // 60, seconds % 60)


class Progress:
    """`[####......] 3/10 points | elapsed 0:01:23 | ETA 0:02:10 | <name>` on stderr.

    On a terminal the line is redrawn in place; otherwise one line per update. ETA is the mean
    point time times the points left. total=None (max-batch search) shows a count only.
    """

    def __init__(self, total: Optional[int], stream: Optional[TextIO] = None,
                 unit: str = "points", width: int = 24):
        self.total, self.unit, self.width = total, unit, width
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.durations: list[float] = []
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, current: str = "", now: Optional[float] = None) -> str:
        elapsed = (now if now is not None else time.monotonic()) - self.start
        done = len(self.durations)
        if self.total:
            filled = int(self.width * done / self.total)
            bar = "[%s%s] %d/%d %s" % ("#" * filled, "." * (self.width - filled), done,
                                       self.total, self.unit)
            if self.durations:
                eta = _hms(sum(self.durations) / done * (self.total - done))
            else:
                eta = "--:--:--"
            text = "%s | elapsed %s | ETA %s" % (bar, _hms(elapsed), eta)
        else:
            text = "%d %s done | elapsed %s" % (done, self.unit, _hms(elapsed))
        return text + (" | %s" % current if current else "")

    def show(self, current: str = "") -> None:
        text = self.line(current)
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finished(self, seconds: float) -> None:
        self.durations.append(seconds)

    def close(self) -> None:
        self.show("done")
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

