"""`tfbench sweep`: the command-line layer over tfbench.sweep (grid, study, max_batch, summary).

    tfbench sweep [benchmark flags...] --sweep=KEY=V1,V2,... [--sweep=...] [--repeats=N]
                  [--out_dir=DIR] [--scaling=weak|strong] [--find_max_batch_size] [--knee_pct=90]

Every flag that is not a sweep option is passed to each point's child unchanged. --flagfile
presets (flags/*.flags) may hold --sweep lines too.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import sys
from typing import Optional, Sequence

from tfbench import errors
from tfbench.children.outcome import study_end
from tfbench.children.process import DEFAULT_CHILD
from tfbench.children.rows import rows_status
from tfbench.cli.guard import MIXED_FLAGS, Parser, guarded, split_benchmark_flags
from tfbench.config import flagdefs
from tfbench.config.argv import settings_of_flags
from tfbench.sweep import grid, max_batch, summary
from tfbench.sweep.study import Sweep, SweepConfig


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="tfbench sweep",
        description="Run a grid of benchmark configurations, each point in its own process, and "
                    "print the study tables (scaling, batch size, precision, resolution). All "
                    "other flags go to every point.", epilog=MIXED_FLAGS)
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a flag and its values; repeat for a grid. Zip keys with '+': "
                        "precision+xla=fp32+0,fp16+0,fp16+1. An empty value keeps the default.")
    p.add_argument("--repeats", type=int, default=1,
                   help="run each point N times, each in a fresh process (default 1)")
    p.add_argument("--out_dir", default=None,
                   help="where sweep.csv, points.csv, logs/, runs/ and the study tables go "
                        "(default tfbench_sweep_<UTC time>)")
    p.add_argument("--scaling", choices=("weak", "strong"), default="weak",
                   help="num_gpus sweeps: weak keeps --batch_size per device (legacy), strong "
                        "keeps it as the global batch (per device = global / N)")
    p.add_argument("--knee_pct", type=float, default=90.0,
                   help="batch-size knee: smallest batch reaching this %% of the best throughput")
    p.add_argument("--find_max_batch_size", action="store_true",
                   help="per point of the other axes, find the largest batch that fits "
                        "(doubling, then bisection; each probe a child process)")
    p.add_argument("--max_batch_size_limit", type=int, default=65536,
                   help="largest batch the finder tries (default 65536)")
    p.add_argument("--batch_granularity", type=int, default=1,
                   help="the finder only tries multiples of this (default 1)")
    p.add_argument("--child_memory_limit_mb", type=int, default=None,
                   help="cap each child's address space (RLIMIT_AS), e.g. to test OOM handling "
                        "on a host without a GPU; on GPU use --gpu_memory_limit_mb")
    p.add_argument("--point_timeout_sec", type=float, default=None,
                   help="stop a point that runs longer than this (status error)")
    p.add_argument("--csv_file", default=flagdefs.BY_NAME["csv_file"].default,
                   help="also append every row to this CSV, as a run does (default "
                        "%(default)s, so `tfbench report %(default)s` shows the study; empty: "
                        "only <out_dir>/sweep.csv, where the rows always are)")
    p.add_argument("--json_dir", default=None,
                   help="JSON manifests directory for the children (default <out_dir>/runs)")
    return p


def build(argv: Sequence[str], child_cmd: Sequence[str] = DEFAULT_CHILD,
          stream=None) -> tuple[argparse.Namespace, Sweep]:
    """Parses argv into the sweep options and a ready Sweep (no process started)."""
    args, base = split_benchmark_flags(_parser(), argv)
    if not args.sweep and not args.find_max_batch_size:
        raise errors.UsageError("give at least one --sweep=KEY=V1,V2,... (or "
                                "--find_max_batch_size)")
    for name, value in (("child_memory_limit_mb", args.child_memory_limit_mb),
                        ("max_batch_size_limit", args.max_batch_size_limit),
                        ("batch_granularity", args.batch_granularity)):
        if value is not None and value < 1:
            raise errors.UsageError("--%s must be >= 1, got %d" % (name, value))
    if not 0 < args.knee_pct <= 100:
        raise errors.UsageError("--knee_pct must be in (0, 100], got %g" % args.knee_pct)
    axes = [grid.parse_axis(text) for text in args.sweep]
    out_dir = args.out_dir or "tfbench_sweep_" + datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    config = SweepConfig(
        base_flags=list(base), axes=axes, out_dir=out_dir, repeats=args.repeats,
        scaling=args.scaling, child_cmd=tuple(child_cmd),
        child_memory_limit_mb=args.child_memory_limit_mb, timeout_sec=args.point_timeout_sec,
        csv_file=args.csv_file, json_dir=args.json_dir)
    return args, Sweep(config, stream)


def _probe_flags(config: SweepConfig, stream) -> None:
    """Short probes unless the user chose the lengths; said in one line (no silent change)."""
    given = settings_of_flags(config.base_flags)
    added = []
    for name, value, excluded_by in max_batch.PROBE_DEFAULTS:
        if given.is_explicit(name) or any(given.is_explicit(n) for n in excluded_by):
            continue
        config.base_flags.append("--%s=%s" % (name, value))
        added.append("--%s=%s" % (name, value))
    if added:
        print("max batch size probes run with %s (give them to change)" % " ".join(added),
              file=stream)


def run(argv: Sequence[str], child_cmd: Sequence[str] = DEFAULT_CHILD,
        stdout=None, stderr=None) -> int:
    """The whole command; returns the exit code once every row and table is written: 0 when
    every point ended ok, 6 (errors.EXIT_INCOMPLETE) when some did not (a failed point does not
    stop the study; it is marked in the tables, and one error line counts them), 1 when none
    did, 130/143 when interrupted (the tables are still written for the points run, then one
    error line says so, as a single run's does). With
    --find_max_batch_size a point is a search: an oom probe is its answer, not a failure; a
    search that stopped on another status, or where nothing fits, is one."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    args, engine = build(argv, child_cmd, stderr)
    config = engine.config
    max_results: Optional[list] = None
    exit_code = errors.EXIT_OK
    interrupted: Optional[errors.Interrupted] = None
    try:
        if args.find_max_batch_size:
            _probe_flags(config, stderr)
            start = settings_of_flags(config.base_flags).schedule.batch_size or 1
            max_results = max_batch.find_max_batch_sizes(
                engine, start=max(1, start), limit=args.max_batch_size_limit,
                granularity=args.batch_granularity)
        else:
            points = grid.expand_grid(config.axes, args.repeats, args.scaling,
                                      config.base_flags)
            engine.run(points)
    except (KeyboardInterrupt, errors.Interrupted) as exc:
        interrupted = exc if isinstance(exc, errors.Interrupted) else \
            errors.Interrupted(signal.SIGINT)
        exit_code = interrupted.exit_code
        # The point the signal stopped has a row (status interrupted) but did not finish.
        finished = sum(rows_status(r.rows) != "interrupted" for r in engine.records)
        print("\nsweep interrupted; writing the tables for the %d finished run(s)" % finished,
              file=stderr)
    if engine.records:
        from tfbench.report import tables
        sections = summary.study_sections(engine.records, config, args.knee_pct, max_results)
        text = tables.write_sections(config.out_dir, sections, "tfbench sweep: %s" % (
            ", ".join(args.sweep) or "max batch size"))
        stdout.write(text)
        stdout.write("\nrows: %s\ntables: %s\n" % (os.path.join(config.out_dir, "sweep.csv"),
                                                   os.path.join(config.out_dir, "summary.md")))
        stdout.flush()
    if engine.records and exit_code == errors.EXIT_OK:
        statuses = (max_batch.group_statuses(max_results) if max_results is not None
                    else [rows_status(r.rows) for r in engine.records])
        exit_code, line = study_end(statuses, "points", "rows in %s, logs in %s" % (
            config.rows_path, os.path.join(config.out_dir, "logs")))
        if line:
            print(errors.error_line(line), file=stderr)
    if interrupted is not None:
        # As a single run ends on a signal: one error line, after the tables.
        where = "; rows in %s, logs in %s" % (config.rows_path, os.path.join(
            config.out_dir, "logs")) if engine.records else ""
        print(errors.error_line("%s%s" % (interrupted, where)), file=stderr)
    return exit_code


def main(argv: list[str]) -> int:
    """Entry point for `tfbench sweep ...` (argv without the subcommand)."""
    return guarded(run, argv)
