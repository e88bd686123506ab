"""tfbench.output.progress: the run's progress bar, on a terminal only, erased before the log."""

import io
import re

from tfbench.output.classic_log import ClassicLog
from tfbench.output.progress import StepProgress


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _frames(text):
    """The bar's frames as plain text, control codes removed."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n")
    return [line.strip() for line in plain.split("\n") if "steps" in line]


def test_nothing_is_drawn_off_a_terminal():
    stream = io.StringIO()
    progress = StepProgress(stream, log_on_screen=True)
    assert not progress.enabled
    for done in range(4):
        progress.update("timed", done, 3)
    progress.before_line()
    progress.close()
    assert stream.getvalue() == ""


def test_timed_steps_are_redrawn_at_most_four_times_a_second_with_an_eta():
    stream, clock = Terminal(), Clock()
    progress = StepProgress(stream, log_on_screen=False, clock=clock)
    progress.update("timed", 0, 100)          # a phase starts: drawn at once
    for done in range(1, 21):                 # 20 steps of 10 ms: 0.2 s, no redraw
        clock.now += 0.01
        progress.update("timed", done, 100)
    assert [f.split("steps")[0].split()[-1] for f in _frames(stream.getvalue())] == ["0/100"]
    clock.now += 0.05                         # 0.25 s since the last drawing
    progress.update("timed", 21, 100)
    frames = _frames(stream.getvalue())
    assert frames[-1].startswith("timed") and "21/100 steps" in frames[-1]
    assert re.search(r"ETA 0:00:0\d$", frames[-1]), frames[-1]
    progress.close()


def test_the_bar_is_erased_before_a_log_line_on_the_same_screen_and_at_the_end():
    stream, clock = Terminal(), Clock()
    lines = []
    log = ClassicLog(lines.append, StepProgress(stream, log_on_screen=True, clock=clock))
    log.step_progress("timed", 0, 10)
    log.steps_started("total_loss", False)
    assert lines == ["Step\tImg/sec\ttotal_loss"]
    assert stream.getvalue().endswith("\x1b[1A\x1b[2K")     # cursor back up, line cleared
    log.step_progress("timed", 1, 10)                # within 0.25 s of the last drawing: not yet
    assert stream.getvalue().endswith("\x1b[1A\x1b[2K")
    clock.now += 0.25
    log.step_progress("timed", 2, 10)                # drawn again
    assert "2/10 steps" in _frames(stream.getvalue())[-1]
    log.progress.close()
    assert stream.getvalue().endswith("\x1b[2K")


def test_a_log_in_a_file_leaves_the_bar_on_the_terminal():
    stream, clock = Terminal(), Clock()
    lines = []
    log = ClassicLog(lines.append, StepProgress(stream, log_on_screen=False, clock=clock))
    log.step_progress("warmup", 0, 2)
    before = stream.getvalue()
    log.warmup_done()
    assert lines == ["Done warm up"] and stream.getvalue() == before
    log.progress.close()
