"""Command line: absl flags -> Params -> runner -> classic log, CSV, JSON.

The only module that reads absl flag values. `tfbench SUBCOMMAND ...` dispatches to the
subcommands; anything else is a benchmark run with the legacy flags.
"""

from __future__ import annotations

import importlib
import os
import shlex
import signal
import sys
import traceback
from typing import Callable, Optional, Sequence

from absl import flags

from tfbench import errors, flagdefs, startup_env
from tfbench.errors import EXIT_OK, EXIT_USAGE, Interrupted, TfbenchError, UsageError

# name -> (module, one-line description)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "models": ("tfbench.models_cli", "list registered models with parameters and FLOPs"),
    "sweep": ("tfbench.sweep", "run a grid of configurations, one process per point"),
    "report": ("tfbench.report", "Markdown/HTML tables and PNG plots from result CSVs"),
    "compare": ("tfbench.report.compare", "compare two result CSVs with a noise verdict"),
    "launch": ("tfbench.launch_cli", "run on several hosts over ssh: one task per host, "
                                     "rows gathered, scaling series"),
    "env": ("tfbench.env_cli", "print the environment manifest"),
    "peak": ("tfbench.peak", "measure achievable TFLOP/s per precision (the MFU peak)"),
    "make_fake_imagenet": ("tfbench.fake_imagenet", "write a small ImageNet in TFRecords"),
}

PROG = "tfbench"


