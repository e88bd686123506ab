#!/usr/bin/env python
"""Side-by-side speed of tfbench and the legacy tf_cnn_benchmarks.py on the same configurations.

Each run is its own subprocess. For every configuration the two programs run alternately
(tfbench first on even repeats, legacy first on odd ones, so slow drift of a shared machine hits
both alike), `total images/sec` is read from the second-to-last line of the merged stdout+stderr
(as legacy parsers do), and the table reports each side's median and the median of the per-pair
ratios tfbench/legacy. `ready s` is the wall time from process start until `Done warm up` is
printed: imports, model build, compilation and the (equal) warm-up steps.

  python benchmarks/side_by_side.py --quick --configs=trivial
  python benchmarks/side_by_side.py --repeats=5 --markdown=side_by_side.md --csv=side_by_side.csv

See benchmarks/README.md for the configurations and how they are made equal.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import io
import math
import os
import platform
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the legacy side is: the legacy script and a python that runs it (tf-keras, away from
# tfbench's Keras 3; benchmarks/README.md sets them up). A flag beats its environment variable.
LEGACY_PYTHON_ENV = "TFBENCH_LEGACY_PYTHON"
LEGACY_SCRIPT_ENV = "TFBENCH_LEGACY_SCRIPT"
TFBENCH = "tfbench"
LEGACY = "legacy"

_TOTAL_RE = re.compile(r"^total images/sec: ([0-9]+(?:\.[0-9]*)?)$")
_TF_VERSION_RE = re.compile(r"^TensorFlow:\s+(\S+)$", re.MULTILINE)
_DASHES = "-" * 64


class LogParseError(ValueError):
    """The merged output does not end with the classic footer."""


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One configuration, passed identically to both programs."""
    name: str
    model: str
    batch_size: int
    num_batches: int
    num_warmup_batches: int
    forward_only: bool = False
    init_learning_rate: Optional[float] = None
    target: float = 1.0  # tfbench/legacy ratio this configuration should reach
    data_name: str = ""  # "cifar10" for the CIFAR-10 models (synthetic data of its shapes)

    @property
    def mode(self) -> str:
        return "forward" if self.forward_only else "train"

    def args(self) -> list[str]:
        """Flags given to both programs (the legacy script has no --image_size: native sizes)."""
        args = ["--model=%s" % self.model, "--batch_size=%d" % self.batch_size,
                "--num_batches=%d" % self.num_batches,
                "--num_warmup_batches=%d" % self.num_warmup_batches,
                "--device=cpu", "--data_format=NHWC"]
        if self.data_name:
            args.append("--data_name=%s" % self.data_name)
        if self.forward_only:
            args.append("--forward_only")
        if self.init_learning_rate is not None:
            args.append("--init_learning_rate=%g" % self.init_learning_rate)
        return args


# Performance targets (fp32): convolution kernels dominate the big models; framework overhead
# dominates trivial, lenet and batch-1 inference, so tfbench must gain more there.
COMPUTE_BOUND_TARGET = 1.05
OVERHEAD_BOUND_TARGET = 1.10


def _cfg(model: str, mode: str, batch_size: int, num_batches: int, warmup: int,
         suffix: str = "", lr: Optional[float] = None,
         target: float = COMPUTE_BOUND_TARGET, data_name: str = "") -> BenchConfig:
    return BenchConfig("%s/%s%s" % (model, mode, suffix), model, batch_size, num_batches, warmup,
                       forward_only=(mode == "forward"), init_learning_rate=lr, target=target,
                       data_name=data_name)


# Models without batch norm diverge on the unnormalised synthetic images at their default LR:
# legacy keeps timing NaN steps (whose speed need not match finite ones), tfbench stops
# with an error. A tiny constant LR, given to both, keeps both finite; it does not change the work.
NO_DIVERGENCE_LR = 1e-6

