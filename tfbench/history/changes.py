"""Change points of a series: E-Divisive means with a t-test (Hunter, Otava); outliers apart.

A series is one figure of one configuration on one machine, in run order. A change point is a
sustained shift backed by a statistical test, not one slow run. The method is Hunter's (Fleming et
al., "Hunter: Using Change Point Detection to Hunt for Performance Regressions", ICPE 2023,
arXiv 2301.03034) as Apache Otava implements it, in three steps:

1. Split: overlapping windows of `window` runs (step window/2). In each, E-Divisive means
   (Matteson & James 2014, alpha = 1) proposes the split tau of an interval, with the end kappa
   of the runs after it, that maximises the divergence Q-hat between runs [start, tau) and
   [tau, kappa); Student's t-test between those runs accepts it at the relaxed first-pass level
   (10 x `max_p`, Otava's), and the search goes on in the pieces until the best split left fails.
   The union over the windows is the set of "weak" change points.
2. Merge: while a change point fails, the weakest (largest p) goes and its neighbours are judged
   again. A change point passes with p <= `max_p` for the t-test between the runs from its
   neighbours to it and on, a shift of the medians of at least `min_shift_pct` and at least
   `noise_factor` times the runs' own spread, and `min_segment` runs on each side.
3. Place: each change point moves to the least-squares split of the runs between its neighbours
   (the maximum-likelihood place of a shift in the mean), and the merge runs again on the whole
   series (below).

Where this departs from Otava, for benchmark results: Otava tests a split against all runs to the
interval's end; here against the runs the divergence compared, up to kappa, so that a plateau (a
regression fixed a week later) is found at both ends. Runs far from the median of the 5 around
them (more than `outlier_mads` robust standard deviations, and more than `min_shift_pct`) stay out
of the search, and the series' outliers are then the runs that far from their own segment's
median: never a change, never in a median or a test, and a change that they leave with fewer than
`min_segment` runs a side, or whose shift no longer passes, goes. Before and after are medians.
Each run's own spread (the coefficient of variation of its repeats or steps), where known, sets
the noise floor a shift must clear. The step `place` and the noise floor are tfbench's.

Pure: numpy and scipy only, no TensorFlow and no store. The defaults, why, and their measured
accuracy: docs/history.md ("The method"), measured by benchmarks/history_changes_accuracy.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

# The defaults, tuned with benchmarks/history_changes_accuracy.py (docs/history.md, "The method").
MIN_SHIFT_PCT = 2.0     # smallest shift of the medians, in percent, that is a change
MAX_P = 0.0001          # Otava's 0.001 lets 3-5x more noise through (docs/history.md)
MIN_SEGMENT = 3         # runs on each side of a change: a shift is found after its 3rd run
WINDOW = 50             # Otava's default window length
OUTLIER_MADS = 5.0      # robust standard deviations (1.4826 MAD) from a median: an outlier
NOISE_FACTOR = 1.0      # a shift must reach this many times the runs' own spread
# The rolling median that finds the outliers to leave out of the search: 5 runs, so it follows a
# step of 3 runs or more (their majority of any 5 consecutive runs) but not one or two slow runs.
_ROLLING = 5
_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution -> its standard deviation


@dataclass(frozen=True)
class Change:
    """One change point: the series moved from `before` to `after` at run `index`."""

    index: int              # the first run after the shift (position in the series)
    before: float           # median of the segment before, outliers left out
    after: float            # median of the segment after, outliers left out
    pct: float              # after / before - 1, in percent
    p_value: float          # two-sided Student's t-test between the two segments' runs
    runs_before: int        # runs in the segment before (outliers left out)
    runs_after: int         # runs in the segment after (outliers left out)
    noise_pct: Optional[float]  # the runs' own spread the shift was held against, % (None: unknown)


@dataclass(frozen=True)
class Segmentation:
    """A series cut at its change points; outliers are single odd runs, never a change."""

    changes: tuple[Change, ...]
    outliers: tuple[int, ...]


def find_changes(values: Sequence[float], spreads: Optional[Sequence[Optional[float]]] = None, *,
                 min_shift_pct: float = MIN_SHIFT_PCT, max_p: float = MAX_P,
                 min_segment: int = MIN_SEGMENT, window: int = WINDOW,
                 outlier_mads: float = OUTLIER_MADS,
                 noise_factor: float = NOISE_FACTOR) -> Segmentation:
    """The change points and outliers of `values` (one figure, in run order).

    `spreads[i]` is run i's own noise as a fraction (the coefficient of variation of its repeats
    or of its step times), or None where unknown. Raises ValueError on a value that is not a
    finite number, a negative or non-finite spread, spreads of another length, or a parameter
    out of range.
    """
    x = _finite(values)
    noise = _spreads(spreads, len(x))
    if min_segment < 2:
        raise ValueError("min_segment must be at least 2 (the t-test needs two runs a side), "
                         "not %r" % (min_segment,))
    if not 0 < max_p < 1:
        raise ValueError("max_p must lie between 0 and 1, not %r" % (max_p,))
    if not (min_shift_pct >= 0 and outlier_mads > 0 and noise_factor >= 0):
        raise ValueError("min_shift_pct and noise_factor must be >= 0 and outlier_mads > 0")
    if window < 2 * min_segment:
        raise ValueError("window must hold min_segment runs on each side of a change (at least "
                         "%d), not %r" % (2 * min_segment, window))
    rules = _Rules(max_p, min_shift_pct / 100.0, noise_factor, min_segment)
    if x.size == 0:
        return Segmentation(changes=(), outliers=())
    # The search sees no run that sits far from the median of the 5 around it. Their noise comes
    # from successive differences: the rolling median's residuals are 0 for each window's middle
    # run, which would drag their MAD down, while a step or an outlier moves few differences.
    sigma = _MAD_TO_SIGMA * float(np.median(np.abs(np.diff(x)))) / math.sqrt(2) if x.size > 1 \
        else 0.0
    suspects = _deviants(x, _rolling_median(x), outlier_mads * sigma, rules.floor)
    keep = np.flatnonzero(~suspects)
    clean = x[keep]
    found = _split(clean, window, _first_pass(max_p), min_segment)
    found = _place(clean, _merge(found, _judge_between(clean, noise[keep], rules)), min_segment)
    # The merge again, in the whole series with each run against its own segment: a run can turn
    # out an outlier there and leave a side short or move a median, and a placed change point is
    # judged where it now is; the weakest that fails goes, until the changes and outliers agree.
    counted = np.ones(len(x), dtype=bool)
    while True:
        starts = _positions(x, suspects, keep, clean, found)
        outliers = _segment_outliers(x, starts, outlier_mads, rules.floor)
        counted[:] = True
        counted[outliers] = False
        judge = _judge_between(x, noise, rules, counted)
        verdicts = [judge(starts, i) for i in range(len(starts))]
        failing = [(v.weakness, i) for i, v in enumerate(verdicts) if not v.passes]
        if not failing:
            break
        del found[max(failing)[1]]
    changes = tuple(Change(index=start, before=v.before, after=v.after,
                           pct=100.0 * _relative(v.before, v.after), p_value=v.p_value,
                           runs_before=v.runs_before, runs_after=v.runs_after,
                           noise_pct=None if v.noise is None else 100.0 * v.noise)
                    for start, v in zip(starts, verdicts))
    return Segmentation(changes=changes, outliers=tuple(int(i) for i in outliers))


def qhat(z: np.ndarray) -> np.ndarray:
    """E-Divisive's divergence Q-hat(tau, kappa) between z[:tau] and z[tau:kappa], alpha = 1.

    Entry [tau, kappa] for 1 <= tau < kappa <= len(z); -inf elsewhere. With n = tau and
    m = kappa - tau runs on each side (Matteson & James 2014, eq. 5 and 6):
      Q = n m / (n + m) * (2/(n m) sum|X_i - Y_j| - sum_{i<k}|X_i - X_k| / C(n, 2)
                           - sum_{j<k}|Y_j - Y_k| / C(m, 2)),
    a within-sum of a single run counting 0. All pairs at once from 2-D prefix sums of |z_i - z_j|.
    """
    size = len(z)
    prefix = np.zeros((size + 1, size + 1))
    prefix[1:, 1:] = np.abs(z[:, None] - z[None, :]).cumsum(0).cumsum(1)
    diagonal = np.diag(prefix)
    tau = np.arange(size + 1)[:, None]
    kappa = np.arange(size + 1)[None, :]
    n, m = tau, kappa - tau
    between = prefix - diagonal[:, None]                         # rows < tau, tau <= cols < kappa
    within_x = diagonal[:, None] / 2.0                           # pairs i < k < tau
    within_y = (diagonal[None, :] - 2.0 * prefix + diagonal[:, None]) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (2.0 * between / (n + m)
             - np.where(n > 1, 2.0 * m * within_x / ((n + m) * (n - 1)), 0.0)
             - np.where(m > 1, 2.0 * n * within_y / ((n + m) * (m - 1)), 0.0))
    return np.where((n >= 1) & (m >= 1), q, -np.inf)


def _split(x: np.ndarray, window: int, p_max: float, min_segment: int) -> list[int]:
    """Hunter's split step: the weak change points of every overlapping window, united."""
    found: set[int] = set()
    start, step = 0, max(window // 2, 1)
    while start < len(x):
        new = _divide(x, start, min(start + window, len(x)), p_max, min_segment)
        found.update(new)
        start = max(new[-1] if new else 0, start + step)
    return sorted(found)


def _divide(x: np.ndarray, lo: int, hi: int, p_max: float, min_segment: int) -> list[int]:
    """E-Divisive on x[lo:hi]: split the interval whose best split has the largest Q-hat while
    that split passes the t-test."""
    points: list[int] = []
    while True:
        bounds = [lo] + points + [hi]
        best = None
        for a, b in zip(bounds, bounds[1:]):
            if b - a < 2 * min_segment:
                continue
            q = qhat(x[a:b])
            q[:min_segment, :] = -np.inf                          # too few runs before
            q = np.where(np.subtract.outer(np.arange(q.shape[0]), np.arange(q.shape[1]))
                         <= -min_segment, q, -np.inf)             # too few runs after
            tau, kappa = np.unravel_index(int(np.argmax(q)), q.shape)
            if best is None or q[tau, kappa] > best[0]:
                best = (q[tau, kappa], a + int(tau), a, a + int(kappa))
        if best is None:
            return points
        # The runs the divergence compared, x[a:tau] against x[tau:kappa]: a later shift after
        # kappa (the end of a plateau) would blur the test, and gets its own split next.
        _, at, a, end = best
        if _student_p(x[a:at], x[at:end]) > p_max:
            return points
        points = sorted(points + [at])


def _first_pass(max_p: float) -> float:
    """Otava's relaxed level for the split step's weak change points."""
    return max_p * 10 if max_p < 0.05 else (max_p * 2 if max_p < 0.5 else max_p)


class _Rules(NamedTuple):
    max_p: float
    floor: float            # min_shift_pct as a fraction
    noise_factor: float
    min_segment: int


class _Verdict(NamedTuple):
    passes: bool
    weakness: tuple[float, float]   # larger: weaker (p, then the shift short of its floor)
    before: float
    after: float
    p_value: float
    runs_before: int
    runs_after: int
    noise: Optional[float]


def _judge_between(x: np.ndarray, noise: np.ndarray, rules: _Rules,
                   counted: Optional[np.ndarray] = None) -> Callable[[list[int], int], _Verdict]:
    """judge(points, i): change point i of `points` against the runs from its neighbours to it
    and on (those `counted`, all by default): its t-test, medians, the runs' own spread."""
    def judge(points: list[int], i: int) -> _Verdict:
        bounds = _bounds(points, len(x))
        left, right = slice(bounds[i], points[i]), slice(points[i], bounds[i + 2])
        a, b = x[left], x[right]
        noise_a, noise_b = noise[left], noise[right]
        if counted is not None:
            a, b = a[counted[left]], b[counted[right]]
            noise_a, noise_b = noise_a[counted[left]], noise_b[counted[right]]
        if min(len(a), len(b)) < rules.min_segment:
            nan = float("nan")
            return _Verdict(False, (2.0, 0.0), nan, nan, 1.0, len(a), len(b), None)
        p = _student_p(a, b)
        before, after = float(np.median(a)), float(np.median(b))
        own = _median_spread(np.concatenate([noise_a, noise_b]))
        need = max(rules.floor, rules.noise_factor * own if own is not None else 0.0)
        shift = abs(_relative(before, after))
        short_of = -shift / need if need else -math.inf
        return _Verdict(p <= rules.max_p and shift >= need, (p, short_of), before, after, p,
                        len(a), len(b), own)
    return judge


def _merge(points: list[int], judge: Callable[[list[int], int], _Verdict]) -> list[int]:
    """Hunter's merge step: drop the weakest failing change point and judge its neighbours
    again, until every one passes."""
    points = list(points)
    while points:
        failing = [(v.weakness, i) for i, v in
                   ((i, judge(points, i)) for i in range(len(points))) if not v.passes]
        if not failing:
            break
        del points[max(failing)[1]]
    return points


def _place(x: np.ndarray, points: list[int], min_segment: int) -> list[int]:
    """Each change point moved to the least-squares split of the runs between its neighbours
    (their maximum-likelihood split for a shift in the mean): the divergence's split can be a run
    off where one run lies between the two levels, and the first run after the shift is what
    the environment changes are read at."""
    points = list(points)
    for i in range(len(points)):
        bounds = _bounds(points, len(x))
        z = x[bounds[i]:bounds[i + 2]]
        taus = np.arange(min_segment, len(z) - min_segment + 1)
        if taus.size == 0:
            continue
        s1, s2 = np.concatenate([[0.0], np.cumsum(z)]), np.concatenate([[0.0], np.cumsum(z * z)])
        left = s2[taus] - s1[taus] ** 2 / taus
        right = (s2[-1] - s2[taus]) - (s1[-1] - s1[taus]) ** 2 / (len(z) - taus)
        points[i] = bounds[i] + int(taus[np.argmin(left + right)])
    return points


def _positions(x: np.ndarray, suspects: np.ndarray, keep: np.ndarray, clean: np.ndarray,
               found: list[int]) -> list[int]:
    """The change points' positions in the whole series: a run left out of the search just before
    the first searched run after the shift belongs to the new level when it is nearer to it."""
    starts = []
    bounds = _bounds(found, len(clean))
    for i, at in enumerate(found):
        before = float(np.median(clean[bounds[i]:at]))
        after = float(np.median(clean[at:bounds[i + 2]]))
        index = int(keep[at])
        while index > 0 and suspects[index - 1] and \
                abs(x[index - 1] - after) < abs(x[index - 1] - before):
            index -= 1
        starts.append(index)
    return starts


def _student_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Student's t-test (pooled variance) between two samples."""
    n1, n2 = len(a), len(b)
    df = n1 + n2 - 2
    if n1 == 0 or n2 == 0 or df < 1:
        return 1.0
    diff = float(np.mean(b) - np.mean(a))
    pooled = (float(np.sum((a - np.mean(a)) ** 2)) + float(np.sum((b - np.mean(b)) ** 2))) / df
    if pooled <= 0.0:
        return 0.0 if diff != 0.0 else 1.0
    t = diff / math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    from scipy import special   # 0.4 s to import: only when a test runs, not on import
    return float(min(1.0, 2.0 * special.stdtr(df, -abs(t))))


def _rolling_median(x: np.ndarray) -> np.ndarray:
    """The median of `_ROLLING` consecutive runs around each run: centred on it, or the first or
    last `_ROLLING` runs at the ends, so that the last two runs at a new level are two against
    three until a third confirms it (all runs when the series is shorter)."""
    if len(x) < _ROLLING:
        return np.full(len(x), np.median(x)) if len(x) else x.copy()
    half = _ROLLING // 2
    middle = np.median(np.lib.stride_tricks.sliding_window_view(x, _ROLLING), axis=1)
    return np.concatenate([np.full(half, middle[0]), middle, np.full(half, middle[-1])])


def _deviants(x: np.ndarray, centre: np.ndarray, limit: float, floor: float) -> np.ndarray:
    """Runs further from `centre` than `limit` and than the fraction `floor` of it."""
    residual = np.abs(x - centre)
    return (residual > limit) & (residual > floor * np.abs(centre))


def _segment_outliers(x: np.ndarray, starts: list[int], mads: float, floor: float) -> np.ndarray:
    """Runs further from their own segment's median than `mads` robust standard deviations (of
    every run from its segment's median) and than the fraction `floor` of it."""
    centre = np.empty_like(x)
    for lo, hi in zip([0] + starts, starts + [len(x)]):
        centre[lo:hi] = np.median(x[lo:hi])
    sigma = _MAD_TO_SIGMA * float(np.median(np.abs(x - centre)))
    return np.flatnonzero(_deviants(x, centre, mads * sigma, floor))


def _bounds(points: list[int], size: int) -> list[int]:
    return [0] + list(points) + [size]


def _relative(before: float, after: float) -> float:
    """after / before - 1; a move away from 0 is an infinite one."""
    if before == 0.0:
        return 0.0 if after == 0.0 else math.copysign(math.inf, after)
    return after / before - 1.0


def _median_spread(noise: np.ndarray) -> Optional[float]:
    known = noise[~np.isnan(noise)]
    return float(np.median(known)) if known.size else None


def _finite(values: Sequence[float]) -> np.ndarray:
    try:
        x = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("every value must be a number") from None
    if x.ndim != 1:
        raise ValueError("the values must be one sequence of numbers")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError("value %d is not a finite number (%r)" % (bad[0], x[bad[0]]))
    return x


def _spreads(spreads: Optional[Sequence[Optional[float]]], size: int) -> np.ndarray:
    """The spreads as floats, NaN where unknown."""
    if spreads is None:
        return np.full(size, np.nan)
    if len(spreads) != size:
        raise ValueError("%d spreads for %d values" % (len(spreads), size))
    try:
        out = np.array([np.nan if s is None else s for s in spreads], dtype=float)
    except (TypeError, ValueError):
        raise ValueError("every spread must be a number or None") from None
    bad = np.flatnonzero(~np.isnan(out) & ~(np.isfinite(out) & (out >= 0)))
    if bad.size:
        raise ValueError("spread %d must be a fraction >= 0 or None (%r)" % (bad[0], out[bad[0]]))
    return out
