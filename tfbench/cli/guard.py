"""How a subcommand reads its arguments and ends on bad ones, an error or a signal, in the one
form every failure has (docs/output.md): `tfbench: error: MESSAGE`, one line on stderr, and the
error's exit code.

Parser turns argparse's mistakes into UsageError (argparse would print its usage and
`PROG: error:` itself); split_benchmark_flags separates a subcommand's own options from the
benchmark flags it hands on (sweep, evaluate, allreduce: mixed; launch: after `--`), with one
check for a stray word; guarded() runs a long-running subcommand (sweep, launch, evaluate) with
SIGTERM (and SIGINT when listed) raising Interrupted, so that what it measured is written first.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Callable, Sequence

from tfbench import errors
from tfbench.config import flagdefs, presets


def flush_native_stdout() -> None:
    """Writes out what native libraries left in C's stdout buffer: on a pipe or a file it is
    written only at exit, which entry_point skips (os._exit), so it would be lost. NCCL logs
    to stdout with fwrite and no fflush when NCCL_DEBUG is set without NCCL_DEBUG_FILE
    (src/debug.cc; from 2.22 its version line too under NCCL_DEBUG=WARN, src/init.cc
    showVersion). Called before a command's last lines (the run's summary and footer, an
    error line), so what NCCL said comes above them."""
    if os.name != "posix":
        return
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (ImportError, OSError, AttributeError):
        # No ctypes, no dlopen (a static interpreter) or no fflush: no native buffer to reach.
        return


def print_error(message: str) -> None:
    """The one line a failed command ends with: `tfbench: error: MESSAGE` on stderr."""
    sys.stdout.flush()
    flush_native_stdout()
    sys.stderr.write(errors.error_line(message) + "\n")
    sys.stderr.flush()


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser for a subcommand: UsageError for bad arguments (`sweep: ...
    (see tfbench sweep --help)`), no abbreviated option names."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise errors.UsageError("%s: %s (see %s --help)" % (self.prog.split()[-1], message,
                                                            self.prog))


# The --help epilogs of the subcommands that take benchmark flags: where those flags go.
MIXED_FLAGS = ("Benchmark flags (tfbench --help lists them) go anywhere among these options, "
               "each as --name=value (a boolean as --name or --noname); a --flagfile may hold "
               "both.")
FLAGS_AFTER_SEPARATOR = ("Benchmark flags (tfbench --help lists them) go after --, each as "
                         "--name=value (a boolean as --name or --noname); a --flagfile there is "
                         "read here.")


def split_benchmark_flags(parser: argparse.ArgumentParser, argv: Sequence[str], *,
                          after_separator: bool = False
                          ) -> tuple[argparse.Namespace, list[str]]:
    """(the subcommand's own options, the benchmark flags it hands on) of argv.

    Mixed (sweep, evaluate, allreduce): --flagfile is read first, so a preset may hold the
    subcommand's options too, and every argument the parser does not take is a benchmark flag.
    after_separator (launch, whose options share names with benchmark flags: --port,
    --out_dir): the benchmark flags are those after `--` (their --flagfile read), and any other
    argument the parser does not take is an error. Either way a word among the benchmark flags
    that is no flag's value is refused; the flags themselves are checked where they are read,
    by tfbench.config.argv.settings_of_flags."""
    argv = list(argv)
    if after_separator:
        cut = argv.index("--") if "--" in argv else len(argv)
        args, unknown = parser.parse_known_args(argv[:cut])
        if unknown:
            raise errors.UsageError("unknown %s option %r (benchmark flags go after --)"
                                    % (parser.prog, unknown[0]))
        flags = presets.expand_flagfiles(argv[cut + 1:])
    else:
        args, flags = parser.parse_known_args(presets.expand_flagfiles(argv))
    stray = [t for i, t in enumerate(flags) if not t.startswith("-")
             and not (i and _takes_a_value(flags[i - 1]))]
    if stray:
        raise errors.UsageError("unexpected argument %r: flags look like --name=value"
                                % stray[0])
    return args, list(flags)


def _takes_a_value(token: str) -> bool:
    """`--name` (or `-name`) of a flag whose value may be the next argument, as absl reads it:
    not a boolean, and not written --name=value. An unknown name counts (its parser says so)."""
    if not token.startswith("-") or "=" in token:
        return False
    name = token.lstrip("-")
    spec = flagdefs.BY_NAME.get(name)
    if spec is None and name.startswith("no"):
        negated = flagdefs.BY_NAME.get(name[2:])
        if negated is not None and negated.kind == "bool":
            return False
    return spec is None or spec.kind != "bool"


def guarded(run: Callable[[list[str]], int], argv: Sequence[str],
            signums: tuple[int, ...] = (signal.SIGTERM,)) -> int:
    """run(argv) with `signums` raising errors.Interrupted (SIGINT stays KeyboardInterrupt
    unless listed); a TfbenchError ends it with its one error line and exit code."""
    restore = errors.interrupt_on_signals(signums)
    try:
        return run(list(argv))
    except errors.TfbenchError as exc:
        print_error(str(exc))
        return exc.exit_code
    finally:
        restore()
