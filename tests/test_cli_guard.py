"""tfbench.cli.guard: how sweep, launch and evaluate end on an error or a signal."""

import os
import signal
import time

from tfbench import errors
from tfbench.cli.guard import guarded


def test_an_error_is_one_line_with_the_subcommand_and_its_exit_code(capsys):
    def run(argv):
        raise errors.UsageError("--sweep needs KEY=V1,V2 (got %r)" % argv[0])

    assert guarded("sweep", run, ["x"]) == errors.EXIT_USAGE
    assert capsys.readouterr().err == "tfbench sweep: error: --sweep needs KEY=V1,V2 (got 'x')\n"


def test_a_sigterm_reaches_the_subcommand_as_interrupted_and_the_handler_is_put_back():
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def run(argv):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            # Python runs the handler in this (the main) thread at the next bytecode once the
            # thread that took the signal flags it.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.001)
        except errors.Interrupted as exc:   # the subcommand writes what it measured, then ends
            seen.append(str(exc))
            return exc.exit_code
        return 0

    assert guarded("evaluate", run, []) == errors.EXIT_SIGTERM
    assert seen == ["interrupted by SIGTERM"]
    assert signal.getsignal(signal.SIGTERM) is before
