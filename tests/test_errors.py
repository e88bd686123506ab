"""tfbench.errors: the words for what ended a process."""

import signal

from tfbench import errors


def test_signal_name():
    assert errors.signal_name(signal.SIGTERM) == "SIGTERM"
    assert errors.signal_name(9) == "SIGKILL"
    assert errors.signal_name(77) == "signal 77"      # no signal has that number on Linux


def test_an_interrupt_names_its_signal():
    assert str(errors.Interrupted(signal.SIGINT)) == "interrupted by SIGINT"
    assert errors.Interrupted(signal.SIGTERM).exit_code == 143
