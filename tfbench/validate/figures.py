"""The figures a validation measured (one value per repeat), judged against what to expect: the
seam between what was measured and the rule that judges it.

Measured holds the figures and the run's key; a FigureJudge takes it and returns Checks. Without
--baseline the judge is published(): images/sec against the published range for this GPU and
model (tfbench.measure.expected_range, the band widened by the tolerance), the scaling
efficiency against --min_efficiency_pct (default 80 on GPUs). With --baseline FILE the judge is
with_baseline(path, run_key, tolerance_pct), which reads the file when the validation starts
(tfbench.validate.baseline: a UsageError for a file that is not a tfbench result or of another
model, precision, batch or GPU model: nothing runs) and returns the FigureJudge that compares
each figure's median with the baseline's (baseline.judge; the efficiency's split in its text).
With --baseline=history the judge is with_history(store, ...): each figure the history keeps
(images/sec, the all-reduce's busbw) against this host's accepted level of the configuration, or
the fleet's median for a host without one (tfbench.history.baseline), by the same rules
(baseline.judge); what the history has no level of is judged as without a baseline.
The figures' names and definitions are tfbench.validate.run_figures' FIGURES.

Either way a figure whose repeats spread beyond the project's stability rule
(tfbench.measure.stats.repeat_summary: (max - min) / median above 10%) is `unstable` WARN
where it would otherwise pass or go unjudged: an unstable figure is never a PASS.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Callable, Optional, Sequence

from tfbench.measure import expected_range, stats
from tfbench.measure.health_verdicts import FAIL, PASS, SKIP, WARN
from tfbench.validate import baseline as baseline_lib
from tfbench.validate.run_figures import FIGURES, RunKey
from tfbench.validate.verdicts import Check

# The figures' names (each a list, one value per repeat): run_figures.FIGURES'.
IMAGES_PER_SEC = "images_per_sec"       # total images/sec of a training child
HISTORY = "history"                     # --baseline=history: the results history's level
EFFICIENCY_PCT = "efficiency_pct"       # --explain_scaling's scaling efficiency, %
DEFAULT_MIN_EFFICIENCY_PCT = 80.0


@dataclasses.dataclass(frozen=True)
class Measured:
    """What the validation measured: `key` (model, mode, precision, batch_size per device,
    num_devices, device_kind, device_name, xla, variable_update: the first training child's),
    `figures` (name -> one value per repeat that measured it), `splits` (per value of
    efficiency_pct, where its points went, as efficiency_split words it) and `rows` (the
    training children's results rows: the whole configuration, the run ids; not in
    validate.json, which has the key)."""
    host: str
    key: dict[str, Any]
    figures: dict[str, list[float]]
    splits: list[str] = dataclasses.field(default_factory=list)
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"key": dict(self.key), "figures": {k: list(v) for k, v in self.figures.items()},
                "splits": list(self.splits)}


FigureJudge = Callable[[Measured], list[Check]]


def spread(values: Sequence[float]) -> tuple[float, Optional[float], bool]:
    """(median, spread % or None, unstable) by stats.repeat_summary's rule."""
    s = stats.repeat_summary(values)
    return s["images_per_sec_median"], s["spread_pct"], bool(s["unstable"])


def _runs(values: Sequence[float]) -> str:
    if len(values) <= 1:
        return ""
    _, pct, _ = spread(values)
    return " (median of %d runs, spread %.1f%%)" % (len(values), pct or 0.0)


def unstable_unless_failed(row: Check, values: Sequence[float]) -> Check:
    """`row`, or an `unstable` WARN in its place when it did not fail and `values` spread
    beyond the stability rule."""
    if row.status == FAIL or len(values) < 2 or not spread(values)[2]:
        return row
    _, pct, _ = spread(values)
    return dataclasses.replace(
        row, status=WARN, reason="unstable",
        expectation="repeats within %g%% of their median (then: %s)" % (
            stats.DEFAULT_UNSTABLE_THRESHOLD_PCT, row.expectation))


def _images(m: Measured, tolerance_pct: float) -> Optional[Check]:
    values = m.figures.get(IMAGES_PER_SEC) or []
    if not values:
        return None
    median = statistics.median(values)
    figure = "%.1f images/sec%s" % (median, _runs(values))
    k = m.key
    j = expected_range.judge(k.get("device_name"), k.get("model", ""), k.get("mode", ""),
                             k.get("precision", ""), int(k.get("num_devices") or 1), median,
                             tolerance=tolerance_pct / 100.0, batch_per_gpu=k.get("batch_size"))
    if j is None:
        what = "CPU devices" if k.get("device_kind") == "cpu" else (k.get("device_name") or
                                                                   "this device")
        row = Check(m.host, "host", IMAGES_PER_SEC, SKIP, "no_expectation", figure,
                    "no published figure for %s" % what, median)
    elif j.verdict is None:
        row = Check(m.host, "host", IMAGES_PER_SEC, SKIP, "no_expectation", figure,
                    expected_range.describe(j), median)
    elif j.verdict == "below":
        row = Check(m.host, "host", IMAGES_PER_SEC, FAIL, "below_expected_range", figure,
                    expected_range.describe(j), median, j.low)
    else:
        row = Check(m.host, "host", IMAGES_PER_SEC, PASS, "ok", figure,
                    expected_range.describe(j), median, j.low)
    return unstable_unless_failed(row, values)


def median_split(values: Sequence[float], splits: Sequence[str]) -> str:
    """The split of the repeat whose efficiency is nearest the median."""
    if not splits:
        return ""
    median = statistics.median(values)
    nearest = min(range(len(values)), key=lambda i: abs(values[i] - median))
    return splits[nearest] if nearest < len(splits) else splits[0]


def _efficiency(m: Measured, min_pct: Optional[float]) -> Optional[Check]:
    values = m.figures.get(EFFICIENCY_PCT) or []
    if not values or int(m.key.get("num_devices") or 1) < 2:
        return None
    median = statistics.median(values)
    figure = median_split(values, m.splits) or "%.1f%%" % median
    figure += _runs(values)
    if min_pct is None and m.key.get("device_kind") != "gpu":
        row = Check(m.host, "host", EFFICIENCY_PCT, SKIP, "no_expectation", figure,
                    "none on logical CPU devices, which share one CPU's cores "
                    "(--min_efficiency_pct judges it)", median)
    else:
        least = DEFAULT_MIN_EFFICIENCY_PCT if min_pct is None else min_pct
        expectation = "at least %g%% (%s)" % (least, "--min_efficiency_pct" if min_pct
                                              is not None else "the default on GPUs")
        low = median < least
        row = Check(m.host, "host", EFFICIENCY_PCT, FAIL if low else PASS,
                    "efficiency_low" if low else "ok", figure, expectation, median, least)
    return unstable_unless_failed(row, values)


def published(tolerance_pct: float, min_efficiency_pct: Optional[float] = None
              ) -> FigureJudge:
    """The judge without a baseline (see the module)."""
    def judge(m: Measured) -> list[Check]:
        rows = [_images(m, tolerance_pct), _efficiency(m, min_efficiency_pct)]
        return [r for r in rows if r is not None]
    return judge


def run_key(key: dict[str, Any]) -> RunKey:
    """A Measured key, or plan.run_key's before anything runs, as a baseline matches it (batch
    0, the model's default, and a device not read yet match any)."""
    return RunKey(str(key.get("model") or ""), str(key.get("precision") or "fp32"),
                  int(key.get("batch_size") or 0) or None, str(key.get("device_name") or ""),
                  int(key.get("num_devices") or 0) or None)


def with_baseline(path: str, key: dict[str, Any], tolerance_pct: float) -> FigureJudge:
    """The judge against the baseline file `path` (see the module); UsageError, before anything
    runs, for a file that is no tfbench result or holds no configuration of `key`."""
    base = baseline_lib.load_baseline(path)
    base.select(run_key(key))

    def judge(m: Measured) -> list[Check]:
        values = m.figures.get(EFFICIENCY_PCT) or []
        split = median_split(values, m.splits) if values else ""
        details = {EFFICIENCY_PCT: " (%s)" % split} if split else {}
        return baseline_lib.judge(m.figures, base, tolerance_pct, run=run_key(m.key),
                                  host=m.host, details=details)
    return judge


def with_history(store: Any, tolerance_pct: float, min_efficiency_pct: Optional[float] = None,
                 say: Callable[[str], None] = lambda text: None) -> FigureJudge:
    """The judge against the results history `store` (a tfbench.history.store.Store, opened
    before anything runs; see the module). When the history holds no level of any measured
    figure, or cannot be read, `say` gets one line and every figure is judged as without a
    baseline (published)."""
    from tfbench.history import baseline as history_baseline
    without = published(tolerance_pct, min_efficiency_pct)

    def judge(m: Measured) -> list[Check]:
        row = dict(m.rows[0]) if m.rows else dict(m.key)
        run = run_key(m.key)
        try:
            found = history_baseline.levels(
                store, row, [n for n in FIGURES if m.figures.get(n)], hostname=m.host,
                gpu_model=str(m.key.get("device_name") or ""),
                exclude=[r.get("run_id") for r in m.rows])
        except Exception as exc:  # noqa: BLE001 - the figures are still judged, one line says why
            from tfbench.history.errors import why
            say("tfbench validate: --baseline=history: the history at %s cannot be read (%s); "
                "judged as without a baseline" % (store.where(), why(exc)))
            return without(m)
        if not found:
            say("tfbench validate: --baseline=history: the history at %s holds no level of %s, "
                "neither this host's (%s) nor another host's: judged as without a baseline"
                % (store.where(), run.text(), m.host))
            return without(m)
        rows: list[Check] = []
        for name, level in found.items():
            base = baseline_lib.Baseline(level.text(), "history", (baseline_lib.BaselineRun(
                run, {name: [level.value]}),))
            rows += baseline_lib.judge({name: m.figures[name]}, base, tolerance_pct, run=run,
                                       host=m.host)
        rest = dataclasses.replace(m, figures={k: v for k, v in m.figures.items()
                                               if k not in found})
        rows += without(rest)
        order = list(FIGURES)
        return sorted(rows, key=lambda r: order.index(r.check) if r.check in order
                      else len(order))
    return judge
