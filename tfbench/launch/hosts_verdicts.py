"""The rows of a validation over hosts from what its runs measured: each host's images/sec
alone, the flags of a cluster comparable with the hosts alone, the expectation its scaling
efficiency is held to, the efficiency row of a group of hosts run together (with where the
points went, measure.scaling), the rows of what the halving found, and a host's validate.json
read back. No process is started here (validate_hosts.py runs the steps).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from typing import Any, Optional, Sequence

from tfbench.config.argv import settings_of_flags
from tfbench.launch import halving
from tfbench.launch.remote import Host
from tfbench.launch.tasks import LaunchResult
from tfbench.measure import scaling
from tfbench.validate.verdicts import FAIL, PASS, Check

SCHEMA = "tfbench.validate"
TOGETHER, HALVING, DRAGS = "hosts_together", "halving", "host_drags_ring"


@dataclasses.dataclass(frozen=True)
class Expectation:
    pct: float
    text: str


def host_names(hosts: Sequence[Host]) -> list[str]:
    """Each host as --hosts names it, without user and port; host:port where a machine is
    named several times (each of its tasks is a host of its own here)."""
    machines = [h.machine for h in hosts]
    return [h.target.rpartition("@")[2] if machines.count(h.machine) == 1 else h.label
            for h in hosts]


def group_subject(names: Sequence[str]) -> str:
    return "hosts " + ",".join(names)


def number(text: Any) -> Optional[float]:
    """A row's figure as a number; None when empty or not measured."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value else None     # NaN: not measured


# --- figures --------------------------------------------------------------------------------

