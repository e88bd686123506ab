"""Where multi-device and multi-host efficiency goes: a step's time split into its causes.

A run on N devices (or workers) takes `step` ms per step; the same step on one device takes
`reference` ms (the one-device row of a scaling study at the same per-device batch, else the
one-device step the run's own probe timed). The difference, the time lost to scaling, is split
in this order, each part clipped to what is left of it:

  compute      slowest device's extra compute: the slowest device's step with every device
               computing at once (the probe's `slowest_device_step_ms`), less `reference`. It
               holds a slow device (a throttled GPU) and a limit the devices share (power,
               cooling, or on logical CPU devices the CPU's cores).
  input        input wait (real data): the time the input pipeline alone needs for a step's
               batch beyond what the devices need (slowest device's step + the all-reduce):
               prefetching hides the rest.
  allreduce    the all-reduce of the gradients, timed alone by the probe, less the overlap the
               run achieves: only what the step shows beyond the slowest device's compute and
               the input wait counts, up to the probe's time.
  unexplained  the rest (host work between steps, a parameter server's synchronisation, a
               difference between the probes and the run); negative when the probes saw more
               than the run lost.

Each part in points of efficiency: 100 x part / step, so the parts add up to
100 - efficiency, efficiency = 100 x reference / step (the scaling efficiency of weak scaling
against one device). No TensorFlow: the console of a run and the study reports both use it.
The verdict holds the all-reduce's busbw against the expectation and the hop that decides it,
as the link's description names them (tfbench.measure.links, tfbench.measure.nics).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from tfbench.measure.links import EXPECTED_FROM, NO_EXPECTATION
from tfbench.measure.nics import NETWORK_HOP
from tfbench.measure.sockets import CROSSES_SOCKETS

# The causes, in the order they are attributed; "unexplained" is what is left.
CAUSES = ("compute", "input", "allreduce", "unexplained")
CAUSE_LABELS = {"compute": "slowest device's extra compute", "input": "input wait",
                "allreduce": "all-reduce (not overlapped)", "unexplained": "unexplained"}
# A device whose step (all devices at once) is this much slower than the median device's is
# named as the slow one. Logical CPU devices share the CPU's cores, and their steps spread
# more from one to the next: a device is named there at 1.5x.
SLOW_DEVICE_RATIO = {"gpu": 1.10, "cpu": 1.5}


@dataclasses.dataclass(frozen=True)
class Decomposition:
    """A step of `step_ms` against a one-device step of `reference_ms`: the ms and points of
    efficiency each cause costs (see the module)."""
    step_ms: float
    reference_ms: float
    lost_ms: dict[str, float]
    allreduce_probe_ms: Optional[float] = None   # the all-reduce alone, before overlap

    @property
    def efficiency_pct(self) -> float:
        return 100.0 * self.reference_ms / self.step_ms

    @property
    def lost_pts(self) -> dict[str, float]:
        return {cause: 100.0 * ms / self.step_ms for cause, ms in self.lost_ms.items()}

    @property
    def overlap_ms(self) -> Optional[float]:
        """How much of the probe's all-reduce the step hides (behind the backward pass)."""
        if self.allreduce_probe_ms is None:
            return None
        return self.allreduce_probe_ms - self.lost_ms["allreduce"]

    @property
    def largest(self) -> str:
        """The cause that costs the most (ties: the first in CAUSES)."""
        return max(CAUSES, key=lambda cause: self.lost_ms[cause])


def step_ms(global_batch: float, images_per_sec: float) -> float:
    """A step's time from the run's rate: its global batch (every device's, every worker's
    images) over images/sec, in ms."""
    return 1000.0 * global_batch / images_per_sec


def _clip(value: float, high: float) -> float:
    return min(max(value, 0.0), max(high, 0.0))


