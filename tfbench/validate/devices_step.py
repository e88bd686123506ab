"""The devices step's verdicts: each device alone, from `--validate_devices`' entries in the JSON
manifests of the training children (extra.device_checks; docs/validate.md).

Per device and check, over the runs that measured it (3 at --level=standard: the device's
median of them):
  step_alone  the training step alone, ms: ratio = the device's / the median device's; a ratio
              above 1 + tolerance is `straggler`
  matmul      the matmul probe, TFLOP/s: ratio = the median device's / the device's (so a ratio
              above 1 reads "that much slower"); above 1 + tolerance: `slow_matmul`
  conv        the convolution probe, likewise: `slow_conv`
  gradients   the numeric check: a device that does not agree with the reference device in any
              run is `wrong_results` (bit-exact expected under op determinism, else
              max_rel_diff within the bound)
A check the runs did not include (--validate_device_checks; the step alone at --level=quick)
has no rows. The median device is the median over every device that measured the check, the device itself
included (as the manifest's slowest_*_ratio figures are). A check that failed on a device in any
run (its entry's `errors`) is that device's `check_failed` row, with the error.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Optional, Sequence

from tfbench.measure.health_verdicts import FAIL, PASS
from tfbench.validate.verdicts import Check

# check -> (the entry's figure and the error key it fails under, unit, reason, whether more
# is faster)
KERNELS = {"step_alone": ("alone_ms", "step", "ms", "straggler", False),
           "matmul": ("matmul_tflops", "kernels", "TFLOP/s", "slow_matmul", True),
           "conv": ("conv_tflops", "kernels", "TFLOP/s", "slow_conv", True)}
# A kernel's ratio is of TFLOP/s inverted: its time's ratio.
_WHAT = {"step_alone": "step alone", "matmul": "matmul time", "conv": "conv time"}


def _runs_text(n: int, of: int) -> str:
    return "" if of <= 1 else " (median of %d runs)" % n if n == of else \
        " (median of %d of %d runs)" % (n, of)


def _errors(entries: Sequence[dict[str, Any]], key: str, runs: int) -> Optional[str]:
    """'out of memory' (or 'in run 2 of 3: out of memory') when the check failed in a run."""
    for entry in entries:
        error = (entry.get("errors") or {}).get(key)
        if error:
            return error if runs <= 1 else "in run %d of %d: %s" % (entry["_run"], runs, error)
    return None


def _by_device(runs: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """device -> its entries, one per run that checked it, in the runs' device order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for number, extra in enumerate(runs, 1):
        for entry in extra.get("device_checks") or []:
            found.setdefault(entry["device"], []).append(dict(entry, _run=number))
    return found


def ran(extra: dict[str, Any], check: str) -> bool:
    """Whether a run's device checks included `check` (step, kernels, numeric:
    --validate_device_checks; a manifest without device_checks_run ran them all)."""
    return check in (extra.get("device_checks_run") or (check,))


def speed_checks(runs: Sequence[dict[str, Any]], host: str, tolerance_pct: float
                 ) -> list[Check]:
    """The step_alone, matmul and conv rows of every device."""
    devices = _by_device(runs)
    limit = 1.0 + tolerance_pct / 100.0
    rows: list[Check] = []
    for check, (figure, error_key, unit, reason, faster) in KERNELS.items():
        if not any(ran(extra, error_key) for extra in runs):
            continue
        medians: dict[str, float] = {}
        counts: dict[str, int] = {}
        for device, entries in devices.items():
            values = [e[figure] for e in entries if e.get(figure) is not None
                      and math.isfinite(e[figure]) and e[figure] > 0]
            if values and not _errors(entries, error_key, len(runs)):
                medians[device], counts[device] = statistics.median(values), len(values)
        middle = statistics.median(medians.values()) if medians else None
        expectation = "at most %.2fx the median device's (tolerance %g%%)" % (limit,
                                                                             tolerance_pct)
        for device, entries in devices.items():
            error = _errors(entries, error_key, len(runs))
            if device not in medians:
                rows.append(Check(host, device, check, FAIL, "check_failed",
                                  error or "not measured", "the %s measured" % check))
                continue
            value = medians[device]
            ratio = middle / value if faster else value / middle
            figure_text = "%s %.2fx the median of %d device%s (%.4g vs %.4g %s)%s" % (
                _WHAT[check], ratio, len(medians), "" if len(medians) == 1 else "s", value,
                middle, unit,
                _runs_text(counts[device], len(runs)))
            rows.append(Check(host, device, check, FAIL if ratio > limit else PASS,
                              reason if ratio > limit else "ok", figure_text, expectation,
                              ratio, limit))
    return rows


def _numeric_expectation(settings: dict[str, Any]) -> str:
    reference = settings.get("reference") or "the first device"
    if settings.get("deterministic"):
        return "bit-exact with %s (op determinism on)" % reference
    return "max_rel_diff within %g of %s" % (settings.get("bound") or 0, reference)


def _difference(entry: dict[str, Any]) -> str:
    diff = entry.get("max_rel_diff")
    text = "max_rel_diff %s" % ("not finite" if diff is None or not math.isfinite(diff)
                                else "%.3g" % diff)
    return text + (", bit-exact" if entry.get("bit_exact") else ", not bit-exact")


def gradient_checks(runs: Sequence[dict[str, Any]], host: str) -> list[Check]:
    """The gradients row of every device: wrong_results when it disagrees in any run."""
    rows: list[Check] = []
    if not any(ran(extra, "numeric") for extra in runs):
        return rows
    settings = [extra.get("device_checks_numeric") or {} for extra in runs]
    for device, entries in _by_device(runs).items():
        expectation = _numeric_expectation(settings[entries[0]["_run"] - 1])
        error = _errors(entries, "numeric", len(runs))
        if error:
            rows.append(Check(host, device, "gradients", FAIL, "check_failed", error,
                              expectation))
            continue
        compared = [e for e in entries if e.get("agrees") is not None]
        wrong = [e for e in compared if not e["agrees"]]
        if not compared:
            rows.append(Check(host, device, "gradients", FAIL, "check_failed",
                              "not compared (no reference device had a result)", expectation))
        elif wrong:
            e = wrong[0]
            where = "" if len(runs) <= 1 else " (in %d of %d runs)" % (len(wrong), len(runs))
            rows.append(Check(host, device, "gradients", FAIL, "wrong_results",
                              _difference(e) + where, _numeric_expectation(
                                  settings[e["_run"] - 1]), e.get("max_rel_diff")))
        else:
            worst = max(compared, key=lambda e: e.get("max_rel_diff") or 0.0)
            rows.append(Check(host, device, "gradients", PASS, "ok", _difference(worst) + (
                "" if len(runs) <= 1 else " (%d runs)" % len(compared)), expectation,
                worst.get("max_rel_diff")))
    return rows


def judge(runs: Sequence[dict[str, Any]], host: str, tolerance_pct: float) -> list[Check]:
    """Every device's rows from the manifests' `extra` of the runs that have device checks,
    ordered by device, then check."""
    rows = speed_checks(runs, host, tolerance_pct) + gradient_checks(runs, host)
    order = {d: i for i, d in enumerate(_by_device(runs))}
    checks = list(KERNELS) + ["gradients"]
    return sorted(rows, key=lambda r: (order[r.subject], checks.index(r.check)))
