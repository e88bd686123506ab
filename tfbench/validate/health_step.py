"""The health step: NVML's health facts of every GPU, read in a child of their own
(`python -m tfbench.measure.health_read --json=FILE`: NVML only, no TensorFlow, so a driver call
that hangs or crashes is one failed check), judged by tfbench.measure.health into Checks.

A host where NVML cannot answer (no driver, no nvidia-ml-py, no GPU) gives one SKIP row,
`not_reported`, with why: the health facts are not known, which is no pass and no failure. A
later reading is judged against the first (an uncorrected ECC count that rose fails) and keeps
only what tells something new: the rows whose verdict changed and the ECC errors' rows.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional, Sequence

from tfbench.measure import health
from tfbench.measure.health_read import HostHealth, host_from_json
from tfbench.measure.health_verdicts import SKIP
from tfbench.validate import verdicts
from tfbench.validate.verdicts import Check

HEALTH_CHILD: tuple[str, ...] = (sys.executable, "-m", "tfbench.measure.health_read")
NO_NVML_EXPECTATION = "NVML answers (an NVIDIA driver and nvidia-ml-py)"
# The rows a later reading always keeps: what the re-read is for.
RECHECKED = ("ecc_errors", "gpu")


class Unreadable(Exception):
    """The child's file is missing or not its JSON: the step failed (check_failed)."""


def read_report(path: str) -> dict[str, Any]:
    """The child's JSON (tfbench.measure.health_read.report); Unreadable when it is not."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise Unreadable("wrote no readings") from None
    except (OSError, ValueError) as exc:
        raise Unreadable("its readings are not JSON (%s)" % type(exc).__name__) from None
    if not isinstance(data, dict) or "readings" not in data:
        raise Unreadable("its readings have no \"readings\"")
    return data


def judge(report: dict[str, Any], host: str, earlier: Optional[HostHealth] = None
          ) -> tuple[list[Check], Optional[HostHealth]]:
    """(the rows of one reading, the readings: None when NVML could not answer)."""
    if report.get("readings") is None:
        why = report.get("why") or "NVML not available"
        return [Check(host, "host", "health", SKIP, "not_reported",
                      "no health facts: %s" % why, NO_NVML_EXPECTATION)], None
    readings = host_from_json(report["readings"])
    cuda = report.get("tensorflow_cuda")
    required = (int(cuda[0]), int(cuda[1])) if cuda else None
    # Read at idle (before and after the load): clocks and the link's current generation are
    # shown, not judged; what a power-saving GPU does not change (the link's width, the slot's
    # generation) is.
    judgement = health.judge(readings, required, under_load=False, earlier=earlier)
    return [verdicts.from_health(v, host) for v in judgement.rows], readings


def changed(first: Sequence[Check], later: Sequence[Check], label: str) -> list[Check]:
    """The rows of a later reading worth a row of their own: those whose status or reason is
    not the first reading's for the same subject and check, and every ECC errors row (judged
    against the first reading); their check is named `<check> (<label>)`."""
    before = {(r.subject, r.check): (r.status, r.reason) for r in first}
    kept = []
    for row in later:
        if row.check in RECHECKED or before.get((row.subject, row.check)) != (row.status,
                                                                            row.reason):
            kept.append(Check(row.host, row.subject, "%s (%s)" % (row.check, label),
                              row.status, row.reason, row.figure, row.expectation,
                              row.value, row.expected))
    return kept