def decompose(step_ms: float, reference_ms: float, slowest_device_ms: Optional[float],
              allreduce_ms: Optional[float], input_ms: Optional[float] = None
              ) -> Decomposition:
    """The step's loss against the reference, cause by cause (the module's rules). A probe
    figure that is None (not measured) counts as nothing."""
    if step_ms <= 0 or reference_ms <= 0:
        raise ValueError("step and reference must be positive (got %r, %r)"
                         % (step_ms, reference_ms))
    lost = step_ms - reference_ms
    devices = slowest_device_ms if slowest_device_ms is not None else reference_ms
    reduce_ms = allreduce_ms or 0.0
    compute = _clip(devices - reference_ms, lost)
    wait = 0.0
    if input_ms is not None:
        wait = _clip(input_ms - (devices + reduce_ms), lost - compute)
    allreduce = _clip(min(step_ms - max(devices, reference_ms) - wait, reduce_ms),
                      lost - compute - wait)
    parts = {"compute": compute, "input": wait, "allreduce": allreduce,
             "unexplained": lost - compute - wait - allreduce}
    return Decomposition(step_ms, reference_ms, parts, allreduce_ms)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the verdict names besides the parts: the all-reduce's size and bandwidth, the link,
    the slow device, the input pipeline. Every field may be unknown (None or empty)."""
    allreduce_mib: Optional[float] = None
    busbw_gbs: Optional[float] = None
    expected_busbw_gbs: Optional[float] = None
    link: str = ""                      # "PCIe 3.0 x16" / "NVLink 3.0 x12" / "logical CPU ..."
    degraded: str = ""                  # "GPU 5's PCIe link runs at x4 of x16"
    # What decides expected_busbw_gbs (the link's phrase, tfbench.measure.links): "expected
    # busbw from the NICs between hosts (...)" or "no expected busbw: <why>"
    expected_from: str = ""
    slowest_device: str = ""
    slowest_device_ratio: Optional[float] = None
    device_kind: str = "gpu"
    global_batch: Optional[int] = None
    host_ms_between_steps: Optional[float] = None   # a run's own figure (not in the CSV)
    workers: int = 1


def evidence(figures: Mapping[str, Any], device_kind: str = "gpu",
             global_batch: Optional[int] = None) -> Evidence:
    """The verdict's evidence from a run's figures under their CSV names (RunResult.extra, or
    a results row); a link below its maximum is the `link` phrase's part that says so."""
    def number(name: str) -> Optional[float]:
        value = figures.get(name)
        try:
            return None if value in (None, "") or value != value else float(value)
        except (TypeError, ValueError):
            return None
    def text(name: str) -> str:
        value = figures.get(name)
        return "" if value is None or value != value else str(value)   # NaN: an empty cell
    parts = [x.strip() for x in text("link").split(";")]
    return Evidence(
        allreduce_mib=number("allreduce_mib"), busbw_gbs=number("allreduce_busbw_gbs"),
        expected_busbw_gbs=number("expected_busbw_gbs"), link=parts[0],
        degraded="; ".join(x for x in parts if " runs at " in x),
        expected_from=next((x for x in parts if x.startswith((EXPECTED_FROM, NO_EXPECTATION))),
                           ""),
        slowest_device=text("slowest_device"),
        slowest_device_ratio=number("slowest_device_ratio"), device_kind=device_kind,
        global_batch=global_batch, host_ms_between_steps=number("host_ms_between_steps"),
        workers=int(number("num_workers") or 1))


def verdict(d: Decomposition, e: Evidence = Evidence()) -> str:
    """One line: the largest cause, its share of the step, and the action it suggests."""
    cause = d.largest
    lost = d.lost_ms[cause]
    head = "%.1f of %.1f points lost" % (100.0 - d.efficiency_pct, 100.0)
    if lost <= 0.0:
        return "Scaling: nothing lost against the one-device step (%.1f ms)" % d.reference_ms
    share = "%.1f ms of the %.1f ms step (%.1f points)" % (lost, d.step_ms, d.lost_pts[cause])
    if cause == "allreduce" and e.busbw_gbs is None and e.allreduce_mib is not None:
        return ("Largest cause: the gradient exchange of --variable_update=parameter_server "
                "(each gradient summed on its variable's device, every variable read by every "
                "device) of %.1f MiB takes %s%s: an all-reduce may be faster "
                "(--variable_update=replicated)" % (e.allreduce_mib, share, _overlap(d)))
    if cause == "allreduce":
        return "Largest cause: the all-reduce%s takes %s%s: %s" % (
            " of %.1f MiB" % e.allreduce_mib if e.allreduce_mib is not None else "", share,
            _overlap(d), _allreduce_action(e))
    if cause == "compute":
        return "Largest cause: the slowest device's extra compute, %s: %s" % (
            share, _compute_action(d, e))
    if cause == "input":
        return ("Largest cause: input wait, %s: the input pipeline alone delivers a step's "
                "batch%s slower than the devices use it; give it more threads "
                "(--datasets_num_private_threads), cache it (--datasets_use_caching) or put the "
                "data on a faster disk" % (share, " of %d images" % e.global_batch
                                            if e.global_batch else ""))
    host = ""
    if e.host_ms_between_steps:
        host = "; host time between steps is %.1f ms of it" % e.host_ms_between_steps
    return ("Largest cause: unexplained, %s (%s%s): not the all-reduce, the devices or the "
            "input as probed; look at host time between steps, parameter-server "
            "synchronisation, or a profile (--trace_file)" % (share, head, host))


