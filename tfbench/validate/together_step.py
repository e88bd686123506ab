"""The devices together: the all-reduce probe's bus bandwidth against the links' (from `tfbench
allreduce --json_file`), and the scaling efficiency with where its points went (from
`--explain_scaling`'s extra.scaling_explained in the training children's manifests).

busbw: the largest bus bandwidth over the probe's tensor sets (all_reduce_perf's figure of
merit; the largest sizes reach the most), against the busbw the links found carry
(tfbench.measure.links: the links' data rate in one direction, the most a ring's busbw can
approach; on PCIe GPUs of both CPU sockets, NCCL's rate of the link between the sockets,
tfbench.measure.sockets, 10 GB/s on Intel Skylake and newer, 16 on AMD). NCCL's rings reach a
fraction of that ceiling that depends on the size and the topology, so a healthy host is not held to (100 - tolerance)% of it: below BUSBW_FLOOR of it is
`busbw_below_expected`, the point at which the explain verdict calls busbw "well below what the
link carries" (a link at half its lanes or generation, a ring off NVLink); against a baseline
the tolerance applies (tfbench.validate.figures). No expectation (CPU devices, links NVML cannot
tell, a parameter server's sums at the variables) is `no_expectation` SKIP with the figure.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from tfbench.measure import scaling
from tfbench.measure.health_verdicts import FAIL, PASS, SKIP
from tfbench.measure.links import NO_EXPECTATION
from tfbench.validate.verdicts import Check

BUSBW_FLOOR = 0.5
CHECK = "allreduce_busbw"


def read_probe(path: str) -> Optional[dict[str, Any]]:
    """`tfbench allreduce --json_file`'s data (None when the file is missing or not JSON)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "timings" in data else None


def best_busbw(probe: dict[str, Any]) -> tuple[Optional[float], str]:
    """(the largest busbw in GB/s, the tensor set it was measured on) (None: no all-reduce)."""
    timed = [t for t in probe.get("timings") or [] if t.get("busbw_gbs") is not None]
    if not timed:
        return None, ""
    best = max(timed, key=lambda t: t["busbw_gbs"])
    return float(best["busbw_gbs"]), best["label"]


def busbw_check(probe: dict[str, Any], host: str, device_kind: str) -> Check:
    """The all-reduce row: PASS, busbw_below_expected or no_expectation."""
    busbw, label = best_busbw(probe)
    ranks = probe.get("ranks")
    if busbw is None:
        return Check(host, "host", CHECK, SKIP, "no_expectation",
                     "no all-reduce: the gradients are summed at the variables' devices "
                     "(--variable_update=parameter_server)", "an all-reduce to time")
    figure = "busbw %.3g GB/s (%s, %s ranks)" % (busbw, label, ranks)
    expected = probe.get("expected_busbw_gbs")
    link = probe.get("link") or ""
    if device_kind != "gpu":
        return Check(host, "host", CHECK, SKIP, "no_expectation", figure,
                     "none: CPU devices all-reduce through host memory, no link to judge",
                     busbw)
    if not expected:
        why = link[link.index(NO_EXPECTATION):] if NO_EXPECTATION in link else \
            "no expected busbw for these links"
        return Check(host, "host", CHECK, SKIP, "no_expectation", figure + "; " + link
                     if link else figure, why, busbw)
    floor = BUSBW_FLOOR * expected
    expectation = "at least %.3g GB/s, %d%% of the up to %.3g GB/s the links carry (%s)" % (
        floor, round(100 * BUSBW_FLOOR), expected, link)
    share = " (%.0f%% of the links')" % (100.0 * busbw / expected)
    if busbw < floor:
        return Check(host, "host", CHECK, FAIL, "busbw_below_expected", figure + share,
                     expectation, busbw, floor)
    return Check(host, "host", CHECK, PASS, "ok", figure + share, expectation, busbw, floor)


def efficiency_split(explained: dict[str, Any]) -> str:
    """'61.0% (slowest device's extra compute 4.0 pts, input wait 0.0 pts, ...)': the
    efficiency and the points each cause cost, as --explain_scaling names them."""
    lost = explained.get("lost_pts") or {}
    parts = ", ".join("%s %.1f pts" % (scaling.CAUSE_LABELS[c], lost[c])
                      for c in scaling.CAUSES if c in lost)
    return "%.1f%%%s" % (explained["efficiency_pct"], " (%s)" % parts if parts else "")
