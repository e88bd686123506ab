"""The plan of a validation level: a fixed, ordered list of steps, each with its command and an
estimate of its seconds, printed before anything runs.

  quick     health -> devices (one training child, 10 steps after 5, then each device's kernels
            and numeric check, --validate_device_checks=kernels,numeric, then the all-reduce
            probe with sizes, --validate_allreduce_json) -> allreduce (judges what the devices
            child timed) -> figures -> health again
  standard  health -> devices 1/3, 2/3, 3/3 (--validate_devices --explain_scaling, every check,
            100 steps after 10, each a child of its own: the figures are the median of 3; the
            first also times the all-reduce probe) -> allreduce -> figures -> health again
  long      standard, then a soak (one training child of --soak_minutes, its steps sized from
            the step time measured) -> health again

The all-reduce probe runs in a training child, on its strategy and model, rather than in a
`tfbench allreduce` child of its own: that saves a TensorFlow start, the GPUs' initialisation and
NCCL's set-up, which is what lets quick fit in 2 minutes on 8 GPUs. `allreduce` and `figures` run
no child: they judge what the training children measured (against the links, a baseline, the
published range, --min_efficiency_pct).

Each step's estimate (tfbench.validate.estimate) is printed with the plan, with which figures
are estimates from which constants. Each child runs under a timeout of 3 x its estimate +
TIMEOUT_MARGIN_S.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Optional, Sequence

from tfbench import errors
from tfbench.config.argv import settings_of_flags, strip_flags
from tfbench.validate import estimate
from tfbench.validate.estimate import HEALTH_S, REPLICA_S, STARTUP_S, human_seconds

LEVELS = ("quick", "standard", "long")
DEFAULT_SOAK_MINUTES = 30.0
STANDARD_REPEATS = 3

# Health, devices, allreduce, figures, soak: what each step is.
HEALTH, DEVICES, ALLREDUCE, FIGURES, SOAK = "health", "devices", "allreduce", "figures", "soak"

# Steps of the training children, added only when the user gave neither.
LEVEL_STEPS = {"quick": {"num_batches": 10, "num_warmup_batches": 5},
               "standard": {"num_batches": 100, "num_warmup_batches": 10},
               "long": {"num_batches": 100, "num_warmup_batches": 10}}
# The model and the all-reduce a multi-GPU training run uses (flags/scaling_study.flags' base),
# added when the user gave none: the legacy defaults (trivial, parameter_server) have neither
# a published range nor an all-reduce to check.
DEFAULT_FLAGS = {"model": "resnet50", "variable_update": "replicated"}
ALLREDUCE_OPTION = "--validate_allreduce_json"
# --validate_devices' checks at each level (all of them above quick, where tracing each
# device's step alone would not fit in 2 minutes on 8 GPUs).
LEVEL_CHECKS = {"quick": ("kernels", "numeric"), "standard": ("step", "kernels", "numeric"),
                "long": ("step", "kernels", "numeric")}
# Flags validate decides or that run no training step on this host's devices.
REFUSED_FLAGS = {
    "validate_devices": "validate adds --validate_devices itself",
    "explain_scaling": "validate adds --explain_scaling at --level=standard and long",
    "validate_device_checks": "each level runs its own checks (docs/validate.md)",
    "validate_allreduce_json": "validate times the all-reduce in its first training child",
    "num_runs": "validate repeats a run in children of their own (3 at --level=standard)",
    "json_dir": "validate keeps each child's JSON manifest in --out_dir's runs/",
    "forward_only": "validate checks the training step", "eval": "validate checks the "
    "training step", "data_only": "validate checks the training step",
    "diagnose_input": "--diagnose_input runs probes of its own; run it apart",
    "worker_hosts": "validate checks one host; `tfbench launch --hosts=... -- validate` checks "
                    "several", "ps_hosts": "validate checks one host",
    "controller_host": "validate checks one host",
}

TIMEOUT_MARGIN_S = 120.0


@dataclasses.dataclass(frozen=True)
class Host:
    """What the plan runs on: the device kind, how many devices, the GPU's name (None: CPU
    devices or not known)."""
    kind: str
    devices: int
    device_name: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Step:
    name: str                     # health, devices (devices_2, ...), allreduce, figures, ...
    kind: str                     # HEALTH, DEVICES, ALLREDUCE, FIGURES, SOAK
    what: str                     # one line
    command: tuple[str, ...]      # the child's argv (() for figures; the soak's lacks its
    estimate_s: float             # --num_batches, decided from the step time measured)
    flags: tuple[str, ...] = ()   # a training child's benchmark flags (its rows' flags)
    repeat: int = 0               # devices: 1, 2, 3

    @property
    def timeout_s(self) -> float:
        return 3.0 * self.estimate_s + TIMEOUT_MARGIN_S

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "command": list(self.command),
                "estimate_s": round(self.estimate_s, 1)}


@dataclasses.dataclass(frozen=True)
class Plan:
    level: str
    steps: tuple[Step, ...]
    host: Host
    flags: tuple[str, ...]        # the benchmark flags every child gets
    added: tuple[str, ...]        # those of them validate added (not given)
    soak_minutes: Optional[float] = None

    @property
    def estimate_s(self) -> float:
        return sum(s.estimate_s for s in self.steps)

    def basis(self) -> dict[str, Any]:
        """What the estimates are made of (validate.json's `estimate_basis`)."""
        return estimate.basis(settings_of_flags(self.flags), self.host)

    def lines(self) -> list[str]:
        """The plan as printed before anything runs."""
        n = self.host.devices
        where = ("%d GPU%s" % (n, "" if n == 1 else "s")) if self.host.kind == "gpu" else \
            "%d logical CPU devices" % n if n > 1 else "the CPU"
        if self.host.device_name:
            where += " (%s)" % self.host.device_name
        out = ["tfbench validate --level=%s: %d steps, about %s on %s" % (
            self.level, len(self.steps), human_seconds(self.estimate_s), where)]
        if self.added:
            out.append("  added to the benchmark flags (give them to change): %s"
                       % " ".join(self.added))
        for i, step in enumerate(self.steps, 1):
            out.append("  %d. %-17s about %6s  %s" % (i, step.name, human_seconds(
                step.estimate_s), step.what))
        return out + estimate.basis_lines(self.basis())


def host_for(flags: Sequence[str], gpus: tuple[int, str], device_name: Optional[str] = None
             ) -> tuple[Host, str]:
    """(the Host the benchmark flags `flags` run on, a notice: '' or why the checks run on
    the CPU). `gpus`: (the GPUs CUDA will number, why none), tfbench.measure.nvml.cuda_gpus'."""
    p = settings_of_flags(flags)
    devices = p.asks.devices
    if p.asks.cpu:
        return Host("cpu", devices), ""
    if gpus[0] == 0:
        return Host("cpu", devices), ("no GPU found (%s): the checks run where TensorFlow "
                                      "runs the benchmark" % (gpus[1] or "NVML lists none"))
    return Host("gpu", devices, device_name), ""


def run_key(flags: Sequence[str], host: Host) -> dict[str, Any]:
    """What a baseline must match, as far as the flags and NVML tell before anything runs:
    model, precision, batch_size per device (0: the model's default), num_devices,
    device_kind and device_name (None on CPU devices or when not known)."""
    p = settings_of_flags(flags)
    return {"model": p.workload.model, "precision": p.asks.precision,
            "batch_size": p.schedule.batch_size, "num_devices": host.devices,
            "device_kind": host.kind, "device_name": host.device_name}


def check_options(level: str, tolerance_pct: float, soak_minutes: Optional[float],
                  min_efficiency_pct: Optional[float]) -> None:
    """UsageError for options no plan can run."""
    if level not in LEVELS:
        raise errors.UsageError("--level=%s: choose one of %s" % (level, ", ".join(LEVELS)))
    if not 0 <= tolerance_pct <= 50:
        raise errors.UsageError("--tolerance_pct=%g: give a percentage from 0 to 50"
                                % tolerance_pct)
    if soak_minutes is not None:
        if level != "long":
            raise errors.UsageError("--soak_minutes is the soak of --level=long (got "
                                    "--level=%s)" % level)
        if not soak_minutes > 0:
            raise errors.UsageError("--soak_minutes=%g: give minutes > 0" % soak_minutes)
    if min_efficiency_pct is not None and not 0 < min_efficiency_pct <= 100:
        raise errors.UsageError("--min_efficiency_pct=%g: give a percentage in (0, 100]"
                                % min_efficiency_pct)


def benchmark_flags(level: str, flags: Sequence[str], gpus: int
                    ) -> tuple[list[str], list[str]]:
    """(every child's benchmark flags, those added) from the user's: the defaults of
    DEFAULT_FLAGS and the level's steps where not given, --num_gpus=<GPUs NVML sees> on GPUs
    when neither --num_gpus nor --gpu_indices is. UsageError for a flag validate decides or
    one a child would refuse."""
    p = settings_of_flags(flags)
    for name, why in REFUSED_FLAGS.items():
        if p.is_explicit(name):
            raise errors.UsageError("--%s: %s" % (name, why))
    added = []
    for name, value in list(DEFAULT_FLAGS.items()) + list(LEVEL_STEPS[level].items()):
        if not p.is_explicit(name) and not (name == "num_batches" and p.is_explicit(
                "num_epochs")):
            added.append("--%s=%s" % (name, value))
    if not p.asks.cpu and gpus > 1 and not p.is_explicit("num_gpus") \
            and not p.devices.gpu_indices:
        added.append("--num_gpus=%d" % gpus)
    every = list(flags) + added
    settings_of_flags(every)   # refused here, not by the first child
    return every, added


def _child_files(out_dir: str, name: str) -> list[str]:
    return ["--csv_file=%s" % os.path.join(out_dir, "points", name + ".csv"),
            "--json_dir=%s" % os.path.join(out_dir, "runs", name)]


def build(level: str, flags: Sequence[str], host: Host, out_dir: str,
          child_cmd: Sequence[str], health_cmd: Sequence[str],
          soak_minutes: Optional[float] = None, added: Sequence[str] = (),
          baseline: Optional[str] = None) -> Plan:
    """The plan of `level` for benchmark flags `flags` (benchmark_flags' result) on `host`."""
    p = settings_of_flags(flags)
    indices = ["--gpu_indices=%s" % p.devices.gpu_indices] if p.devices.gpu_indices else []
    devices_what = "each device alone: its training step, a matmul, a convolution, its " \
                   "gradients"

    def health(name: str, what: str) -> Step:
        return Step(name, HEALTH, what, tuple(health_cmd) + (
            "--json=%s" % os.path.join(out_dir, "runs", name + ".json"),) + tuple(indices),
            HEALTH_S)

    def training(name: str, extra: Sequence[str], what: str, repeat: int = 0,
                 allreduce: bool = False) -> Step:
        checks = LEVEL_CHECKS[level]
        extra = list(extra) + ["--validate_devices"]
        if checks != LEVEL_CHECKS["standard"]:
            extra.append("--validate_device_checks=%s" % ",".join(checks))
        if allreduce:
            extra.append("%s=%s" % (ALLREDUCE_OPTION, allreduce_json))
        args = tuple(flags) + tuple(extra)
        explain = "--explain_scaling" in extra
        return Step(name, DEVICES, what, tuple(child_cmd) + args + tuple(
            _child_files(out_dir, name)), estimate.training_estimate(p, host, checks, explain,
                                                             allreduce), args, repeat)

    together = host.devices > 1
    allreduce_json = os.path.join(out_dir, "runs", "allreduce.json")
    steps = [health(HEALTH, "each GPU's health facts (NVML): ECC, memory, clocks, PCIe, "
                            "NVLink, temperature, power; the driver")]
    if level == "quick":
        steps.append(training(DEVICES, [], "each device alone: a matmul, a convolution, its "
                              "gradients%s" % ("; then the all-reduce alone" if together
                                               else ""), allreduce=together))
    else:
        for i in range(1, STANDARD_REPEATS + 1):
            steps.append(training("%s_%d" % (DEVICES, i), ["--explain_scaling"],
                                  ("run 1 of %d: %s; the scaling efficiency and where it "
                                   "goes%s" % (STANDARD_REPEATS, devices_what,
                                               "; then the all-reduce alone" if together
                                               else "")) if i == 1 else
                                  "run %d of %d, as run 1" % (i, STANDARD_REPEATS), i,
                                  allreduce=together and i == 1))
    if together:
        steps.append(Step(ALLREDUCE, ALLREDUCE, "the gradient all-reduce's bus bandwidth (timed "
                          "by %s) against the links'" % steps[1].name, (), 0.0))
    if baseline:
        against = "images/sec%s against the baseline %s" % (
            "" if level == "quick" else ", scaling efficiency", baseline)
    else:
        against = "images/sec against the published range%s" % (
            "" if level == "quick" else ", scaling efficiency against the least expected")
    steps.append(Step(FIGURES, FIGURES, against, (), 0.0))
    steps.append(health("health_after", "the health facts again: new ECC errors, what "
                                        "changed"))
    if level == "long":
        minutes = soak_minutes or DEFAULT_SOAK_MINUTES
        # Its --num_batches is added when it starts, from the step time measured.
        soak_flags = tuple(strip_flags(flags, ("num_batches", "num_epochs")))
        steps.append(Step(SOAK, SOAK, "%s of training (steps sized from the step time "
                                      "measured): the last tenth as fast as the first"
                          % human_seconds(minutes * 60),
                          tuple(child_cmd) + soak_flags + tuple(_child_files(out_dir, SOAK)),
                          STARTUP_S[host.kind] + host.devices * REPLICA_S[host.kind]
                          + minutes * 60.0, soak_flags))
        steps.append(health("health_after_soak", "the health facts after the soak"))
    return Plan(level, tuple(steps), host, tuple(flags), tuple(added),
                soak_minutes if level == "long" else None)


def allreduce_source(plan: Plan) -> tuple[Step, str]:
    """(the training step that times the all-reduce probe, the file it writes it to)."""
    for step in plan.steps:
        for arg in step.command:
            if arg.startswith(ALLREDUCE_OPTION + "="):
                return step, arg.split("=", 1)[1]
    raise LookupError("no step of the plan times the all-reduce")


def soak_batches(minutes: float, images_per_sec: float, global_batch: float) -> int:
    """Steps that take `minutes` at the rate measured."""
    return max(1, math.ceil(minutes * 60.0 * images_per_sec / global_batch))