# Native image sizes (trivial 227, lenet 28, resnet50/vgg16 224, inception3 299); the slow models
# get small batches and few steps instead of a smaller image, which the legacy script cannot take.
DEFAULT_CONFIGS: tuple[BenchConfig, ...] = (
    _cfg("trivial", "train", 32, 200, 10, target=OVERHEAD_BOUND_TARGET),
    _cfg("trivial", "forward", 32, 200, 10, target=OVERHEAD_BOUND_TARGET),
    _cfg("lenet", "train", 32, 200, 10, lr=NO_DIVERGENCE_LR, target=OVERHEAD_BOUND_TARGET),
    _cfg("lenet", "forward", 32, 200, 10, target=OVERHEAD_BOUND_TARGET),
    _cfg("resnet50", "train", 32, 20, 5),
    _cfg("resnet50", "forward", 32, 30, 5),
    _cfg("resnet50", "forward", 1, 100, 10, suffix="_bs1", target=OVERHEAD_BOUND_TARGET),
    _cfg("vgg16", "train", 16, 10, 3, lr=NO_DIVERGENCE_LR),
    _cfg("vgg16", "forward", 16, 20, 3),
    _cfg("inception3", "train", 16, 10, 3),
    _cfg("inception3", "forward", 16, 20, 3),
    _cfg("resnet20", "train", 32, 50, 5, data_name="cifar10"),
)

# --quick: same configurations, tiny batches and steps; checks the machinery, not the speed.
_QUICK_BATCH = {"trivial": 8, "lenet": 8}
QUICK_NUM_BATCHES = 3
QUICK_WARMUP = 1
QUICK_SLOW_BATCH = 2


def quick_variant(config: BenchConfig) -> BenchConfig:
    """The --quick version of a config: batch <= 8 (2 for big models), 3 steps, 1 warm-up."""
    batch = min(config.batch_size, _QUICK_BATCH.get(config.model, QUICK_SLOW_BATCH))
    return dataclasses.replace(config, batch_size=batch, num_batches=QUICK_NUM_BATCHES,
                               num_warmup_batches=QUICK_WARMUP)


def select_configs(configs: Sequence[BenchConfig], spec: str) -> list[BenchConfig]:
    """Comma-separated config names (`resnet50/train`) or model names (all of its configs).

    Keeps the order of `configs`; raises ValueError naming the valid choices on an unknown entry.
    """
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    if not wanted:
        return list(configs)
    names = {c.name for c in configs}
    models = {c.model for c in configs}
    unknown = [w for w in wanted if w not in names and w not in models]
    if unknown:
        raise ValueError("unknown config %s; choose from models %s or configs %s" % (
            ", ".join(unknown), ", ".join(sorted(models)), ", ".join(c.name for c in configs)))
    return [c for c in configs if c.name in wanted or c.model in wanted]


def override_config(config: BenchConfig, batch_size: Optional[int] = None,
                    num_batches: Optional[int] = None,
                    num_warmup_batches: Optional[int] = None,
                    target: Optional[float] = None) -> BenchConfig:
    """Applies command-line overrides (None = keep)."""
    changes = {k: v for k, v in (("batch_size", batch_size), ("num_batches", num_batches),
                                 ("num_warmup_batches", num_warmup_batches),
                                 ("target", target)) if v is not None}
    return dataclasses.replace(config, **changes)


def parse_total_images_per_sec(output: str) -> float:
    """`total images/sec` from the second-to-last line of merged output, as legacy parsers read it.

    Strict on purpose: anything printed after the closing dashes line (on either stream) breaks
    those parsers, so it is an error here too.
    """
    lines = output.rstrip("\n").split("\n")
    if len(lines) < 2:
        raise LogParseError("output has fewer than two lines")
    match = _TOTAL_RE.match(lines[-2].rstrip("\r"))
    if not match or lines[-1].rstrip("\r") != _DASHES:
        tail = " | ".join(lines[-3:])
        raise LogParseError("second-to-last line is not 'total images/sec: N' followed by the "
                            "dashes line; output ends with: %s" % tail[-300:])
    return float(match.group(1))


