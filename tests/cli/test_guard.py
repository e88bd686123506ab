"""tfbench.cli.guard: how every subcommand ends on a bad argument or an error, and sweep, launch
and evaluate on a signal."""

import os
import signal
import time

from tfbench import errors
from tfbench.cli.guard import guarded


def test_an_error_is_one_line_in_the_one_form_with_its_exit_code(capsys):
    def run(argv):
        raise errors.UsageError("--sweep needs KEY=V1,V2 (got %r)" % argv[0])

    assert guarded(run, ["x"]) == errors.EXIT_USAGE
    assert capsys.readouterr().err == "tfbench: error: --sweep needs KEY=V1,V2 (got 'x')\n"


def test_a_bad_argument_of_any_subcommand_is_the_same_one_line(capsys):
    """argparse would print its usage and `tfbench report: error: ...`; every subcommand says it
    in the one form instead, with exit code 2 (docs/output.md)."""
    from tfbench import cli
    for argv, said in (
            (["report"], "report: the following arguments are required: csv"),
            (["compare", "a.csv"], "compare: the following arguments are required: b"),
            (["sweep", "--repeats=x"], "sweep: argument --repeats: invalid int value: 'x'"),
            (["peak", "--seconds=x"], "peak: argument --seconds: invalid float value: 'x'"),
            (["models", "--format=xml"], "models: argument --format: invalid choice: 'xml'"),
            (["presets", "--nope"], "presets: unrecognized arguments: --nope"),
            (["launch"], "launch: the following arguments are required: --hosts"),
            (["evaluate", "--repeats=x"], "evaluate: argument --repeats: invalid int value")):
        assert cli.main(["tfbench"] + argv) == errors.EXIT_USAGE, argv
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("tfbench: error: " + said), (argv, err)
        assert err[0].endswith("(see tfbench %s --help)" % argv[0]), err


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

    assert guarded(run, []) == errors.EXIT_SIGTERM
    assert seen == ["interrupted by SIGTERM"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_error_line_survives_a_python_without_native_flush(capsys, monkeypatch):
    """No dlopen (a static interpreter), no ctypes or no fflush: nothing native to flush, and
    the error line must still be the one line, never a traceback."""
    import ctypes

    from tfbench.cli import guard

    def refused(_name):
        raise OSError("dlopen: not supported")
    monkeypatch.setattr(ctypes, "CDLL", refused)
    guard.print_error("bad flag")
    assert capsys.readouterr().err == "tfbench: error: bad flag\n"
