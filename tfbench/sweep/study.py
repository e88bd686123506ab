"""The sweep engine: a grid of benchmark configurations, each point run in its own process.

A point's child is `<child_cmd> <base flags> <point flags> --csv_file=<out_dir>/points/<name>.csv
--json_dir=<out_dir>/runs`, with stdout+stderr kept in `<out_dir>/logs/<name>.log`. A child that
crashes, runs out of memory, hits a NaN or exits non-zero marks only its own row; the study goes
on. Every row ends in `<out_dir>/sweep.csv` (and the user's --csv_file).

Repeats (`repeats=N`) are separate processes, not the child's own --num_runs: a crash in one
repeat cannot lose the others, and every repeat pays its own start-up (compilation, autotuning) as
a fresh run would. Repeats are interleaved (all points once, then all again) so slow drift such as
GPU heating spreads evenly over the points instead of biasing the last ones.

The child command is injectable, so tests drive the engine with a fake child script.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import itertools
import os
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Iterable, Optional, Sequence, TextIO

from tfbench.output import csv_out
from tfbench import errors
from tfbench.config import flagdefs
from tfbench.config import params as params_lib
from tfbench.config.argv import parse_params
from tfbench.results import new_run_id

DEFAULT_CHILD: tuple[str, ...] = (sys.executable, "-m", "tfbench")

# Flags the sweep sets for every child itself.
RESERVED_KEYS = ("csv_file", "json_dir", "flagfile")

_TRUE = ("1", "true", "t", "yes", "y")
_FALSE = ("0", "false", "f", "no", "n")


# --- grid --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Axis:
    """One --sweep: a key (or keys zipped with '+') and its values."""

    keys: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]


def _check_value(key: str, value: str) -> str:
    """The value as the child should receive it; UsageError when it cannot be valid."""
    spec = flagdefs.BY_NAME[key]
    if value == "":
        return value  # '' leaves the flag at its default
    try:
        if spec.kind == "int":
            int(value)
        elif spec.kind == "float":
            float(value)
    except ValueError:
        raise errors.UsageError("--sweep=%s: %r is not a%s %s" % (
            key, value, "n" if spec.kind == "int" else "", spec.kind)) from None
    if spec.kind == "bool":
        if value.lower() in _TRUE:
            return "true"
        if value.lower() in _FALSE:
            return "false"
        raise errors.UsageError("--sweep=%s: %r is not true/false" % (key, value))
    if spec.kind == "enum" and value not in spec.enum_values:
        raise errors.UsageError("--sweep=%s: %r is not one of %s"
                                % (key, value, ", ".join(v for v in spec.enum_values if v)))
    return value


def parse_axis(text: str) -> Axis:
    """`KEY=V1,V2,...`, or zipped keys `K1+K2=a1+a2,b1+b2` (e.g. precision+xla=fp32+0,fp16+1).

    An empty value leaves the flag at its default (e.g. data_dir=,/data/imagenet).
    """
    if "=" not in text:
        raise errors.UsageError("--sweep=%s: expected KEY=V1,V2,..." % text)
    key_text, values_text = text.split("=", 1)
    keys = tuple(k.strip() for k in key_text.split("+"))
    for key in keys:
        if key not in flagdefs.BY_NAME:
            raise errors.UsageError("--sweep: unknown flag %r" % key)
        if key in RESERVED_KEYS:
            raise errors.UsageError("--sweep: %s is set by the sweep itself" % key)
    if len(set(keys)) != len(keys):
        raise errors.UsageError("--sweep=%s: a key is repeated" % text)
    values = []
    for item in values_text.split(","):
        parts = tuple(p.strip() for p in item.split("+")) if len(keys) > 1 else (item.strip(),)
        if len(parts) != len(keys):
            raise errors.UsageError("--sweep=%s: %r needs %d '+'-separated values"
                                    % (text, item, len(keys)))
        values.append(tuple(_check_value(k, v) for k, v in zip(keys, parts)))
    if not values or values == [("",) * len(keys)]:
        raise errors.UsageError("--sweep=%s: no values" % text)
    return Axis(keys, tuple(values))


@dataclasses.dataclass(frozen=True)
class Point:
    index: int                  # position in the grid (repeats share it)
    repeat: int                 # 1-based
    values: dict[str, str]      # swept key -> value as given
    flags: dict[str, str]       # flag -> value passed to the child ('' = not passed)
    name: str


def _slug(value: str) -> str:
    if "/" in value:
        value = value.rstrip("/").rsplit("/", 1)[-1] or "root"
    value = re.sub(r"[^A-Za-z0-9.]+", "-", value).strip("-")
    return (value or "default")[:40]


def point_name(index: int, values: dict[str, str], repeat: int = 1, repeats: int = 1) -> str:
    """`003_num_gpus-2_batch_size-64` (and `_r2` for the second of several repeats)."""
    parts = ["%03d" % index] + ["%s-%s" % (k, _slug(v)) for k, v in values.items()]
    if repeats > 1:
        parts.append("r%d" % repeat)
    return "_".join(parts)


def child_params(flags: Sequence[str]) -> "params_lib.Params":
    """The Params a child started with `flags` runs with, parsed by the CLI's own parser
    (tfbench.config.argv; no TensorFlow import). UsageError when the child would refuse
    them. The sweep reads what a point runs from here, never from the raw flags."""
    return parse_params(["tfbench"] + list(flags))


def strip_flags(flags: Sequence[str], names: Iterable[str]) -> list[str]:
    """`flags` without any occurrence of the named flags (=value, space-separated, --noX)."""
    names = set(names)
    out: list[str] = []
    skip = False
    for token in flags:
        if skip:
            skip = False
            continue
        name = token[2:].split("=", 1)[0] if token.startswith("--") else None
        if name in names:
            spec = flagdefs.BY_NAME.get(name)
            skip = "=" not in token and not (spec is not None and spec.kind == "bool")
            continue
        if name and name.startswith("no") and name[2:] in names:
            continue
        out.append(token)
    return out


def expand_grid(axes: Sequence[Axis], repeats: int = 1, scaling: str = "weak",
                base_flags: Sequence[str] = ()) -> list[Point]:
    """All points: the product of the axes (first axis slowest), repeats interleaved.

    Strong scaling: the batch (swept or --batch_size) is the global batch, and each point gets
    batch_size = global / num_gpus.
    """
    if repeats < 1:
        raise errors.UsageError("--repeats must be >= 1, got %d" % repeats)
    keys = [k for axis in axes for k in axis.keys]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise errors.UsageError("--sweep: %s swept more than once" % ", ".join(dup))
    if scaling not in ("weak", "strong"):
        raise errors.UsageError("--scaling must be weak or strong, got %r" % scaling)
    if scaling == "strong" and "num_gpus" not in keys:
        raise errors.UsageError("--scaling=strong needs --sweep=num_gpus=...")
    combos = []
    for index, choice in enumerate(itertools.product(*[axis.values for axis in axes])):
        values = {k: v for axis, vals in zip(axes, choice) for k, v in zip(axis.keys, vals)}
        flags = dict(values)
        if scaling == "strong":
            p = child_params(point_flags(base_flags, values))
            global_batch, gpus = p.batch_size, p.num_gpus
            if not global_batch:
                raise errors.UsageError("--scaling=strong needs --batch_size (the global batch "
                                        "kept fixed) or --sweep=batch_size=...")
            if global_batch % gpus:
                raise errors.UsageError("--scaling=strong: global batch %d is not divisible by "
                                        "num_gpus=%d" % (global_batch, gpus))
            flags["batch_size"] = str(global_batch // gpus)
        combos.append((index, values, flags))
    return [Point(index, repeat, values, flags, point_name(index, values, repeat, repeats))
            for repeat in range(1, repeats + 1) for index, values, flags in combos]


def point_flags(base_flags: Sequence[str], flags: dict[str, str]) -> list[str]:
    """Base flags (minus those the point sets and the sweep's own), then the point's flags."""
    args = strip_flags(base_flags, list(flags) + list(RESERVED_KEYS))
    return args + ["--%s=%s" % (k, v) for k, v in flags.items() if v != ""]


def child_args(point: Point, base_flags: Sequence[str], csv_path: str,
               json_dir: str) -> list[str]:
    """The child's flags: base flags (minus those the point sets), point flags, outputs."""
    return point_flags(base_flags, point.flags) + ["--csv_file=%s" % csv_path,
                                                   "--json_dir=%s" % json_dir]


def check_point(point: Point, args: Sequence[str]) -> None:
    """UsageError naming the point when its child would refuse `args` (no process started)."""
    try:
        child_params(args)
    except errors.UsageError as exc:
        raise errors.UsageError("point %s: %s" % (point.name, exc)) from None


def expand_flagfiles(argv: Sequence[str], _depth: int = 0) -> list[str]:
    """Inlines --flagfile=PATH (absl format: one flag per line, # or // comments)."""
    out: list[str] = []
    for token in argv:
        if token.startswith("--flagfile="):
            path = token.split("=", 1)[1]
            if _depth > 10:
                raise errors.UsageError("--flagfile nesting too deep at %s" % path)
            try:
                with open(path) as handle:
                    lines = [ln.strip() for ln in handle]
            except OSError as exc:
                raise errors.UsageError("cannot read --flagfile=%s: %s" % (path, exc.strerror))
            flags = [ln for ln in lines if ln and not ln.startswith(("#", "//"))]
            out += expand_flagfiles(flags, _depth + 1)
        else:
            out.append(token)
    return out


# --- one child -----------------------------------------------------------------------------

@dataclasses.dataclass
class ChildOutcome:
    exit_code: int          # negative: killed by that signal
    seconds: float
    timed_out: bool = False
    interrupted: Optional[BaseException] = None  # the sweep itself was interrupted meanwhile


def _limit_memory(limit_mb: int) -> Callable[[], None]:
    def apply() -> None:
        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def _stop(proc: subprocess.Popen, sig: int) -> None:
    """Signals the child's process group, then kills it if it does not end within 10 s."""
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_child(cmd: Sequence[str], log_path: str, memory_limit_mb: Optional[int] = None,
              timeout_sec: Optional[float] = None) -> ChildOutcome:
    """Runs one child in its own session, stdout+stderr into log_path.

    The child's address space is capped (RLIMIT_AS) when memory_limit_mb is set. When the sweep
    itself is interrupted, the child gets the same signal, is waited for (so it can write its
    row) and the outcome carries the exception for the caller to re-raise.
    """
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    # The child imports the same tfbench as this process, installed or not.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=root + (os.pathsep + path if path else ""))
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                preexec_fn=_limit_memory(memory_limit_mb)
                                if memory_limit_mb else None)
        try:
            code = proc.wait(timeout=timeout_sec)
            return ChildOutcome(code, time.monotonic() - start)
        except subprocess.TimeoutExpired:
            _stop(proc, signal.SIGTERM)
            return ChildOutcome(proc.returncode, time.monotonic() - start, timed_out=True)
        except (KeyboardInterrupt, errors.Interrupted) as exc:
            sig = exc.signum if isinstance(exc, errors.Interrupted) else signal.SIGINT
            _stop(proc, sig)
            return ChildOutcome(proc.returncode, time.monotonic() - start, interrupted=exc)


