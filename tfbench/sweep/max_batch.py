"""The max-batch search (`tfbench sweep --find_max_batch_size`): per point of the other axes,
the largest batch that fits, each probe a child process run by the Sweep (status oom, or a child
killed under a memory cap, means it does not fit).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

from tfbench import errors
from tfbench.config.argv import settings_of_flags
from tfbench.sweep.grid import Point, expand_grid, point_flags, point_name
from tfbench.sweep.progress import Progress
from tfbench.sweep.study import PointRecord, Sweep


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


def group_statuses(results: Sequence[MaxBatchResult]) -> list[str]:
    """Each search's status, as a study counts its points: ok when it found a largest batch
    (its oom probes are how it did), oom when not even the smallest fits, else the status of
    the probe that stopped it."""
    out = []
    for res in results:
        s = res.search
        if s.error:
            out.append(s.probes[-1][1] if s.probes else "error")
        else:
            out.append("ok" if s.max_batch else "oom")
    return out


# (flag, value for short probes, flags that exclude it): a user's --num_epochs excludes
# --num_batches (the legacy rule, tfbench.config.params.check_flags).
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
    with sweep.progress(None, unit="probes") as progress:
        return [_search_group(sweep, group, progress, start, limit, granularity)
                for group in groups]


def _search_group(sweep: Sweep, group: Point, progress: Progress, start: int, limit: int,
                  granularity: int) -> MaxBatchResult:
    """The search for one group: each probe its group's point at one batch size."""
    measured: dict[int, PointRecord] = {}

    def probe(batch: int) -> tuple[str, str]:
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
    p = settings_of_flags(point_flags(sweep.config.base_flags, group.flags))
    values = {"model": p.workload.model, "precision": p.asks.precision}
    values.update(group.values)  # swept values win, in sweep order after model/precision
    return MaxBatchResult(values, search, best.rows[0] if best else None)

