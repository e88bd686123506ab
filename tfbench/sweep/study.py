"""The Sweep: runs a grid's points (tfbench.sweep.grid), each in its own process
(tfbench.children), and keeps every row.

A point's child is `<child_cmd> <base flags> <point flags> --csv_file=<out_dir>/points/<name>.csv
--json_dir=<out_dir>/runs`, with stdout+stderr kept in `<out_dir>/logs/<name>.log`. A child that
crashes, runs out of memory, hits a NaN or exits non-zero marks only its own row; the study goes
on. Every row ends in `<out_dir>/sweep.csv` (and --csv_file: tfbench_results.csv unless the user
says otherwise, as for a run).

Repeats (`repeats=N`) are separate processes, not the child's own --num_runs: a crash in one
repeat cannot lose the others, and every repeat pays its own start-up (compilation, autotuning) as
a fresh run would. Repeats are interleaved (all points once, then all again) so slow drift such as
GPU heating spreads evenly over the points instead of biasing the last ones.

The child command is injectable, so tests drive the sweep with a fake child script.
An --out_dir that already holds a sweep.csv is refused (a sweep does not resume).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import os
import shlex
import sys
from typing import Callable, Iterator, Optional, Sequence, TextIO

from tfbench import errors
from tfbench.children import rows as rows_lib
from tfbench.children.process import DEFAULT_CHILD, run_child
from tfbench.sweep.grid import Axis, Point, check_point, child_args, point_flags
from tfbench.sweep.progress import Progress


@dataclasses.dataclass
class SweepConfig:
    base_flags: list[str]
    axes: list[Axis]
    out_dir: str
    repeats: int = 1
    scaling: str = "weak"
    child_cmd: Sequence[str] = DEFAULT_CHILD
    child_memory_limit_mb: Optional[int] = None
    timeout_sec: Optional[float] = None
    csv_file: Optional[str] = None    # also append every row here (the CLI: tfbench_results.csv)
    json_dir: Optional[str] = None    # default <out_dir>/runs
    rows_file: str = "sweep.csv"      # every row, in out_dir (tfbench evaluate: evaluation.csv)

    @property
    def runs_dir(self) -> str:
        return self.json_dir or os.path.join(self.out_dir, "runs")

    @property
    def rows_path(self) -> str:
        return os.path.join(self.out_dir, self.rows_file)

    @property
    def keys(self) -> list[str]:
        return [k for axis in self.axes for k in axis.keys]


@dataclasses.dataclass
class PointRecord:
    """A point and what became of it (one line of points.csv)."""

    point: Point
    rows: list[dict[str, str]]
    exit_code: int
    seconds: float
    log_path: str


INDEX_COLUMNS = ("index", "name", "repeat", "run_id", "status", "exit_code", "seconds",
                 "images_per_sec", "log", "error")


class Sweep:
    """Runs points in child processes and collects their rows (see the module docstring)."""

    def __init__(self, config: SweepConfig, stream: Optional[TextIO] = None):
        self.config = config
        self.stream = stream
        self.records: list[PointRecord] = []
        self._progress: Optional[Progress] = None

    def prepare(self) -> None:
        """A new study's directory: refused when it holds one already."""
        if os.path.exists(self.config.rows_path):
            raise errors.UsageError("%s already holds a sweep (%s); choose another "
                                    "--out_dir" % (self.config.out_dir, self.config.rows_file))
        self.make_dirs()

    def make_dirs(self) -> None:
        for sub in ("logs", "points"):
            os.makedirs(os.path.join(self.config.out_dir, sub), exist_ok=True)

    def check(self, points: Sequence[Point]) -> None:
        """UsageError, before anything runs, when a child would refuse its flags."""
        for point in points:
            check_point(point, point_flags(self.config.base_flags, point.flags))

    def run_point(self, point: Point) -> PointRecord:
        cfg = self.config
        csv_path = os.path.join(cfg.out_dir, "points", point.name + ".csv")
        log_path = os.path.join(cfg.out_dir, "logs", point.name + ".log")
        for stale in (csv_path, csv_path + ".lock"):
            if os.path.exists(stale):
                os.remove(stale)
        args = child_args(point, cfg.base_flags, csv_path, cfg.runs_dir)
        check_point(point, args)
        cmd = list(cfg.child_cmd) + args
        outcome = run_child(cmd, log_path, cfg.child_memory_limit_mb, cfg.timeout_sec)
        rows = rows_lib.child_rows(args, outcome, csv_path, log_path, shlex.join(cmd),
                                   bool(cfg.child_memory_limit_mb))
        record = PointRecord(point, rows, outcome.exit_code, outcome.seconds, log_path)
        self._save(record)
        if outcome.interrupted is not None:
            raise outcome.interrupted
        return record

    def _save(self, record: PointRecord) -> None:
        cfg = self.config
        rows_lib.save_rows(record.rows, cfg.rows_path, cfg.csv_file, self._say)
        self.records.append(record)
        index_path = os.path.join(cfg.out_dir, "points.csv")
        keys = cfg.keys
        new = not os.path.exists(index_path)
        with open(index_path, "a", newline="") as handle:
            writer = csv.writer(handle)
            if new:
                writer.writerow(list(INDEX_COLUMNS[:3]) + keys + list(INDEX_COLUMNS[3:]))
            p = record.point
            for row in record.rows:
                writer.writerow([p.index, p.name, p.repeat] + [p.values.get(k, "") for k in keys]
                                + [row["run_id"], row["status"], record.exit_code,
                                   "%.1f" % record.seconds, row["images_per_sec"],
                                   os.path.relpath(record.log_path, cfg.out_dir), row["error"]])

    def _say(self, text: str) -> None:
        """A notice on the sweep's stream (above the progress bar while one is shown)."""
        if self._progress is not None:
            self._progress.print(text)
        else:
            print(text, file=self.stream or sys.stderr)

    @contextlib.contextmanager
    def progress(self, total: Optional[int], unit: str = "points") -> Iterator[Progress]:
        """The progress bar while points run, closed however the run ends."""
        self._progress = bar = Progress(total, self.stream, unit)
        try:
            yield bar
        except BaseException:
            bar.close("stopped")
            raise
        else:
            bar.close()
        finally:
            self._progress = None

    def run(self, points: Sequence[Point]) -> list[PointRecord]:
        """Runs every point of a new study; returns their records. Flags a child would refuse
        stop it before any point runs."""
        self.check(points)
        self.prepare()
        return self.run_points(points)

    def run_points(self, points: Sequence[Point], unit: str = "points",
                   label: Callable[[Point], str] = lambda p: p.name,
                   after: Optional[Callable[[Point, PointRecord], None]] = None
                   ) -> list[PointRecord]:
        """Runs `points` under the progress bar (`unit`, each shown by `label`), calling
        `after` with each record. A usage error in the very first point (exit code 2, no row)
        stops the run: it would fail the same way everywhere."""
        with self.progress(len(points), unit) as progress:
            for i, point in enumerate(points):
                progress.show(label(point))
                record = self.run_point(point)
                progress.finished(record.seconds)
                if i == 0 and record.exit_code == errors.EXIT_USAGE:
                    raise errors.UsageError("the first %s failed with a usage error: %s "
                                            "(log: %s)" % (unit[:-1], record.rows[0]["error"],
                                                           record.log_path))
                if after is not None:
                    after(point, record)
        return self.records

