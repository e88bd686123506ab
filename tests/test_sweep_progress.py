"""The sweep's progress line."""

import io

from tfbench.sweep import progress as sweep


def test_progress_line_and_eta():
    progress = sweep.Progress(4, io.StringIO(), width=8)
    progress.start = 0.0
    assert progress.line("p0", now=0.0) == \
        "[........] 0/4 points | elapsed 0:00:00 | ETA --:--:-- | p0"
    progress.finished(10.0)
    progress.finished(20.0)
    assert progress.line("p2", now=30.0) == \
        "[####....] 2/4 points | elapsed 0:00:30 | ETA 0:00:30 | p2"

