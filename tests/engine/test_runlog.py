"""The engine reports a run through RunLog (ClassicLog prints it as the legacy log, event by event:
output/test_classic_log.py)."""

import inspect

from tfbench.engine.runlog import RunLog, SilentLog, StepReport
from tfbench.output.classic_log import ClassicLog

EVENTS = sorted(name for name, value in vars(RunLog).items()
                if callable(value) and not name.startswith("_"))


def test_classic_log_and_silent_log_implement_every_event():
    assert len(EVENTS) == 23
    for cls in (ClassicLog, SilentLog):
        for name in EVENTS:
            want = list(inspect.signature(getattr(RunLog, name)).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == want, (cls, name)
    assert isinstance(ClassicLog(print), RunLog) and isinstance(SilentLog(), RunLog)


def test_silent_log_says_nothing(capsys):
    log = SilentLog()
    log.notice("x")
    log.step(StepReport(step=1, images_per_sec=1.0, plusminus=0.0, jitter=0.0, loss=0.0))
    assert capsys.readouterr() == ("", "")
