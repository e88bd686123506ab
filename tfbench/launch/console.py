"""The chief's classic log on the launcher's terminal, unchanged, with the launcher's own lines
before the footer (legacy parsers read the second-to-last line).
"""

from __future__ import annotations

import threading
from typing import Sequence, TextIO

from tfbench import errors
from tfbench.output import classic_log, files



class ChiefConsole:
    """Prints the chief's stdout and stderr lines as they come, holding back a trailing legacy
    footer (dashes, total images/sec, dashes), so that the launcher's own lines can go before it
    and nothing follows it. The chief's `Results:` line names `csv_path`, where the launcher
    puts the row, not the temporary file the task wrote it to on its host."""

    def __init__(self, stdout: TextIO, stderr: TextIO, csv_path: str = ""):
        self.stdout, self.stderr = stdout, stderr
        self.csv_path = csv_path
        self.held: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def _footer_prefix(lines: list[str]) -> bool:
        pattern = [lambda s: s == classic_log.DASHES,
                   lambda s: s.startswith("total images/sec: "),
                   lambda s: s == classic_log.DASHES]
        return len(lines) <= 3 and all(p(s) for p, s in zip(pattern, lines))

    def out(self, line: str) -> None:
        if self.csv_path:
            line = files.results_line_to(line, self.csv_path) or line
        with self._lock:
            if self.held or line == classic_log.DASHES:
                self.held.append(line)
                if self._footer_prefix(self.held):
                    return
                lines, self.held = self.held, []
                if lines[-1] == classic_log.DASHES:   # a new candidate footer starts here
                    lines, self.held = lines[:-1], [lines[-1]]
                for held in lines:
                    self.stdout.write(held + "\n")
            else:
                self.stdout.write(line + "\n")
            self.stdout.flush()

    def err(self, line: str) -> None:
        with self._lock:
            self.stderr.write(line + "\n")
            self.stderr.flush()

    def finish(self, own_lines: Sequence[str], error: str = "") -> None:
        """tfbench launch's lines, then the held footer; an error line last, on stderr."""
        with self._lock:
            for line in own_lines:
                self.stdout.write(line + "\n")
            for line in self.held:
                self.stdout.write(line + "\n")
            self.held = []
            self.stdout.flush()
            if error:
                self.stderr.write(errors.error_line(error) + "\n")
                self.stderr.flush()