def define_flags(values: flags.FlagValues) -> None:
    for spec in flagdefs.ALL_FLAGS:
        helptext = spec.help + ("  [TF1-only: accepted, no effect]" if spec.role == "G" else "")
        if spec.kind == "bool":
            flags.DEFINE_boolean(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "int":
            flags.DEFINE_integer(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "float":
            flags.DEFINE_float(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "string":
            flags.DEFINE_string(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "enum":
            flags.DEFINE_enum(spec.name, spec.default, list(spec.enum_values), helptext,
                              flag_values=values)
        elif spec.kind == "list":
            flags.DEFINE_list(spec.name, spec.default, helptext, flag_values=values)
        else:
            raise ValueError("unknown flag kind %s" % spec.kind)


def parse_params(argv: Sequence[str]):
    """argv (program name first) -> validated Params. UsageError on bad input."""
    from tfbench.params import make_params
    values = flags.FlagValues()
    define_flags(values)
    try:
        rest = values(list(argv), known_only=False)
    except flags.Error as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    if len(rest) > 1:
        raise UsageError("Received unknown positional arguments: %s (booleans are --name or "
                         "--noname; values are --name=value)" % " ".join(rest[1:]))
    given = {name for name in values if values[name].present}
    return make_params({spec.name: values[spec.name].value for spec in flagdefs.ALL_FLAGS},
                       explicit=given)


def usage() -> str:
    lines = ["usage: %s [--flagfile=FILE] [--FLAG=VALUE ...]    run a benchmark" % PROG,
             "       %s SUBCOMMAND [args]" % PROG, "", "subcommands:"]
    lines += ["  %-20s %s" % (name, desc) for name, (_, desc) in SUBCOMMANDS.items()]
    lines += ["", "Run `%s --helpfull` for every benchmark flag." % PROG]
    return "\n".join(lines)


def helpfull() -> str:
    out = [usage(), "", "flags:"]
    for spec in flagdefs.ALL_FLAGS:
        extra = " (TF1-only: accepted, no effect)" if spec.role == "G" else ""
        values = " one of %s" % list(spec.enum_values) if spec.enum_values else ""
        out.append("  --%s: %s%s%s\n    (default: %r)" % (spec.name, spec.help, values, extra,
                                                        spec.default))
    return "\n".join(out)


class _Printer:
    """Prints classic-log lines to stdout immediately (legacy uses print)."""

    def __call__(self, line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _error_line(message: str) -> None:
    sys.stdout.flush()
    sys.stderr.write("%s: error: %s\n" % (PROG, message))
    sys.stderr.flush()


def _install_signal_handlers() -> Callable[[], None]:
    """SIGINT/SIGTERM raise Interrupted; the signal is also recorded, because TensorFlow may
    wrap an exception raised inside its own Python code (e.g. while binding inputs)."""
    def handler(signum, _frame):
        errors.request_stop(signum)
        raise Interrupted(signum)
    errors.clear_stop()
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def restore():
        for s, h in previous.items():
            signal.signal(s, h)
        errors.clear_stop()
    return restore


def run_benchmark(argv: Sequence[str], emit: Optional[Callable[[str], None]] = None) -> int:
    """One benchmark invocation; returns the exit code. Results are written on every path."""
    from tfbench import outputs
    from tfbench.results import RunResult

    emit = emit or _Printer()
    try:
        p = parse_params(argv)
    except UsageError as exc:
        _error_line(str(exc))
        return exc.exit_code
    result = RunResult(command=" ".join(shlex.quote(a) for a in argv))
    restore = _install_signal_handlers()
    code = EXIT_OK
    try:
        from tfbench import lean_import
        lean_import.import_frameworks()
        from tfbench import runner
        if p.diagnose_input:
            runner.diagnose_input(p, emit, result)
        else:
            runner.Benchmark(p, emit).run(result)
    except TfbenchError as exc:
        result.status, result.error, code = exc.status, str(exc), exc.exit_code
    except KeyboardInterrupt:
        exc = Interrupted(signal.SIGINT)
        result.status, result.error, code = exc.status, str(exc), exc.exit_code
    except Exception as exc:  # noqa: BLE001 - an unexpected failure still records results
        stop = errors.stop_requested()
        if stop is not None:
            result.status, result.error, code = stop.status, str(stop), stop.exit_code
        else:
            result.status, result.error = "error", "%s: %s" % (
                type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            result.extra["traceback"] = traceback.format_exc()
            code = 1
    finally:
        restore()
    try:
        lines = outputs.write_all(p, result)
    except OSError as exc:
        _error_line("could not write results: %s" % exc)
        return code or 1
    if code != EXIT_OK:
        if result.step_times:
            emit("Measured before the stop: %d timed steps, %.2f images/sec"
                 % (len(result.step_times), result.images_per_sec))
        for line in lines:
            emit(line)
        message = result.error
        if "traceback" in result.extra and lines:
            message += " (traceback in the JSON manifest)"
        _error_line(message)
        return code
    for line in outputs.summary_lines(p, result) + lines:
        emit(line)
    for line in outputs.footer(result):
        emit(line)
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    args = argv[1:]
    if args and args[0] in ("-h", "--help", "help"):
        print(usage())
        return EXIT_OK
    if args and args[0] in ("--helpfull", "--helpshort"):
        print(helpfull())
        return EXIT_OK
    if args and args[0] == "--version":
        from tfbench import environment
        print(environment.version_line())
        return EXIT_OK
    if args and args[0] == "run":
        argv = [argv[0]] + args[1:]
    elif args and not args[0].startswith("-"):
        name = args[0]
        if name not in SUBCOMMANDS:
            _error_line("unknown subcommand '%s'; choose one of: %s (or pass benchmark flags "
                        "such as --model=resnet50)" % (name, ", ".join(SUBCOMMANDS)))
            return EXIT_USAGE
        module = importlib.import_module(SUBCOMMANDS[name][0])
        try:
            return int(module.main(args[1:]) or 0)
        except TfbenchError as exc:
            _error_line(str(exc))
            return exc.exit_code
    return run_benchmark(argv)


def entry_point() -> None:
    """Console-script entry: nothing may reach stdout or stderr after the footer."""
    # CUDA_DEVICE_ORDER=PCI_BUS_ID before TensorFlow starts CUDA (tfbench.startup_env).
    startup_env.apply()
    # Keep TF's C++ INFO chatter off stderr; warnings and errors still show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter and TF teardown: their late messages would land after the footer
    # that legacy parsers read as the second-to-last line.
    os._exit(code)