def log_tail(log_path: str, size: int = 8192) -> str:
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


def classify_failure(outcome: ChildOutcome, tail: str,
                     memory_capped: bool = False) -> tuple[str, str]:
    """(status, error) of a child that wrote no row of its own.

    Under an address-space cap (--child_memory_limit_mb), native libraries report a failed
    allocation by aborting (oneDNN: 'could not create a primitive', C++: std::bad_alloc), so an
    abort or segfault of a capped child counts as oom.
    """
    code = outcome.exit_code
    line = last_line(tail)
    if outcome.timed_out:
        return "error", "timed out after %.0f s; last output: %s" % (outcome.seconds, line)
    if outcome.interrupted is not None:
        # Stopped along with the sweep. A child that outlived the signal (one that ignores
        # SIGINT, as jobs started in the background do) was killed, which says nothing of memory.
        how = "killed by %s" % _signal_name(-code) if code < 0 else "exit code %d" % code
        return "interrupted", "stopped with the interrupted sweep (%s); last output: %s" % (
            how, line or "none")
    if code < 0:
        name = _signal_name(-code)
        if code == -signal.SIGKILL:
            return "oom", "killed by SIGKILL (likely the kernel OOM killer or a memory cap)"
        if code in (-signal.SIGINT, -signal.SIGTERM):
            return "interrupted", "killed by %s" % name
        if memory_capped and code in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS):
            return "oom", "killed by %s under the memory cap (allocation failure): %s" % (
                name, line)
        # A failed child without a row of its own is an OOM when its log ends like one.
        status = "oom" if errors.is_out_of_memory(tail) else "error"
        return status, "killed by %s: %s" % (name, line)
    if code == errors.EXIT_OOM or errors.is_out_of_memory("\n".join(tail.splitlines()[-20:])):
        status = "oom"
    elif code == errors.EXIT_NAN:
        status = "nan"
    elif code in (errors.EXIT_SIGINT, errors.EXIT_SIGTERM):
        status = "interrupted"
    else:
        status = "error"
    return status, "%s (exit code %d)" % (line or "no output", code)


