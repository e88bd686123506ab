"""The seconds a validation's steps are estimated to take (tfbench.validate.plan prints them
before anything runs), and what the estimates are made of.

The estimate of a training child is its start-up (importing TensorFlow, starting the devices,
building the model: a constant per device kind) plus tracing the first step's replica on each
device, plus its work: steps x the step time, from the model's FLOPs
(tfbench.measure.model_table) over the device's achievable TFLOP/s (the GPU's datasheet peak x
ACHIEVED_FRACTION when tfbench.measure.peak knows it, else a stated constant), never below a
per-step floor; each device's checks, the explain probes and the all-reduce probe add stated
constants.

The CPU constants were measured; the GPU ones (ACHIEVED_FRACTION, REPLICA_S, STARTUP_S and the
checks' allowances) are not yet: the printed plan says which figures are estimates from which
constants (basis, basis_lines), validate.json keeps them (`estimate_basis`) beside each step's
seconds, and scripts/gpu_smoke.sh prints what a GPU measured against them (measured_against).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from tfbench.config.settings import Settings
from tfbench.measure import model_table, peak

# The estimate's constants (seconds; see the module docstring). CPU: measured with resnet50
# at 64 px on 2 logical devices of an AMD EPYC (2 cores, TensorFlow 2.21; docs/validate.md,
# "How long each level takes"). GPU: allowances not yet measured on a GPU (validate.json keeps
# each step's seconds beside its estimate): the host's share as on the CPU, plus cuDNN's
# autotuning of each new shape on each device.
STARTUP_S = {"gpu": 20.0, "cpu": 5.0}            # import TensorFlow, start devices, build model
REPLICA_S = {"gpu": 3.0, "cpu": 4.5}             # per device: its replica of the first step
STEP_FLOOR_S = {"gpu": 0.01, "cpu": 0.03}        # host work of a step, however small the model
# Per device checked alone (tfbench.engine.device_checks): its own model and optimizer, then
# each check: the step's tracing and first call, the two kernels, the numeric pass's tracing.
DEVICE_BUILD_S = {"gpu": 1.0, "cpu": 1.0}
CHECK_S = {"step": {"gpu": 4.0, "cpu": 2.0}, "kernels": {"gpu": 1.0, "cpu": 0.5},
           "numeric": {"gpu": 4.5, "cpu": 2.5}}
EXPLAIN_S = {"gpu": 6.0, "cpu": 3.0}             # per device: the explain probes' builds
ALLREDUCE_S = {"gpu": 15.0, "cpu": 6.0}          # the all-reduce probe's sizes
HEALTH_S = 3.0                                   # a Python child reading NVML
CPU_TFLOPS = 0.05                                # a CPU's achievable TFLOP/s, all its devices
GPU_TFLOPS_UNKNOWN = 20.0                        # a GPU the peak table does not know
ACHIEVED_FRACTION = 0.2                          # of a GPU's datasheet peak a training step gets
PROBE_STEPS = 13                                 # one device's step timed alone: 10 after 2, +1
BATCH_UNKNOWN = 64                               # a batch left at the model's default
# Where the constants come from, as the plan prints it.
CONSTANTS_MEASURED = {
    "gpu": "the GPU constants (ACHIEVED_FRACTION, REPLICA_S, start-up, the allowances) are "
           "not yet measured: validate.json keeps each step's seconds beside its estimate, and "
           "scripts/gpu_smoke.sh prints the measured step and first step against them",
    "cpu": "the CPU constants were measured on an AMD EPYC (2 cores, TensorFlow 2.21, resnet50 "
           "at 64 px): another CPU differs"}


def basis(p: Settings, host: Any) -> dict[str, Any]:
    """What the estimates of benchmark settings `p` on `host` (tfbench.validate.plan.Host) are
    made of (validate.json's `estimate_basis`): the step's estimate and its source, the
    constants per device kind, and whether they were measured (CPU devices) or not (GPUs)."""
    kind = host.kind
    step = step_estimate(p, host)
    return {"device_kind": kind, "devices": host.devices,
            "step_s": step.seconds, "step_from": step.source,
            "work_tflop": step.work_tflop, "peak_tflops": step.peak_tflops,
            "achieved_fraction": ACHIEVED_FRACTION if step.peak_tflops else None,
            "startup_s": STARTUP_S[kind], "replica_s": REPLICA_S[kind],
            "constants": CONSTANTS_MEASURED[kind]}


def basis_lines(b: dict[str, Any]) -> list[str]:
    """The plan's lines that say which of its figures are estimates, and from what."""
    device = "a GPU" if b["device_kind"] == "gpu" else "a CPU device"
    return ["  estimates, not measurements: a step %s = %s; start-up %s; %s s %s for its "
            "replica of the first step; an allowance per check" % (
                _ms(b["step_s"]), b["step_from"], human_seconds(b["startup_s"]),
                "%g" % b["replica_s"], device),
            "  %s" % b["constants"]]


def _ms(seconds: float) -> str:
    """'15.0 ms', '1.20 s'."""
    return "%.1f ms" % (1000.0 * seconds) if seconds < 1.0 else "%.2f s" % seconds


def measured_against(basis: dict[str, Any], manifest: dict[str, Any]) -> str:
    """One line: what a training child measured (its JSON manifest's step_times and first
    warm-up step, seconds) against the plan's estimate (`basis`, basis()): the step and
    the share of the datasheet peak it reached, the first step and the replica's seconds each
    device took. '' when the manifest has no steps."""
    steps = sorted(float(t) for t in manifest.get("step_times") or [] if t)
    if not steps:
        return ""
    step = steps[len(steps) // 2]
    parts = ["step %s measured (median of %d), estimate %s" % (_ms(step), len(steps),
                                                             _ms(basis["step_s"]))]
    if basis.get("peak_tflops") and basis.get("work_tflop"):
        parts[-1] += ": %.3g of the datasheet peak reached, ACHIEVED_FRACTION %g" % (
            basis["work_tflop"] / step / basis["peak_tflops"], basis["achieved_fraction"])
    warm = [float(t) for t in manifest.get("warmup_times") or [] if t]
    devices = max(int(basis.get("devices") or 1), 1)
    if warm:
        replica = max(warm[0] - step, 0.0) / devices
        parts.append("first step %s on %d device%s, %s each beyond a step, REPLICA_S %g s" % (
            _ms(warm[0]), devices, "" if devices == 1 else "s", _ms(replica),
            basis["replica_s"]))
    return "; ".join(parts)


def human_seconds(seconds: float) -> str:
    """'95 s', '12 min', '1.5 h'."""
    if seconds < 120:
        return "%d s" % round(seconds)
    if seconds < 5400:
        return "%d min" % round(seconds / 60.0)
    return "%.1f h" % (seconds / 3600.0)


def _model_gflops(p: Settings) -> Optional[float]:
    """Forward GFLOPs per image from the shipped table, scaled by the pixels of another image
    size (a convolutional network's FLOPs grow with them); None for a model it lacks."""
    table, _ = model_table.load()
    dataset = "cifar10" if (p.data.data_name or "").startswith("cifar") else "imagenet"
    found = table.get((p.workload.model, dataset)) or table.get((p.workload.model, "imagenet"))
    if found is None:
        return None
    size, _, flops = found
    scale = (p.workload.image_size / size) ** 2 if p.workload.image_size else 1.0
    return flops * scale / 1e9


@dataclasses.dataclass(frozen=True)
class StepEstimate:
    """One training step's estimate on one device and what it is made of."""
    seconds: float
    source: str                          # the phrase: from which figures and constants
    work_tflop: Optional[float] = None   # the step's training FLOPs (None: model not in table)
    peak_tflops: Optional[float] = None  # the GPU's datasheet peak it was scaled from


def step_estimate(p: Settings, host: Any) -> StepEstimate:
    """One training step's estimate on one device (every device computes its own batch)."""
    gflops = _model_gflops(p)
    if gflops is None:   # a model the table lacks: a stated second per step
        return StepEstimate(1.0, "1 s, a constant for a model without FLOPs in tfbench's table")
    batch = p.schedule.batch_size or BATCH_UNKNOWN
    work = 3.0 * gflops * batch / 1e3   # TFLOPs: training = 3 x forward
    what = "%s's training FLOPs at batch %d" % (p.workload.model, batch)
    found = None
    if host.kind == "gpu":
        precision = p.asks.precision
        found = peak.gpu_peak_tflops(host.device_name, precision) \
            if host.device_name else None
        if found:
            tflops = found * ACHIEVED_FRACTION
            over = "%d%% (ACHIEVED_FRACTION, a constant) of the %s's datasheet %s peak (%g " \
                   "TFLOP/s)" % (round(100 * ACHIEVED_FRACTION), host.device_name, precision,
                                 found)
        else:
            tflops = GPU_TFLOPS_UNKNOWN
            over = "%g TFLOP/s, a constant for a GPU tfbench's peak table lacks" % tflops
    else:
        tflops = CPU_TFLOPS / max(host.devices, 1)   # the CPU's cores, shared by its devices
        over = "%g TFLOP/s, a constant: the CPU's %g shared by its %d device%s" % (
            tflops, CPU_TFLOPS, host.devices, "" if host.devices == 1 else "s")
    seconds = work / tflops
    source = "%s over %s" % (what, over)
    if seconds < STEP_FLOOR_S[host.kind]:
        seconds = STEP_FLOOR_S[host.kind]
        source = "the floor of a step's host work (%s is less)" % source
    return StepEstimate(seconds, source, work, found)


def step_seconds(p: Settings, host: Any) -> float:
    """One training step's estimate on one device (every device computes its own batch)."""
    return step_estimate(p, host).seconds


def training_estimate(p: Settings, host: Any, checks: Sequence[str], explain: bool,
                      allreduce: bool) -> float:
    """A training child's seconds: start-up, each device's replica of the first step, its
    steps, each device's checks, the explain probes and the all-reduce probe."""
    kind, n = host.kind, host.devices
    step = step_seconds(p, host)
    steps = (p.schedule.num_batches or 100) + p.asks.warmup_batches
    seconds = STARTUP_S[kind] + n * REPLICA_S[kind] + steps * step
    per_device = DEVICE_BUILD_S[kind] + sum(CHECK_S[c][kind] for c in checks)
    if "step" in checks:
        per_device += PROBE_STEPS * step
    if "numeric" in checks:
        per_device += step
    seconds += n * per_device
    if explain:
        seconds += n * EXPLAIN_S[kind] + PROBE_STEPS * step
    if allreduce:
        seconds += ALLREDUCE_S[kind]
    return seconds
