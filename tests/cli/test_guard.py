"""tfbench.cli.guard: how every subcommand ends on a bad argument or an error, and sweep, launch
and evaluate on a signal."""

import os
import signal
import time

import pytest

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


# --- benchmark flags: one split, one stray-argument check -------------------------------------

def _parser():
    from tfbench.cli.guard import Parser
    p = Parser(prog="tfbench demo")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--out_dir", default=None)
    return p


def test_mixed_options_and_benchmark_flags_are_split_after_reading_flagfiles(tmp_path):
    from tfbench.cli.guard import split_benchmark_flags
    preset = tmp_path / "study.flags"
    preset.write_text("--repeats=3\n--batch_size=8\n")
    args, flags = split_benchmark_flags(_parser(), [
        "--model=trivial", "--flagfile=%s" % preset, "--num_gpus", "2", "--xla",
        "--out_dir=o"])
    assert (args.repeats, args.out_dir) == (3, "o")
    assert flags == ["--model=trivial", "--batch_size=8", "--num_gpus", "2", "--xla"]


def test_benchmark_flags_after_the_separator_and_nothing_else_unknown(tmp_path):
    from tfbench.cli.guard import split_benchmark_flags
    preset = tmp_path / "run.flags"
    preset.write_text("--batch_size=8\n")
    args, flags = split_benchmark_flags(_parser(), [
        "--out_dir=o", "--", "--out_dir=theirs", "--flagfile=%s" % preset],
        after_separator=True)
    assert (args.out_dir, flags) == ("o", ["--out_dir=theirs", "--batch_size=8"])
    assert split_benchmark_flags(_parser(), ["--repeats=2"], after_separator=True)[1] == []
    with pytest.raises(errors.UsageError, match=r"^unknown tfbench demo option '--model=x' "
                       r"\(benchmark flags go after --\)$"):
        split_benchmark_flags(_parser(), ["--model=x", "--", "--batch_size=8"],
                              after_separator=True)


@pytest.mark.parametrize("argv, stray", [
    (["--model=trivial", "oops"], "oops"),
    (["--xla", "true"], "true"),          # a boolean takes no separate value (absl)
    (["--noxla", "oops"], "oops"),
    (["oops", "--batch_size=8"], "oops"),
])
def test_a_stray_word_among_benchmark_flags_is_refused(argv, stray):
    from tfbench.cli.guard import split_benchmark_flags
    message = "unexpected argument %r: flags look like --name=value" % stray
    for after in (False, True):
        with pytest.raises(errors.UsageError) as raised:
            split_benchmark_flags(_parser(), (["--"] if after else []) + argv,
                                  after_separator=after)
        assert str(raised.value) == message


def test_a_flags_value_given_apart_is_not_stray():
    from tfbench.cli.guard import split_benchmark_flags
    for argv in (["--batch_size", "8"], ["-model", "trivial"], ["--no_such_flag", "x"]):
        assert split_benchmark_flags(_parser(), argv)[1] == argv


@pytest.mark.parametrize("argv", [
    ["sweep", "--sweep=num_gpus=1,2", "--model=trivial", "oops"],
    ["evaluate", "--model_dir", "x", "oops"],
    ["allreduce", "--max_bytes=0", "--model=trivial", "oops"],
    ["launch", "--hosts=127.0.0.1", "--", "--model=trivial", "oops"],
])
def test_every_subcommand_that_takes_benchmark_flags_refuses_a_stray_word_alike(argv, capsys):
    from tfbench import cli
    assert cli.main(["tfbench"] + argv) == errors.EXIT_USAGE
    assert capsys.readouterr().err == ("tfbench: error: unexpected argument 'oops': flags look "
                                       "like --name=value\n")


@pytest.mark.parametrize("subcommand, where", [
    ("sweep", "go anywhere among these options"), ("evaluate", "go anywhere among these"),
    ("allreduce", "go anywhere among these options"), ("launch", "go after --")])
def test_each_help_says_where_benchmark_flags_go(subcommand, where, capsys):
    from tfbench import cli
    assert cli.main(["tfbench", subcommand, "--help"]) == 0
    assert where in " ".join(capsys.readouterr().out.split())