def _config(p: "params_lib.Params") -> dict[str, str]:
    """What a failed child would have run (for rows it could not write), from its Params.

    Values that need the model registry or the devices (TensorFlow) stay empty: a batch or
    image size left at the model's default, the device kind unless --device was given.
    """
    # The mode rule of tfbench.engine.runner.resolve (which imports TensorFlow).
    mode = "eval" if p.eval else ("forward_only" if p.forward_only else "training")
    if p.data_only:
        mode = "data_only"
    batch = p.batch_size or 0
    real = bool(p.data_dir) and not p.use_synthetic_data
    return {
        "model": p.model, "mode": mode, "precision": params_lib.resolve_precision(p),
        "xla": "1" if params_lib.xla_requested(p) else "0",
        "batch_size": str(batch) if batch else "",
        "global_batch_size": str(batch * p.num_gpus) if batch else "",
        "num_devices": str(p.num_gpus),
        "device_kind": p.device.lower() if p.is_explicit("device") else "",
        "data_source": (p.data_name or "real") if real else "synthetic",
        "image_size": str(p.image_size) if p.image_size else "",
    }


def failure_row(args: Sequence[str], status: str, error: str, command: str) -> dict[str, str]:
    """A schema row for a point whose child wrote none: its configuration, status and error."""
    from tfbench import __version__
    row = {name: "" for name in csv_out.COLUMN_NAMES}
    row.update(_config(child_params(args)))
    row.update({
        "schema_version": str(csv_out.SCHEMA_VERSION), "run_id": new_run_id(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "status": status, "error": error, "hostname": socket.gethostname(),
        "tfbench_version": __version__, "command": command, "steps_run": "0",
    })
    return row


def read_rows(path: str) -> list[dict[str, str]]:
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as handle:
        return [{c: row.get(c) or "" for c in csv_out.COLUMN_NAMES}
                for row in csv.DictReader(handle)]


def point_rows(args: Sequence[str], outcome: ChildOutcome, csv_path: str, log_path: str,
               command: str, memory_capped: bool = False) -> list[dict[str, str]]:
    """The point's rows: the child's own (marked error if it then exited non-zero), else one
    failure row classified from the exit code and the log."""
    rows = read_rows(csv_path)
    tail = log_tail(log_path)
    if not rows:
        status, error = classify_failure(outcome, tail, memory_capped)
        return [failure_row(args, status, error, command)]
    if outcome.exit_code != 0 or outcome.timed_out:
        _, error = classify_failure(outcome, tail)
        for row in rows:
            if row["status"] == "ok":
                row["status"] = "error"
                row["error"] = "exited abnormally after writing its row: " + error
    return rows


# --- progress ----------------------------------------------------------------------------

def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return "%d:%02d:%02d" % (seconds // 3600, seconds % 3600 // 60, seconds % 60)


class Progress:
    """`[####......] 3/10 points | elapsed 0:01:23 | ETA 0:02:10 | <name>` on stderr.

    On a terminal the line is redrawn in place; otherwise one line per update. ETA is the mean
    point time times the points left. total=None (max-batch search) shows a count only.
    """

    def __init__(self, total: Optional[int], stream: Optional[TextIO] = None,
                 unit: str = "points", width: int = 24):
        self.total, self.unit, self.width = total, unit, width
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.durations: list[float] = []
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, current: str = "", now: Optional[float] = None) -> str:
        elapsed = (now if now is not None else time.monotonic()) - self.start
        done = len(self.durations)
        if self.total:
            filled = int(self.width * done / self.total)
            bar = "[%s%s] %d/%d %s" % ("#" * filled, "." * (self.width - filled), done,
                                       self.total, self.unit)
            if self.durations:
                eta = _hms(sum(self.durations) / done * (self.total - done))
            else:
                eta = "--:--:--"
            text = "%s | elapsed %s | ETA %s" % (bar, _hms(elapsed), eta)
        else:
            text = "%d %s done | elapsed %s" % (done, self.unit, _hms(elapsed))
        return text + (" | %s" % current if current else "")

    def show(self, current: str = "") -> None:
        text = self.line(current)
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finished(self, seconds: float) -> None:
        self.durations.append(seconds)

    def close(self) -> None:
        self.show("done")
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --- the sweep -----------------------------------------------------------------------------

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
    csv_file: Optional[str] = None    # also append every row here
    json_dir: Optional[str] = None    # default <out_dir>/runs

    @property
    def runs_dir(self) -> str:
        return self.json_dir or os.path.join(self.out_dir, "runs")

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
        self._usage_failures = 0

    def prepare(self) -> None:
        out = self.config.out_dir
        if os.path.exists(os.path.join(out, "sweep.csv")):
            raise errors.UsageError("%s already holds a sweep (sweep.csv); choose another "
                                    "--out_dir" % out)
        for sub in ("logs", "points"):
            os.makedirs(os.path.join(out, sub), exist_ok=True)

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
        rows = point_rows(args, outcome, csv_path, log_path, shlex.join(cmd),
                          bool(cfg.child_memory_limit_mb))
        record = PointRecord(point, rows, outcome.exit_code, outcome.seconds, log_path)
        self._save(record)
        if outcome.interrupted is not None:
            raise outcome.interrupted
        return record

    def _save(self, record: PointRecord) -> None:
        cfg = self.config
        csv_out.append_rows(os.path.join(cfg.out_dir, "sweep.csv"), record.rows)
        if cfg.csv_file:
            notice = csv_out.append_rows(cfg.csv_file, record.rows)
            if notice:
                print(notice, file=self.stream or sys.stderr)
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

    def run(self, points: Sequence[Point]) -> list[PointRecord]:
        """Runs every point; returns their records. A usage error in the very first point
        (exit code 2, no row) stops the study: it would fail the same way everywhere. Flags a
        child would refuse stop it before any point runs."""
        for point in points:
            check_point(point, point_flags(self.config.base_flags, point.flags))
        self.prepare()
        progress = Progress(len(points), self.stream)
        for i, point in enumerate(points):
            progress.show(point.name)
            record = self.run_point(point)
            progress.finished(record.seconds)
            if i == 0 and record.exit_code == errors.EXIT_USAGE:
                progress.close()
                raise errors.UsageError("the first point failed with a usage error: %s (log: %s)"
                                        % (record.rows[0]["error"], record.log_path))
        progress.close()
        return self.records


# --- max batch size ----------------------------------------------------------------------

FITS, NO_FIT = "fits", "oom"


@dataclasses.dataclass
class SearchResult:
    max_batch: Optional[int]            # None: nothing fits (or the search stopped early)
    probes: list[tuple[int, str]]       # (batch, status) in probe order
    limit_reached: bool = False
    error: str = ""


def search_max_batch(probe: Callable[[int], tuple[str, str]], start: int = 1,
                     limit: int = 65536, granularity: int = 1) -> SearchResult:
    """Largest batch (a multiple of `granularity`, <= limit) for which probe says it fits.

    probe(batch) -> (status, error): 'ok' fits, 'oom' does not; anything else stops the search
    (a crash is not a memory verdict). Doubling from `start` until a failure (or halving until a
    fit when `start` fails), then bisection between the largest fit and the smallest failure.
    """
    g = max(1, int(granularity))
    limit_u = max(1, int(limit) // g)
    probes: list[tuple[int, str]] = []

    def fits(units: int) -> Optional[bool]:
        status, error = probe(units * g)
        probes.append((units * g, status))
        if status == "ok":
            return True
        if status == "oom":
            return False
        raise _ProbeError("probe at batch %d ended with status %s: %s"
                          % (units * g, status, error))

    lo, hi = 0, None  # largest fit, smallest failure (units)
    unit = min(max(1, int(start) // g), limit_u)
    try:
        if fits(unit):
            lo = unit
            while hi is None:
                if lo >= limit_u:
                    return SearchResult(lo * g, probes, limit_reached=True)
                nxt = min(lo * 2, limit_u)
                if fits(nxt):
                    lo = nxt
                else:
                    hi = nxt
        else:
            hi = unit
            while lo == 0:
                if hi == 1:
                    return SearchResult(None, probes)
                nxt = hi // 2
                if fits(nxt):
                    lo = nxt
                else:
                    hi = nxt
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
    except _ProbeError as exc:
        return SearchResult(lo * g if lo else None, probes, error=str(exc))
    return SearchResult(lo * g, probes)


class _ProbeError(Exception):
    pass


@dataclasses.dataclass
class MaxBatchResult:
    values: dict[str, str]          # the group's swept values (model, precision, ...)
    search: SearchResult
    row: Optional[dict[str, str]]   # the ok row measured at the largest batch


# (flag, value for short probes, flags that exclude it): a user's --num_epochs excludes
# --num_batches (the legacy rule, tfbench.config.params.validate).
PROBE_DEFAULTS = (("num_batches", "2", ("num_epochs",)), ("num_warmup_batches", "1", ()))


def find_max_batch_sizes(sweep: Sweep, start: int = 1, limit: int = 65536,
                         granularity: int = 1) -> list[MaxBatchResult]:
    """Per grid point of the other axes (model, precision, ...): the largest batch that fits,
    each probe a child process (status oom or killed = does not fit)."""
    cfg = sweep.config
    if "batch_size" in cfg.keys:
        raise errors.UsageError("--find_max_batch_size searches batch_size itself; do not sweep "
                                "it")
    if cfg.scaling != "weak":
        raise errors.UsageError("--find_max_batch_size searches the per-device batch; it cannot "
                                "be combined with --scaling=strong")
    groups = expand_grid(cfg.axes, 1, "weak", cfg.base_flags) if cfg.axes else \
        [Point(0, 1, {}, {}, point_name(0, {}))]
    sweep.prepare()
    progress = Progress(None, sweep.stream, unit="probes")
    results = []
    for group in groups:
        measured: dict[int, PointRecord] = {}

        def probe(batch: int, group: Point = group) -> tuple[str, str]:
            values = dict(group.values, batch_size=str(batch))
            name = "%s_maxbatch-%d" % (group.name, batch)
            point = Point(group.index, 1, values, dict(group.flags, batch_size=str(batch)), name)
            progress.show(name)
            record = sweep.run_point(point)
            progress.finished(record.seconds)
            measured[batch] = record
            row = record.rows[0]
            return row["status"], row["error"]

        search = search_max_batch(probe, start, limit, granularity)
        best = measured.get(search.max_batch) if search.max_batch else None
        p = child_params(point_flags(cfg.base_flags, group.flags))
        values = {"model": p.model, "precision": params_lib.resolve_precision(p)}
        values.update(group.values)  # swept values win, in sweep order after model/precision
        results.append(MaxBatchResult(values, search, best.rows[0] if best else None))
    progress.close()
    return results


def max_batch_rows(results: Sequence[MaxBatchResult]) -> list[dict[str, object]]:
    """Table rows for the max-batch results (what to print and write)."""
    out = []
    for res in results:
        row = res.row or {}
        s = res.search
        if s.max_batch is None:
            value = "" if s.error else "none fits"
        elif s.limit_reached:
            value = ">= %d (limit)" % s.max_batch
        elif s.error:
            value = ">= %d (search stopped)" % s.max_batch
        else:
            value = str(s.max_batch)
        out.append({**res.values,
                    "max_batch_size": value,
                    "images_per_sec": _float(row.get("images_per_sec")),
                    "peak_mem_gb": _float(row.get("peak_mem_gb")),
                    "probes": " ".join("%d:%s" % (b, st) for b, st in s.probes),
                    "error": s.error})
    return out


def _float(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


# --- study outputs -------------------------------------------------------------------------

# Swept flags whose effect the CSV records under another column.
KEY_COLUMNS = {"num_gpus": "num_devices", "forward_only": "mode", "eval": "mode",
               "use_fp16": "precision", "xla_compile": "xla"}


def study_kinds(keys: Sequence[str]) -> list[str]:
    """Which studies a sweep over `keys` makes."""
    kinds = []
    if "num_gpus" in keys:
        kinds.append("scaling")
    if "batch_size" in keys:
        kinds.append("batch_size")
    if {"precision", "xla", "use_fp16", "xla_compile"} & set(keys):
        kinds.append("precision")
    if "image_size" in keys:
        kinds.append("resolution")
    return kinds


def extra_keys(keys: Sequence[str]) -> list[str]:
    """Swept flags with no CSV column of their own (optimizer, data_dir, ...): they become
    grouping columns so their points are kept apart in the study tables."""
    return [k for k in keys if k not in csv_out.COLUMN_NAMES and k not in KEY_COLUMNS]


def study_sections(records: Sequence[PointRecord], config: SweepConfig, knee_pct: float = 90.0,
                   max_results: Optional[Sequence[MaxBatchResult]] = None) -> list:
    """Tables for the end of a sweep: the studies its keys call for, max batch, all points."""
    import pandas as pd

    from tfbench.report import load, studies
    extra = extra_keys(config.keys)
    pairs = [(r.point, row) for r in records for row in r.rows]
    df = load.rows_frame([row for _, row in pairs])
    for key in extra:
        df[key] = [p.values.get(key, "") for p, _ in pairs]
    sections = []
    if max_results is not None:
        table = pd.DataFrame(max_batch_rows(max_results))
        sections.append(studies.Section(
            "max_batch", "Largest batch that fits", table, list(table.columns),
            "doubling, then bisection; each probe a separate process; oom = does not fit"))
    else:
        sections += studies.study_sections(df, study_kinds(config.keys), config.scaling,
                                           knee_pct, extra)
    points = pd.DataFrame([{
        "name": p.name, "status": row["status"], "images_per_sec": _float(row["images_per_sec"]),
        "peak_mem_gb": _float(row["peak_mem_gb"]), "seconds": r.seconds, "error": row["error"]}
        for r in records for p, row in [(r.point, x) for x in r.rows]])
    failed = int((points["status"] != "ok").sum()) if len(points) else 0
    sections.append(studies.Section(
        "all_points", "All points", points, list(points.columns),
        "%d of %d runs not ok; logs in %s" % (failed, len(points),
                                              os.path.join(config.out_dir, "logs"))))
    return sections