def parse_tf_version(output: str) -> Optional[str]:
    """The `TensorFlow:  X.Y` header value, or None."""
    match = _TF_VERSION_RE.search(output)
    return match.group(1) if match else None


def pair_ratios(tfbench: Sequence[Optional[float]],
                legacy: Sequence[Optional[float]]) -> list[float]:
    """tfbench_i / legacy_i for each repeat where both runs produced a positive figure."""
    return [t / l for t, l in zip(tfbench, legacy) if t is not None and l is not None and l > 0]


def median_or_none(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


DEFAULT_CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class MedianInterval:
    """A distribution-free interval for the median ratio and the probability that it holds it."""
    low: float
    high: float
    confidence: float


def _binomial_half_cdf(n: int, k: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n


def median_interval(values: Sequence[float],
                    confidence: float = DEFAULT_CONFIDENCE) -> Optional[MedianInterval]:
    """The narrowest order-statistic interval [x(k), x(n+1-k)] that holds the true median with
    at least `confidence`; with too few values for that, [min, max] and its lower confidence.

    Order statistics assume nothing about the ratios' distribution (run-to-run noise on a shared
    machine is skewed), and each pair's ratio lands below the true median with probability 1/2:
    the interval misses it when k-1 or fewer ratios fall on one side. None below two values.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n < 2:
        return None
    k = 1
    while k + 1 <= n // 2 and 1.0 - 2.0 * _binomial_half_cdf(n, k) >= confidence:
        k += 1
    return MedianInterval(ordered[k - 1], ordered[n - k], 1.0 - 2.0 * _binomial_half_cdf(n, k - 1))


MET, NOT_MET, UNCLEAR = "met", "not met", "unclear"


def verdict(interval: Optional[MedianInterval], target: float) -> str:
    """met: the whole interval reaches the target; not met: all of it falls short; else unclear."""
    if interval is None:
        return UNCLEAR
    if interval.low >= target:
        return MET
    if interval.high < target:
        return NOT_MET
    return UNCLEAR


@dataclasses.dataclass
class RunOutcome:
    """One subprocess run of one program on one configuration."""
    config: str
    program: str  # TFBENCH | LEGACY
    repeat: int
    returncode: Optional[int]  # None: killed on timeout
    images_per_sec: Optional[float]
    ready_s: Optional[float]
    wall_s: float
    tf_version: Optional[str] = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.images_per_sec is not None


def outcome_from_output(config: str, program: str, repeat: int, returncode: Optional[int],
                        output: str, ready_s: Optional[float], wall_s: float) -> RunOutcome:
    """Interprets one finished run: exit code first, then the footer."""
    outcome = RunOutcome(config, program, repeat, returncode, None, ready_s, wall_s,
                         tf_version=parse_tf_version(output))
    last = output.rstrip("\n").rsplit("\n", 1)[-1][-200:]
    if returncode is None:
        outcome.error = "timed out; last line: %s" % last
    elif returncode != 0:
        outcome.error = "exit %d; last line: %s" % (returncode, last)
    else:
        try:
            outcome.images_per_sec = parse_total_images_per_sec(output)
        except LogParseError as exc:
            outcome.error = str(exc)
    return outcome


@dataclasses.dataclass
class Summary:
    """One table row."""
    config: BenchConfig
    tfbench_median: Optional[float]
    legacy_median: Optional[float]
    median_ratio: Optional[float]
    pairs: int
    tfbench_ready_s: Optional[float]
    legacy_ready_s: Optional[float]
    failures: int
    errors: list[str]
    ratio_interval: Optional[MedianInterval] = None

    @property
    def verdict(self) -> str:
        return verdict(self.ratio_interval, self.config.target)


def summarize(config: BenchConfig, outcomes: Sequence[RunOutcome],
              confidence: float = DEFAULT_CONFIDENCE) -> Summary:
    """Medians and median per-pair ratio of one configuration's runs (pairs matched by repeat)."""
    mine = [o for o in outcomes if o.config == config.name]
    repeats = sorted({o.repeat for o in mine})

    def series(program: str, field: str) -> list[Optional[float]]:
        by_repeat = {o.repeat: o for o in mine if o.program == program}
        return [getattr(by_repeat[r], field) if r in by_repeat else None for r in repeats]

    tfb, leg = series(TFBENCH, "images_per_sec"), series(LEGACY, "images_per_sec")
    ratios = pair_ratios(tfb, leg)
    failed = [o for o in mine if not o.ok]
    return Summary(
        config=config, tfbench_median=median_or_none(tfb), legacy_median=median_or_none(leg),
        median_ratio=statistics.median(ratios) if ratios else None, pairs=len(ratios),
        tfbench_ready_s=median_or_none(series(TFBENCH, "ready_s")),
        legacy_ready_s=median_or_none(series(LEGACY, "ready_s")),
        failures=len(failed),
        errors=["%s #%d: %s" % (o.program, o.repeat, o.error) for o in failed],
        ratio_interval=median_interval(ratios, confidence))


def _fmt(value: Optional[float], spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _fmt_interval(interval: Optional[MedianInterval]) -> str:
    if interval is None:
        return "n/a"
    return "%.3f-%.3f (%.0f%%)" % (interval.low, interval.high, 100.0 * interval.confidence)


TABLE_COLUMNS = ("config", "batch", "steps", "tfbench img/s", "legacy img/s", "ratio",
                 "ratio interval", "target", "verdict", "pairs", "tfbench ready s",
                 "legacy ready s", "failed")


def table_rows(summaries: Sequence[Summary]) -> list[list[str]]:
    return [[s.config.name, str(s.config.batch_size), str(s.config.num_batches),
             _fmt(s.tfbench_median, ".2f"), _fmt(s.legacy_median, ".2f"),
             _fmt(s.median_ratio, ".3f"), _fmt_interval(s.ratio_interval),
             "%.2f" % s.config.target, s.verdict, str(s.pairs), _fmt(s.tfbench_ready_s, ".1f"),
             _fmt(s.legacy_ready_s, ".1f"), str(s.failures)] for s in summaries]


def format_table(summaries: Sequence[Summary]) -> str:
    """Fixed-width text table (first column left-aligned, numbers right-aligned)."""
    rows = [list(TABLE_COLUMNS)] + table_rows(summaries)
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_COLUMNS))]
    out = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def format_markdown(summaries: Sequence[Summary], meta: dict[str, str]) -> str:
    """Markdown table preceded by one line per metadata item (date, machine, versions...)."""
    lines = ["- %s: %s" % (k, v) for k, v in meta.items()]
    lines += ["", "| " + " | ".join(TABLE_COLUMNS) + " |",
              "|" + "|".join(["---"] + ["---:"] * (len(TABLE_COLUMNS) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(summaries)]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ("config", "model", "mode", "batch_size", "num_batches", "num_warmup_batches",
               "tfbench_images_per_sec", "legacy_images_per_sec", "median_ratio", "ratio_low",
               "ratio_high", "interval_confidence", "target", "verdict", "pairs",
               "tfbench_ready_s", "legacy_ready_s", "failures")


def _rounded(value: Optional[float], digits: int) -> object:
    return "" if value is None else round(value, digits)


def format_csv(summaries: Sequence[Summary]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in summaries:
        c, interval = s.config, s.ratio_interval
        writer.writerow([c.name, c.model, c.mode, c.batch_size, c.num_batches,
                         c.num_warmup_batches, _rounded(s.tfbench_median, 2),
                         _rounded(s.legacy_median, 2), _rounded(s.median_ratio, 4),
                         _rounded(interval and interval.low, 4),
                         _rounded(interval and interval.high, 4),
                         _rounded(interval and interval.confidence, 4), c.target, s.verdict,
                         s.pairs,
                         _rounded(s.tfbench_ready_s, 2), _rounded(s.legacy_ready_s, 2),
                         s.failures])
    return buf.getvalue()


RAW_COLUMNS = ("config", "program", "repeat", "returncode", "images_per_sec", "ready_s", "wall_s",
               "tf_version", "error")


def format_raw_csv(outcomes: Sequence[RunOutcome]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(RAW_COLUMNS)
    for o in outcomes:
        row = dataclasses.asdict(o)
        row["ready_s"], row["wall_s"] = _rounded(o.ready_s, 2), _rounded(o.wall_s, 2)
        writer.writerow(["" if row[k] is None else row[k] for k in RAW_COLUMNS])
    return buf.getvalue()


def run_order(repeat: int) -> tuple[str, str]:
    """Which program goes first in this repeat: alternate so neither always runs first."""
    return (TFBENCH, LEGACY) if repeat % 2 == 0 else (LEGACY, TFBENCH)


def run_command(cmd: Sequence[str], env: dict[str, str], cwd: str,
                timeout: float) -> tuple[Optional[int], str, Optional[float], float]:
    """Runs cmd with stdout+stderr merged; returns (exit code or None on timeout, output,
    seconds until 'Done warm up' appeared or None, wall seconds)."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
    except OSError as exc:
        return 127, "cannot start %s: %s\n" % (cmd[0], exc), None, 0.0
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    chunks, ready = [], None
    try:
        for line in proc.stdout:
            chunks.append(line)
            if ready is None and line.rstrip("\r\n") == "Done warm up":
                ready = time.monotonic() - start
        proc.wait()
    finally:
        timer.cancel()
    wall = time.monotonic() - start
    return (None if timed_out.is_set() else proc.returncode), "".join(chunks), ready, wall


@dataclasses.dataclass(frozen=True)
class Programs:
    """How to start each side."""
    tfbench_cmd: tuple[str, ...]
    legacy_cmd: tuple[str, ...]
    tfbench_extra: tuple[str, ...] = ()
    legacy_extra: tuple[str, ...] = ()

    def command(self, program: str, config: BenchConfig) -> list[str]:
        if program == TFBENCH:
            # --csv_file= : no result file from the comparison runs.
            return list(self.tfbench_cmd) + config.args() + ["--csv_file="] + list(
                self.tfbench_extra)
        return list(self.legacy_cmd) + config.args() + list(self.legacy_extra)


def program_env(program: str, base: Optional[dict[str, str]] = None) -> dict[str, str]:
    """Environment for one side: unbuffered output (honest 'ready' timestamps and the true
    stream interleaving), the checkout on PYTHONPATH for tfbench, tf-keras for legacy."""
    env = dict(os.environ if base is None else base)
    env["PYTHONUNBUFFERED"] = "1"
    if program == TFBENCH:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    else:
        # The legacy script imports tf.nn.rnn_cell, which only exists with tf-keras (Keras 2).
        env["TF_USE_LEGACY_KERAS"] = "1"
    return env


def run_side_by_side(configs: Sequence[BenchConfig], programs: Programs, repeats: int,
                     timeout: float, log: Callable[[str], None],
                     runner: Callable[..., tuple] = run_command) -> list[RunOutcome]:
    """Runs every configuration `repeats` times on both sides, alternating; returns all outcomes.

    Runs happen in a scratch working directory (removed afterwards) so nothing either program
    writes by default lands in the caller's directory.
    """
    outcomes: list[RunOutcome] = []
    total = len(configs) * repeats * 2
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as scratch:
        for config in configs:
            for repeat in range(repeats):
                for program in run_order(repeat):
                    code, output, ready, wall = runner(programs.command(program, config),
                                                       program_env(program), scratch, timeout)
                    outcome = outcome_from_output(config.name, program, repeat, code, output,
                                                  ready, wall)
                    outcomes.append(outcome)
                    result = ("%.2f images/sec, ready %s s" % (
                        outcome.images_per_sec, _fmt(outcome.ready_s, ".1f"))
                              if outcome.ok else "FAILED: " + outcome.error)
                    log("[%d/%d] %s %s #%d: %s (%.1f s)" % (
                        len(outcomes), total, config.name, program, repeat, result, wall))
    return outcomes


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_metadata(outcomes: Sequence[RunOutcome], repeats: int, quick: bool,
                 confidence: float = DEFAULT_CONFIDENCE) -> dict[str, str]:
    """Date, machine and versions for the Markdown header."""
    def version(program: str) -> str:
        found = sorted({o.tf_version for o in outcomes if o.program == program and o.tf_version})
        return ", ".join(found) or "unknown"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": "%s, %s, %d logical CPUs" % (socket.gethostname(), _cpu_model(),
                                                os.cpu_count() or 0),
        "TensorFlow": "tfbench %s, legacy %s" % (version(TFBENCH), version(LEGACY)),
        "method": "%d alternating repeats per config%s; ratio = median of per-pair "
                  "tfbench/legacy images/sec; --device=cpu --data_format=NHWC, fp32, synthetic"
                  % (repeats, " (--quick: tiny batches, not a performance result)" if quick
                     else ""),
        "ratio interval": INTERVAL_HELP % (100.0 * confidence),
    }


INTERVAL_HELP = ("order-statistic interval for the median ratio, holding it with at least %.0f%% "
                 "where the pairs allow (6 or more), else [min, max] with its lower confidence "
                 "in brackets; verdict: met when the whole interval reaches the target, not met "
                 "when all of it falls short, else unclear")


def verdict_counts(summaries: Sequence[Summary]) -> str:
    """`targets: 2 met, 1 not met, 3 unclear` (categories that occur, in that order)."""
    counts = [(sum(1 for s in summaries if s.verdict == v), v) for v in (MET, NOT_MET, UNCLEAR)]
    return "targets: " + ", ".join("%d %s" % (n, v) for n, v in counts if n)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Run tfbench and the legacy tf_cnn_benchmarks.py alternately on the same "
                    "configurations and print the median images/sec ratio.")
    parser.add_argument("--configs", default="",
                        help="comma-separated config names (e.g. resnet50/train) or model names; "
                             "default: all. --list shows them.")
    parser.add_argument("--list", action="store_true", help="list the configurations and exit")
    parser.add_argument("--quick", action="store_true",
                        help="tiny batches, %d steps, %d warm-up, 1 repeat unless --repeats: "
                             "checks the setup" % (QUICK_NUM_BATCHES, QUICK_WARMUP))
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per program per config (default 3, --quick 1)")
    parser.add_argument("--batch_size", type=int, help="override every config's batch size")
    parser.add_argument("--num_batches", type=int, help="override every config's timed steps")
    parser.add_argument("--num_warmup_batches", type=int, help="override every config's warm-up")
    parser.add_argument("--tfbench_cmd", default=None,
                        help="command that starts tfbench (shell-split); default: "
                             "'%s -m tfbench' with this checkout on PYTHONPATH" % sys.executable)
    parser.add_argument("--legacy_python", default=None,
                        help="the python that runs the legacy script; default: $%s"
                             % LEGACY_PYTHON_ENV)
    parser.add_argument("--legacy_script", default=None,
                        help="the legacy tf_cnn_benchmarks.py; default: $%s" % LEGACY_SCRIPT_ENV)
    parser.add_argument("--tfbench_args", default="",
                        help="extra flags for tfbench only, e.g. '--precision=bf16'")
    parser.add_argument("--legacy_args", default="", help="extra flags for the legacy script only")
    parser.add_argument("--target", type=float, default=None,
                        help="ratio every config must reach (default: the fp32 targets, "
                             "%.2f where overhead dominates, else %.2f); e.g. 2.0 with "
                             "--tfbench_args=--precision=bf16"
                             % (OVERHEAD_BOUND_TARGET, COMPUTE_BOUND_TARGET))
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                        help="confidence of the ratio interval, in (0, 1)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--csv", default="", help="write the summary table as CSV here")
    parser.add_argument("--markdown", default="", help="write the summary table as Markdown here")
    parser.add_argument("--raw_csv", default="", help="write every single run as CSV here")
    parser.add_argument("--dry_run", action="store_true",
                        help="print the commands that would run and exit")
    return parser


def legacy_command(args: argparse.Namespace,
                   environ: Optional[dict] = None) -> tuple[str, str]:
    """(python, script) of the legacy side: each flag, else its environment variable; a
    ValueError names what is missing."""
    environ = os.environ if environ is None else environ
    python = args.legacy_python or environ.get(LEGACY_PYTHON_ENV, "")
    script = args.legacy_script or environ.get(LEGACY_SCRIPT_ENV, "")
    missing = ["--%s=PATH or set %s" % (flag, env) for flag, env, value in (
        ("legacy_python", LEGACY_PYTHON_ENV, python), ("legacy_script", LEGACY_SCRIPT_ENV, script))
        if not value]
    if missing:
        raise ValueError("the legacy side is not set: give %s (benchmarks/README.md, \"Setting "
                         "up the legacy script\")" % ", and ".join(missing))
    return python, script


def resolve_configs(args: argparse.Namespace) -> list[BenchConfig]:
    configs = select_configs(DEFAULT_CONFIGS, args.configs)
    if args.quick:
        configs = [quick_variant(c) for c in configs]
    return [override_config(c, args.batch_size, args.num_batches, args.num_warmup_batches,
                            args.target) for c in configs]


def _positive(name: str, value: Optional[int]) -> None:
    if value is not None and value <= 0:
        raise ValueError("--%s must be positive, got %d" % (name, value))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        for name in ("repeats", "batch_size", "num_batches"):
            _positive(name, getattr(args, name))
        if args.num_warmup_batches is not None and args.num_warmup_batches < 0:
            raise ValueError("--num_warmup_batches must be >= 0")
        if args.target is not None and not args.target > 0:
            raise ValueError("--target must be positive, got %g" % args.target)
        if not 0.0 < args.confidence < 1.0:
            raise ValueError("--confidence must be between 0 and 1, got %g" % args.confidence)
        configs = resolve_configs(args)
    except ValueError as exc:
        print("side_by_side.py: error: %s" % exc, file=sys.stderr)
        return 2
    if args.list:
        for c in configs:
            print("%-22s target %.2f  %s" % (c.name, c.target, " ".join(c.args())))
        return 0
    try:
        legacy_cmd = legacy_command(args)
    except ValueError as exc:
        print("side_by_side.py: error: %s" % exc, file=sys.stderr)
        return 2
    repeats = args.repeats or (1 if args.quick else 3)
    tfbench_cmd = (tuple(shlex.split(args.tfbench_cmd)) if args.tfbench_cmd
                   else (sys.executable, "-m", "tfbench"))
    programs = Programs(tfbench_cmd, legacy_cmd,
                        tuple(shlex.split(args.tfbench_args)), tuple(shlex.split(args.legacy_args)))
    if args.dry_run:
        prefix = {TFBENCH: "" if args.tfbench_cmd else "PYTHONPATH=%s " % shlex.quote(REPO_ROOT),
                  LEGACY: "TF_USE_LEGACY_KERAS=1 "}
        for c in configs:
            for program in (TFBENCH, LEGACY):
                print(prefix[program] + shlex.join(programs.command(program, c)))
        return 0
    for path in legacy_cmd:
        if not os.path.exists(path):
            print("side_by_side.py: error: %s does not exist (see benchmarks/README.md for the "
                  "legacy setup)" % path, file=sys.stderr)
            return 2

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    outcomes = run_side_by_side(configs, programs, repeats, args.timeout, log)
    summaries = [summarize(c, outcomes, args.confidence) for c in configs]
    print(format_table(summaries))
    print(verdict_counts(summaries))
    for s in summaries:
        for error in s.errors:
            print("%s: %s" % (s.config.name, error))
    meta = run_metadata(outcomes, repeats, args.quick, args.confidence)
    for path, text in ((args.csv, format_csv(summaries)),
                       (args.markdown, format_markdown(summaries, meta)),
                       (args.raw_csv, format_raw_csv(outcomes))):
        if path:
            with open(path, "w") as f:
                f.write(text)
    return 1 if any(s.failures for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
