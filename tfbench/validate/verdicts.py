"""The rows every check of a validation ends in, and what they add up to: one Check per subject
(a GPU, a host, a group of hosts) and check, the overall status and the exit code it gives.

The statuses and the health facts' reason codes are tfbench.measure.health_verdicts'; REASONS
here adds the codes of the checks that run TensorFlow or compare figures, so one table names
every code a validation can give.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Optional, Sequence

from tfbench import errors
from tfbench.measure import health_verdicts
from tfbench.measure.health_verdicts import FAIL, PASS, SKIP, WARN

STATUSES = (PASS, WARN, FAIL, SKIP)
_RANK = {SKIP: 0, PASS: 1, WARN: 2, FAIL: 3}

# The codes of the checks beyond the health facts (docs/validate.md: what to do about each).
CHECK_REASONS: dict[str, str] = {
    "straggler": "the training step alone is slower than the median of its peers by more than "
                 "the tolerance",
    "slow_matmul": "the matmul probe is slower than the median of its peers by more than the "
                   "tolerance",
    "slow_conv": "the convolution probe is slower than the median of its peers by more than the "
                 "tolerance",
    "wrong_results": "the same inputs and weights gave other gradients than on its peers",
    "check_failed": "the check did not complete (the child failed, hung or found no device)",
    "busbw_below_expected": "the all-reduce's bus bandwidth is below what the links found carry",
    "efficiency_low": "the devices together reach a lower scaling efficiency than expected",
    "below_baseline": "the figure's median is below the baseline by more than the tolerance",
    "unstable": "the figure's repeats spread too far to judge it",
    "below_expected_range": "the figure is below the published range for this GPU and model",
    "no_expectation": "nothing to judge the figure against (no baseline, no published figure, "
                      "no expected link bandwidth)",
    "host_drags_ring": "the hosts together are slow only with this host (or link) among them",
    "slowed_down": "the soak's last steps are slower than its first by more than the tolerance",
    "versions_differ": "the host runs another tfbench, TensorFlow or Keras than the first host",
}
REASONS: dict[str, str] = {**health_verdicts.REASONS, **CHECK_REASONS}

# A validation with a WARN and no FAIL, and one with any FAIL (tfbench.errors' table).
EXIT_CODES = {PASS: errors.EXIT_OK, WARN: errors.EXIT_VALIDATE_WARN,
              FAIL: errors.EXIT_VALIDATE_FAIL}


@dataclasses.dataclass(frozen=True)
class Check:
    """One row of the verdict table."""
    host: str                   # the host it was measured on (for a group: the first)
    subject: str                # "GPU 3", "CPU:1", "host", "hosts a,b"
    check: str                  # what was checked: a health fact's name, "straggler", ...
    status: str                 # PASS, WARN, FAIL or SKIP
    reason: str                 # a code of REASONS
    figure: str                 # what was measured, as it reads: "x4 of x16", "1.31x the median"
    expectation: str            # what it was judged against
    value: Optional[float] = None      # the figure as a number, where it has one
    expected: Optional[float] = None   # the number it was judged against

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError("status %r is none of %s" % (self.status, STATUSES))
        if self.reason not in REASONS:
            raise ValueError("reason %r is not a documented code" % self.reason)

    @property
    def label(self) -> str:
        """'pcie_width_degraded: x4 of x16'."""
        return "%s: %s" % (self.reason, self.figure)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Check":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def from_health(verdict: health_verdicts.Verdict, host: str) -> Check:
    """A health fact's verdict as a row (the host's driver row: subject 'host')."""
    subject = "host" if verdict.gpu is None else "GPU %d" % verdict.gpu
    return Check(host, subject, verdict.check, verdict.status, verdict.reason, verdict.figure,
                 verdict.expectation)


def overall(rows: Iterable[Check]) -> str:
    """FAIL if any row fails, else WARN if any warns, else PASS (SKIP rows do not count)."""
    worst = max((_RANK[r.status] for r in rows), default=_RANK[PASS])
    return {0: PASS, 1: PASS, 2: WARN, 3: FAIL}[worst]


def exit_code(rows: Iterable[Check]) -> int:
    return EXIT_CODES[overall(rows)]


def _name(row: Check) -> str:
    """'GPU 5 straggler'; a row of the host, or a check that did not complete, names its check
    too: 'node7 allreduce_busbw check_failed', 'GPU 2 conv check_failed'."""
    if row.subject == "host":
        if row.check == row.reason:   # a check named for its finding: host_drags_ring
            return "%s %s" % (row.host, row.reason)
        return "%s %s %s" % (row.host, row.check, row.reason)
    if row.reason == "check_failed":
        return "%s %s %s" % (row.subject, row.check, row.reason)
    return "%s %s" % (row.subject, row.reason)


def summary(rows: Sequence[Check]) -> str:
    """'FAIL (2 FAIL, 1 WARN, 40 PASS, 3 SKIP): GPU 5 straggler; GPU 3 wrong_results' - the
    rows that decide the status are named, FAILs first."""
    status = overall(rows)
    counts = ", ".join("%d %s" % (n, s) for s in (FAIL, WARN, PASS, SKIP)
                       if (n := sum(r.status == s for r in rows)))
    worst = [r for r in rows if r.status == status and status != PASS]
    named = "; ".join(_name(r) for r in worst[:6])
    more = "; and %d more" % (len(worst) - 6) if len(worst) > 6 else ""
    return "%s (%s)%s" % (status, counts or "no checks", (": " + named + more) if named else "")