def _overlap(d: Decomposition) -> str:
    hidden = d.overlap_ms
    if hidden is None or hidden < 0.05 * (d.allreduce_probe_ms or 0.0):
        return ""
    return " (%.1f ms more hidden behind the backward pass)" % hidden


_FEWER_BYTES = ("send fewer bytes (fp16 gradients: --precision=fp16 with "
                "--compact_gradient_transfer), a larger batch per device, or ")


def _allreduce_action(e: Evidence) -> str:
    across = e.device_kind == "gpu" and e.workers > 1
    hop = e.expected_from[len(EXPECTED_FROM):] if e.expected_from.startswith(EXPECTED_FROM) \
        else ""
    network = hop.startswith(NETWORK_HOP)
    # A ring across the CPU sockets: the link between them (NCCL's rate of it) decides.
    sockets = not across and CROSSES_SOCKETS in hop
    bandwidth = ""
    if e.busbw_gbs is not None:
        bandwidth = "bus bandwidth %.3g GB/s" % e.busbw_gbs
        if across:
            bandwidth += " across %d workers" % e.workers
        elif e.link:
            bandwidth += " on %s" % e.link
        if e.expected_busbw_gbs:
            bandwidth += ", where up to %.0f is expected" % e.expected_busbw_gbs
            if across or sockets:
                bandwidth += " from %s" % hop if hop else ""
        elif e.expected_from.startswith(NO_EXPECTATION):
            bandwidth += "; " + e.expected_from
    if e.degraded:
        action = "%s: reseat the card or move it to a slot of full width" % e.degraded
    elif e.device_kind == "cpu" and e.workers > 1:
        action = ("CPU workers all-reduce with TensorFlow's ring over gRPC: compare busbw with "
                  "the network between the hosts")
    elif e.device_kind == "cpu":
        action = ("logical CPU devices all-reduce through host memory; on GPUs this is the "
                  "figure to compare with the link")
    elif not e.expected_busbw_gbs:
        action = ("compare busbw with the rate of the network between the hosts" if across else
                  "compare busbw with the rate of the GPUs' links (nvidia-smi topo -m)")
    elif e.busbw_gbs is not None and e.busbw_gbs < 0.5 * e.expected_busbw_gbs:
        action = ("well below what %s carries: check the transport NCCL chose "
                  "(NCCL_DEBUG=INFO, `tfbench launch --nccl_debug`) and the GPUs' topology "
                  "(nvidia-smi topo -m)" % ("the slowest hop" if across else "the link"))
    elif network:
        action = "the network between the hosts is the limit: " + _FEWER_BYTES + "faster NICs"
    elif sockets:
        action = ("the link between the CPU sockets is the limit: " + _FEWER_BYTES + "GPUs "
                  "of one socket (--gpu_indices; nvidia-smi topo -m shows which)")
    else:
        action = "the link is the limit: " + _FEWER_BYTES + "a faster interconnect"
    return "; ".join(x for x in (bandwidth, action) if x)


def _compute_action(d: Decomposition, e: Evidence) -> str:
    if e.slowest_device and e.slowest_device_ratio is not None and \
            e.slowest_device_ratio >= SLOW_DEVICE_RATIO.get(e.device_kind, 1.10):
        return ("%s computes %.2fx the median device's step: check its clocks, temperature and "
                "power cap (throttling) and its link, or leave it out (--gpu_indices)"
                % (e.slowest_device, e.slowest_device_ratio))
    if e.device_kind == "cpu":
        return ("every device is slower when all compute at once: logical CPU devices share "
                "one CPU's cores")
    return ("every device is slower when all compute at once (no one device stands out): a "
            "limit they share, such as power, cooling or the host's PCIe switch")
