"""The command line: one module per `tfbench SUBCOMMAND` (run is the default), and the
dispatcher here. The only layer that parses argv and prints; everything below takes Settings or
plain arguments.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from typing import Iterator, Optional, Sequence

from tfbench.cli.guard import print_error
from tfbench.config import flagdefs, startup_env
from tfbench.errors import EXIT_OK, EXIT_USAGE, TfbenchError

# name -> (module, one-line description); `tfbench NAME ARGS` calls module.main(ARGS).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "models": ("tfbench.cli.models", "list registered models with parameters and FLOPs"),
    "sweep": ("tfbench.cli.sweep", "run a grid of configurations, one process per point"),
    "evaluate": ("tfbench.cli.evaluate", "evaluate a GPU: 5 models x 3 modes, one table, a "
                 "report"),
    "report": ("tfbench.cli.report", "Markdown/HTML tables and PNG plots from result CSVs, "
               "and validate.json's verdicts"),
    "compare": ("tfbench.cli.compare", "compare two result CSVs with a noise verdict"),
    "history": ("tfbench.cli.history", "the results history: series, change points with what "
                "changed, the fleet; import, page"),
    "launch": ("tfbench.cli.launch", "run on several hosts over ssh: one task per host, "
                                     "rows gathered, scaling series"),
    "env": ("tfbench.cli.env", "print the environment manifest"),
    "peak": ("tfbench.cli.peak", "measure achievable TFLOP/s per precision (the MFU peak)"),
    "allreduce": ("tfbench.cli.allreduce", "time a run's gradient all-reduce alone (algbw, "
                  "busbw), over a range of sizes"),
    "validate": ("tfbench.cli.validate", "validate this host: each GPU's health, each device "
                 "alone, the devices together; PASS/WARN/FAIL per check"),
    "make_fake_imagenet": ("tfbench.cli.make_fake_imagenet", "write a small ImageNet in TFRecords"),
    "presets": ("tfbench.cli.presets", "list the flagfile presets and helper scripts (flags/, "
                                       "scripts/) and where they are installed"),
}

PROG = "tfbench"


def usage() -> str:
    lines = ["usage: %s [--flagfile=FILE] [--FLAG=VALUE ...]    run a benchmark" % PROG,
             "       %s SUBCOMMAND [args]" % PROG, "", "subcommands:"]
    lines += ["  %-20s %s" % (name, desc) for name, (_, desc) in SUBCOMMANDS.items()]
    lines += ["", "Run `%s --helpfull` for every benchmark flag; `%s presets` lists the "
              "--flagfile presets (flags/NAME.flags, found from any directory)." % (PROG, PROG)]
    return "\n".join(lines)


def helpfull() -> str:
    out = [usage(), "", "flags:"]
    for spec in flagdefs.ALL_FLAGS:
        extra = " (TF1-only: accepted, no effect)" if spec.role == flagdefs.TF1_ONLY else ""
        values = " One of %s." % flagdefs.choices(spec) if spec.enum_values else ""
        out.append("  --%s: %s%s%s\n    (default: %r)" % (spec.name, spec.help, values, extra,
                                                        spec.default))
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`argv` as sys.argv (program name first); returns the exit code."""
    from tfbench.cli import run
    argv = list(sys.argv if argv is None else argv)
    args = argv[1:]
    if args and args[0] in ("-h", "--help", "help"):
        print(usage())
        return EXIT_OK
    if args and args[0] in ("--helpfull", "--helpshort"):
        print(helpfull())
        return EXIT_OK
    if args and args[0] == "--version":
        from tfbench.measure import environment
        print(environment.version_line())
        return EXIT_OK
    if args and args[0] == "run":
        args = args[1:]
    elif args and not args[0].startswith("-"):
        name = args[0]
        if name not in SUBCOMMANDS:
            print_error("unknown subcommand '%s'; choose one of: %s (or pass benchmark "
                        "flags such as --model=resnet50)" % (name, ", ".join(SUBCOMMANDS)))
            return EXIT_USAGE
        module = importlib.import_module(SUBCOMMANDS[name][0])
        try:
            with _history_for_children(name, args[1:]):
                return int(module.main(args[1:]) or 0)
        except TfbenchError as exc:
            print_error(str(exc))
            return exc.exit_code
        except SystemExit as exc:   # argparse's --help
            return exc.code if isinstance(exc.code, int) else EXIT_OK
    return run.run_benchmark([argv[0]] + args)


@contextlib.contextmanager
def _history_for_children(name: str, args: Sequence[str]) -> Iterator[None]:
    """While a command that runs tfbench children (sweep, evaluate, validate, launch) runs, it
    and its children add to one history, named as theirs: its --history (refused here, before
    anything runs, when malformed) goes to them and to itself through the environment, which is
    as it was afterwards (the command may run inside a longer process)."""
    if name not in ("sweep", "evaluate", "validate", "launch"):
        yield
        return
    from tfbench.history import location
    from tfbench.history.record import SOURCE_VAR
    saved = {k: os.environ.get(k) for k in (SOURCE_VAR, location.ENV_VAR)}
    os.environ.setdefault(SOURCE_VAR, name)
    value = None
    for i, arg in enumerate(args):   # launch's too, after its `--`: the benchmark flags
        if arg.startswith("--history="):
            value = arg.split("=", 1)[1]
        elif arg == "--history" and i + 1 < len(args):
            value = args[i + 1]
    try:
        location.resolve(value)
        if value is not None:
            os.environ[location.ENV_VAR] = value
        yield
    finally:
        for key, was in saved.items():
            if was is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = was


def entry_point() -> None:
    """Console-script entry: nothing may reach stdout or stderr after the footer."""
    # CUDA_DEVICE_ORDER and TF_CPP_MIN_LOG_LEVEL before TensorFlow starts, each recorded as
    # tfbench's (tfbench.config.startup_env.STARTUP_ENV: set nothing here besides it).
    startup_env.apply()
    try:
        code = main(sys.argv)
        sys.stdout.flush()
    except BrokenPipeError:   # `tfbench models | head`: the reader left, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    sys.stderr.flush()
    remove_autograph_files()
    # Skip interpreter and TF teardown: their late messages would land after the footer
    # that legacy parsers read as the second-to-last line.
    os._exit(code)


def remove_autograph_files() -> None:
    """Deletes the modules TensorFlow's autograph wrote to the temporary directory for this
    process (`__autograph_generated_file*.py`, one per converted function). TensorFlow removes
    them at interpreter exit, which os._exit skips."""
    import tempfile
    temp = os.path.realpath(tempfile.gettempdir())
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith("__autograph_generated_file") and path and \
                os.path.dirname(os.path.realpath(path)) == temp:
            try:
                os.remove(path)
            except OSError:
                pass
