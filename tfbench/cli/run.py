"""`tfbench [run] [--flagfile=FILE] [--FLAG=VALUE ...]`: one benchmark with the legacy flags.

absl flags -> Params -> Settings -> engine -> classic log, CSV, JSON; results are written on
every path.
The engine reports the run as it goes to a ClassicLog (tfbench.output.classic_log), which
prints the classic log; after the run the summary and the footer come from
tfbench.output.console.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import traceback
from typing import Callable, Optional, Sequence

from tfbench import errors
from tfbench.cli.guard import flush_native_stdout, print_error
from tfbench.config.argv import parse_settings
from tfbench.config.settings import Settings
from tfbench.errors import EXIT_OK, EXIT_USAGE, Interrupted, TfbenchError, UsageError


def _internal_error(p: Settings, result, exc: Exception) -> None:
    """An exception no part of tfbench turned into an error a user can act on: a bug. The line
    says so and where its traceback is; the exception's text goes to the JSON manifest only."""
    from tfbench.output import files as outputs
    text = str(exc).strip().splitlines()
    result.extra["exception"] = "%s: %s" % (type(exc).__name__, text[0] if text else "")
    result.extra["traceback"] = traceback.format_exc()
    path = outputs.manifest_path(p, result)
    where = ("its traceback is in %s: please report it with that file" % os.path.abspath(path)
             if path else
             "run again with --json_dir=DIR to keep its traceback in a JSON manifest, and "
             "report it with that file")
    result.status = "error"
    result.error = "internal error in tfbench (a bug, not something you did wrong); " + where


class _Printer:
    """Prints classic-log lines to stdout immediately (legacy uses print)."""

    def __call__(self, line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _refuse_unknown_model(name: str) -> None:
    """A --model no model has is refused before TensorFlow is imported (3 s on a small CPU):
    the names come from the table shipped with tfbench, which lists every registered model (a
    test checks it); without that table the catalog refuses it after the import."""
    from tfbench.measure import model_table
    from tfbench.models import registry
    known = model_table.names()
    if known and name not in known:
        raise UsageError(registry.unknown_model(name, known))


def run_benchmark(argv: Sequence[str], emit: Optional[Callable[[str], None]] = None) -> int:
    """One benchmark invocation; returns the exit code. Results are written on every path.

    emit: where each line goes (default: stdout, flushed line by line)."""
    from tfbench.history import location as history_location, record as history_record
    from tfbench.output import console, files as outputs
    from tfbench.output.classic_log import ClassicLog
    from tfbench.output.progress import StepProgress
    from tfbench.results import RunResult

    # The CLI's own log on stdout gets a progress bar beside it where stderr is a terminal.
    progress = StepProgress() if emit is None else None
    progress = progress if progress is not None and progress.enabled else None
    emit = emit or _Printer()
    try:
        p = parse_settings(argv)
        _refuse_unknown_model(p.workload.model)
        history_location.resolve(p.outputs.history)   # a malformed --history: refused before a run
    except UsageError as exc:
        print_error(str(exc))
        return exc.exit_code
    result = RunResult(command=" ".join(shlex.quote(a) for a in argv))
    restore = errors.interrupt_on_signals()
    errors.hold_sigterm()   # released once the strategy exists (engine.runner)
    code = EXIT_OK
    try:
        from tfbench.engine import lean_import
        lean_import.import_frameworks()
        from tfbench.engine import diagnose, runner
        if p.mode.diagnose_input:
            diagnose.diagnose_input(p, ClassicLog(emit, progress), result)
        else:
            runner.run(p, ClassicLog(emit, progress), result)
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
            _internal_error(p, result, exc)
            code = errors.EXIT_RUN_ERROR
    finally:
        if progress is not None:   # erased before any line that follows the steps
            progress.close()
        errors.release_sigterm()
        restore()
    if code == EXIT_USAGE and not (result.step_times or result.warmup_times):
        print_error(result.error)   # refused before any step: nothing to record (output.md)
        return code
    try:
        written = outputs.write_all(p, result)
    except OSError as exc:
        print_error("could not write results: %s" % exc)
        return code or 1
    lines = written.lines
    line = history_record.add_run(p.outputs.history, result, written.row, [
        f for f in (p.outputs.csv_file, outputs.manifest_path(p, result)) if f])
    if line:
        lines.append(line)
    flush_native_stdout()
    if code != EXIT_OK:
        for line in console.stopped_lines(result) + lines:
            emit(line)
        print_error(result.error)
        return code
    for line in console.summary_lines(result) + lines:
        emit(line)
    for line in console.footer(result):
        emit(line)
    return EXIT_OK


def main(argv: Sequence[str]) -> int:
    """`argv`: the arguments after `tfbench` (or `tfbench run`)."""
    return run_benchmark(["tfbench"] + list(argv))