def training_rows(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """A host's rows that measured its training step alone: ok, training, one worker."""
    return [r for r in rows if r["status"] == "ok" and r["mode"] == "training"
            and r["num_workers"] in ("", "1") and number(r["images_per_sec"])]


def alone_images_per_sec(rows: Sequence[dict[str, str]]) -> Optional[float]:
    """The median of the host's training rows' images/sec (None without one)."""
    figures = [number(r["images_per_sec"]) for r in training_rows(rows)]
    return statistics.median(figures) if figures else None


def together_flags(flags: Sequence[str], alone_row: dict[str, str]) -> list[str]:
    """The benchmark flags of a cluster run comparable with the hosts alone: the user's, with
    --explain_scaling, and the devices and steps the alone run had where the flags leave them
    to validate's plan."""
    p = settings_of_flags(flags)
    out = list(flags)
    if not p.measurement.explain_scaling:
        out.append("--explain_scaling")
    taken = {"num_gpus": alone_row["num_devices"], "num_batches": alone_row["num_batches"],
             "num_warmup_batches": alone_row["num_warmup_batches"]}
    for name, value in taken.items():
        if value and not p.is_explicit(name) and not (name == "num_gpus" and p.devices.gpu_indices):
            out.append("--%s=%s" % (name, value))
    return out


def baseline_efficiency(text: Optional[str]) -> Optional[tuple[float, int]]:
    """(efficiency %, hosts) of the hosts-together row of a baseline that is an earlier
    validation over hosts; None for any other baseline."""
    try:
        doc = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    for row in doc.get("rows") or []:
        if isinstance(row, dict) and row.get("check") == TOGETHER and \
                number(row.get("value")) is not None:
            return float(row["value"]), len(str(row.get("subject", "")).split(","))
    return None


def expectation(baseline_text: Optional[str], tolerance_pct: float, min_efficiency_pct: float,
                num_hosts: int) -> Expectation:
    """What the efficiency of the hosts together (and of each group of them) is held to:
    the baseline's hosts-together efficiency (of as many hosts) less the tolerance, else
    --min_efficiency_pct. baseline_text is None without --baseline."""
    found = baseline_efficiency(baseline_text)
    if found is not None and found[1] == num_hosts:
        pct = found[0] * (100.0 - tolerance_pct) / 100.0
        return Expectation(pct, ">= %.1f%% (%g%% of the baseline's %.1f%%)"
                           % (pct, 100.0 - tolerance_pct, found[0]))
    why = ""
    if baseline_text is not None:
        why = ("; the baseline's is of %d hosts" % found[1] if found is not None
               else "; the baseline holds no hosts-together efficiency")
    return Expectation(min_efficiency_pct, ">= %g%% (--min_efficiency_pct%s)"
                       % (min_efficiency_pct, why))


def split_text(row: dict[str, str], efficiency: float) -> str:
    """Where the points lost against the hosts alone went, from --explain_scaling's probes on
    the chief (measure.scaling, the hosts alone as the reference step): '' without probes."""
    ips, batch = number(row.get("images_per_sec")), number(row.get("global_batch_size"))
    probes = [number(row.get(k)) for k in ("slowest_device_step_ms", "allreduce_ms",
                                            "input_step_ms")]
    if not ips or not batch or efficiency >= 100.0 or all(v is None for v in probes):
        return ""
    step = scaling.step_ms(batch, ips)
    d = scaling.decompose(step, step * efficiency / 100.0, *probes)
    parts = ["%s %.0f pts" % (scaling.CAUSE_LABELS[c], d.lost_pts[c]) for c in scaling.CAUSES
             if abs(d.lost_pts[c]) >= 0.5]
    return ", ".join(parts)


def efficiency_check(check: str, names: Sequence[str], result: LaunchResult,
                     alone: Sequence[float], exp: Expectation) -> tuple[Check, Optional[float]]:
    """The row of a group run together, and its efficiency (None when the run failed)."""
    subject = group_subject(names)
    chief = result.rows[0] if result.rows else {}
    together = number(chief.get("images_per_sec")) if not result.exit_code else None
    if together is None or chief.get("status") != "ok":
        why = result.error or "no images/sec in the chief's row"
        return Check(names[0], subject, check, FAIL, "check_failed", why, exp.text), None
    efficiency = 100.0 * together / sum(alone)
    split = split_text(chief, efficiency)
    figure = "%.1f%%: %.1f images/sec together, %.1f the hosts alone%s" % (
        efficiency, together, sum(alone), " (%s)" % split if split else "")
    ok = efficiency >= exp.pct
    return Check(names[0], subject, check, PASS if ok else FAIL, "ok" if ok else "efficiency_low",
                 figure, exp.text, round(efficiency, 2), round(exp.pct, 2)), efficiency


def finding_rows(finding: halving.Finding, measured: dict[halving.Group, float],
                 exp: Expectation) -> list[Check]:
    """The host_drags_ring rows of a Finding (none for NONE), each with the groups measured
    with and without it."""
    def listed(groups):
        return ", ".join("%s %.1f%%" % (",".join(g), measured[g]) for g in groups)

    def row(host: str, subject: str, members: set) -> Check:
        groups = [g for g in measured]
        with_ = [g for g in groups if members <= set(g)]
        without = [g for g in groups if not members <= set(g)]
        label = " and ".join(sorted(members, key=lambda h: finding.hosts.index(h)))
        figure = "with %s: %s; without: %s (%s)" % (
            label, listed(with_), listed(without) or "each host alone passes", finding.why)
        return Check(host, subject, DRAGS, FAIL, DRAGS, figure, exp.text,
                     round(min(measured[g] for g in with_), 2), round(exp.pct, 2))
    if finding.kind in (halving.HOST, halving.HOSTS):
        return [row(h, "host", {h}) for h in finding.hosts]
    if finding.kind == halving.LINK:
        return [row(finding.hosts[0], group_subject(finding.hosts), set(finding.hosts))]
    return []


def read_host_json(text: str, name: str) -> tuple[dict[str, Any], list[Check]]:
    """A host's validate.json: (its other fields, its rows with host = `name`). ValueError
    when it is not one."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or \
            not isinstance(doc.get("rows"), list):
        raise ValueError("not a %s document" % SCHEMA)
    try:
        rows = [dataclasses.replace(Check.from_json(r), host=name) for r in doc["rows"]]
    except (TypeError, ValueError) as exc:
        raise ValueError("a row does not read: %s" % exc) from None
    return {k: v for k, v in doc.items() if k != "rows"}, rows
