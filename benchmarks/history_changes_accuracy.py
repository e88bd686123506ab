#!/usr/bin/env python3
"""Accuracy and speed of the history's change detection (tfbench/history/changes.py).

Synthetic series of one figure (level 1000, Gaussian run-to-run noise of a given coefficient of
variation; an outlier is a run slowed by 5-40%, uniformly), with the targets of issue 44:
  detection     a sustained shift of 5% at 1% noise, the series ending 5 runs after it (20-95
                runs before it, drawn uniformly), half of them up, half down: found when a change
                in the shift's direction is reported starting within 2 runs of the shift (the
                series ends 5 runs after it, so that is the 5th run after); at least 95% found
  false changes stationary series of 100 runs, 2% noise, 1% outliers: changes per 1,000 runs,
                at most 1
  speed         find_changes over 1,000 series of 100 runs (half stationary, half with a 5% shift
                at run 50, 2% noise, 1% outliers), one process: under 10 s (the CPU time is
                printed beside the wall time: on a shared machine the wall time is longer)
Beside them: how many of the found shifts start exactly at the shift, the same detection with
outliers and at 2% noise, a shift in the middle of a 100-run series, a 5% regression fixed
10 runs later (both ends found), and false changes when the noise has heavier tails (Student's t,
4 degrees of freedom). find_changes' parameters are options (its defaults by default),
so a default can be weighed against another on the same series.

  python benchmarks/history_changes_accuracy.py [--trials=2000] [--series=2000] [--seed=0]
      [--max_p=P] [--min_shift_pct=S] [--min_segment=N] [--window=W] [--outlier_mads=K]
      [--noise_factor=F]

Prints the figures, the CPU and each target's verdict; exit status 0 when all are met, 1 if not.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from typing import Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tfbench.measure import environment  # noqa: E402
from tfbench.history import changes  # noqa: E402

LEVEL = 1000.0
OUTLIER_SLOWDOWN = (0.05, 0.40)
TARGET_FOUND = 0.95
TARGET_FALSE_PER_1000 = 1.0
TARGET_SECONDS = 10.0
# How far from the planted shift a reported change may start and still be that shift: at a shift
# of 2.5 noise standard deviations even the least-squares split is one run off a quarter of the
# time.
TOLERANCE = 2


def noisy(rng: np.random.Generator, size: int, cv: float, outlier_rate: float,
          tails: Optional[int] = None) -> np.ndarray:
    """A stationary series at LEVEL: noise of coefficient of variation `cv` (Gaussian, or
    Student's t with `tails` degrees of freedom scaled to that deviation), each run an outlier
    (slowed by OUTLIER_SLOWDOWN) with probability `outlier_rate`."""
    shape = rng.standard_normal(size) if tails is None else \
        rng.standard_t(tails, size) / np.sqrt(tails / (tails - 2.0))
    x = LEVEL * (1.0 + cv * shape)
    slow = rng.random(size) < outlier_rate
    x[slow] *= 1.0 - rng.uniform(*OUTLIER_SLOWDOWN, size=int(slow.sum()))
    return x


def shifted(rng: np.random.Generator, before: int, after: int, shift_pct: float, cv: float,
            outlier_rate: float) -> np.ndarray:
    """`before` runs, then `after` runs moved by `shift_pct` percent."""
    x = noisy(rng, before + after, cv, outlier_rate)
    x[before:] *= 1.0 + shift_pct / 100.0
    return x


def score(found: changes.Segmentation, at: int, shift_pct: float) -> tuple[bool, bool]:
    """(found, exact): whether a change in the shift's direction starts within TOLERANCE runs of
    `at`, and whether one starts at `at` itself."""
    hits = [c.index for c in found.changes
            if abs(c.index - at) <= TOLERANCE and (c.pct > 0) == (shift_pct > 0)]
    return bool(hits), at in hits


def detection(rng: np.random.Generator, trials: int, shift_pct: float, cv: float, after: int,
              outlier_rate: float, before: Optional[int] = None, **options) -> dict:
    """Shifts found when the series ends `after` runs after them: the fraction found (within
    TOLERANCE runs of the shift) and the fraction found exactly at it."""
    found = exact = 0
    for trial in range(trials):
        runs_before = before if before is not None else int(rng.integers(20, 96))
        sign = 1.0 if trial % 2 else -1.0
        x = shifted(rng, runs_before, after, sign * shift_pct, cv, outlier_rate)
        hit, right = score(changes.find_changes(x, **options), runs_before, sign * shift_pct)
        found += hit
        exact += right
    return {"trials": trials, "found": found / trials, "exact": exact / trials}


def plateau(rng: np.random.Generator, trials: int, shift_pct: float, cv: float, length: int,
            outlier_rate: float, **options) -> dict:
    """A regression fixed `length` runs later, in the middle of 100 runs: the fraction of series
    where both ends are found (each within TOLERANCE runs)."""
    both = 0
    for _ in range(trials):
        x = noisy(rng, 100, cv, outlier_rate)
        x[45:45 + length] *= 1.0 - shift_pct / 100.0
        found = changes.find_changes(x, **options)
        both += score(found, 45, -shift_pct)[0] and score(found, 45 + length, shift_pct)[0]
    return {"trials": trials, "found": both / trials}


def false_changes(rng: np.random.Generator, series: int, size: int, cv: float,
                  outlier_rate: float, tails: Optional[int] = None, **options) -> dict:
    """Changes reported on stationary series, per 1,000 runs."""
    count = outliers = 0
    for _ in range(series):
        result = changes.find_changes(noisy(rng, size, cv, outlier_rate, tails), **options)
        count += len(result.changes)
        outliers += len(result.outliers)
    runs = series * size
    return {"runs": runs, "changes": count, "per_1000_runs": 1000.0 * count / runs,
            "outliers_per_1000_runs": 1000.0 * outliers / runs}


def speed(rng: np.random.Generator, series: int = 1000, size: int = 100, **options) -> dict:
    """Seconds of find_changes over `series` series (built before the clock starts)."""
    data = [shifted(rng, size // 2, size - size // 2, -5.0 if i % 2 else 0.0, 0.02, 0.01)
            for i in range(series)]
    start, cpu = time.perf_counter(), time.process_time()
    for x in data:
        changes.find_changes(x, **options)
    return {"series": series, "runs": size, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu}




def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000, help="shifted series per detection row")
    ap.add_argument("--series", type=int, default=2000, help="stationary series of 100 runs")
    ap.add_argument("--seed", type=int, default=0)
    for name in ("min_shift_pct", "max_p", "outlier_mads", "noise_factor"):
        ap.add_argument("--" + name, type=float, default=getattr(changes, name.upper()))
    for name in ("min_segment", "window"):
        ap.add_argument("--" + name, type=int, default=getattr(changes, name.upper()))
    args = ap.parse_args(argv)
    options = {name: getattr(args, name) for name in (
        "min_shift_pct", "max_p", "outlier_mads", "noise_factor", "min_segment", "window")}
    rng = np.random.default_rng(args.seed)
    import scipy
    print("CPU: %s (%d CPUs); Python %s, numpy %s, scipy %s"
          % (environment.cpu_model(), os.cpu_count() or 0, platform.python_version(),
             np.__version__, scipy.__version__))
    print("find_changes(%s)" % ", ".join("%s=%g" % item for item in options.items()))
    main_row = detection(rng, args.trials, 5.0, 0.01, 5, 0.0, **options)
    rows = [("5% shift, 1% noise, 5 runs after", main_row),
            ("5% shift, 1% noise, 1% outliers, 5 runs after",
             detection(rng, args.trials, 5.0, 0.01, 5, 0.01, **options)),
            ("5% shift, 2% noise, 1% outliers, 5 runs after",
             detection(rng, args.trials, 5.0, 0.02, 5, 0.01, **options)),
            ("5% shift at run 50 of 100, 2% noise, 1% outliers",
             detection(rng, args.trials, 5.0, 0.02, 50, 0.01, before=50, **options))]
    for name, row in rows:
        print("%-50s found %6.2f%%  at the shift %6.2f%%  (%d series)"
              % (name, 100 * row["found"], 100 * row["exact"], row["trials"]))
    fixed = plateau(rng, args.trials, 5.0, 0.02, 10, 0.01, **options)
    print("%-50s both ends found %6.2f%%  (%d series)"
          % ("5% regression fixed 10 runs later, 2% noise, 1% o.", 100 * fixed["found"],
             fixed["trials"]))
    false = false_changes(rng, args.series, 100, 0.02, 0.01, **options)
    heavy = false_changes(rng, args.series, 100, 0.02, 0.01, tails=4, **options)
    for name, row in (("stationary, 2% noise, 1% outliers", false),
                      ("the same, noise Student's t with 4 df", heavy)):
        print("%-50s %.3f false changes per 1,000 runs (%d in %d runs); %.2f outliers per 1,000"
              % (name, row["per_1000_runs"], row["changes"], row["runs"],
                 row["outliers_per_1000_runs"]))
    timing = speed(rng, **options)
    print("%-50s %.2f s (CPU time %.2f s: on a busy machine the wall time is longer)"
          % ("find_changes over 1,000 series of 100 runs", timing["seconds"],
             timing["cpu_seconds"]))
    verdicts = [("shifts found within 5 runs >= 95%", main_row["found"] >= TARGET_FOUND),
                ("false changes <= 1 per 1,000 runs",
                 false["per_1000_runs"] <= TARGET_FALSE_PER_1000),
                ("1,000 series under 10 s", timing["seconds"] < TARGET_SECONDS)]
    for name, ok in verdicts:
        print("target %-36s %s" % (name, "met" if ok else "NOT MET"))
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
