"""What runs after the timed steps and the run's figures: the probes, each an Action that decides
whether it applies to the run as built and then runs (TensorFlow Model Garden's
`orbit`/`core/actions.py` pattern), registered once in ACTIONS, in the order they run.

engine.runner.run reads as: resolve, build, warm up, time, finish the figures, run the actions.
A new probe is one module and one entry here. The probes change none of the run's own figures:
they add theirs to RunResult.extra, and they share each device's one-device step (DeviceSteps),
built when the first of them asks. The options a probe takes are its own to refuse: each action's
`refuse` runs right after the run's facts are read (check_options), before the header, the
devices or the strategy, so an action that applies can run.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from tfbench.config.settings import Settings
from tfbench.distribute.strategy import BuiltStrategy
from tfbench.engine import allreduce_run, device_checks, explain
from tfbench.engine.base import ModeRunner
from tfbench.engine.resolved import Facts, Resolved, read_facts
from tfbench.engine.runlog import RunLog
from tfbench.results import RunResult


@dataclasses.dataclass(frozen=True)
class Context:
    """What an action reads: the run's settings and plan, its strategy, its runner (model,
    steps, devices), its result and log, and the device steps the actions share."""
    p: Settings
    plan: Resolved
    sp: BuiltStrategy
    runner: ModeRunner
    res: RunResult
    log: RunLog
    shared: explain.DeviceSteps


@dataclasses.dataclass(frozen=True)
class Action:
    name: str                               # the flag that asks for it
    applies: Callable[[Context], bool]
    run: Callable[[Context], None]
    # Refuses (UsageError) the options it cannot apply to this run; None: it takes any.
    refuse: Optional[Callable[[Settings, Facts], None]] = None


ACTIONS: tuple[Action, ...] = (
    # Where the scaling efficiency goes (docs/measurements.md).
    Action("explain_scaling",
           lambda c: explain.applies(c.p, c.plan, c.sp),
           lambda c: explain.probe(c.runner, c.sp, c.res, c.log, c.shared)),
    # Each device alone, for tfbench validate (docs/validate.md).
    Action("validate_devices",
           lambda c: bool(c.p.measurement.validate_devices),
           lambda c: device_checks.check(c.runner, c.res, c.shared, c.log),
           device_checks.refuse_options),
    # The run's all-reduce alone over sizes, for tfbench validate.
    Action("validate_allreduce_json",
           lambda c: bool(c.p.measurement.validate_allreduce_json),
           lambda c: allreduce_run.after_run(c.runner, c.sp, c.res,
                                             c.p.measurement.validate_allreduce_json, c.log),
           allreduce_run.refuse_options),
)


def check_options(p: Settings, facts: Facts, actions: tuple[Action, ...] = ACTIONS) -> None:
    """Every action refuses (UsageError) the options it cannot apply to a run of these facts,
    whether or not it applies: a probe's option given without it is refused too."""
    for action in actions:
        if action.refuse is not None:
            action.refuse(p, facts)


def checked_facts(p: Settings) -> Facts:
    """What every entry point that runs steps reads first (a run, --diagnose_input before its
    three runs, `tfbench allreduce`): the run's facts, with the probes' refusals applied to the
    flags as the user gave them."""
    facts = read_facts(p)
    check_options(p, facts)
    return facts


def run_all(p: Settings, plan: Resolved, sp: BuiltStrategy, runner: ModeRunner, res: RunResult,
            log: RunLog, actions: tuple[Action, ...] = ACTIONS) -> list[str]:
    """Runs every action that applies, in order; the names of those that ran. The NCCL log the
    probes asked for is discarded afterwards, whatever happens (explain.keep_nccl_log keeps it
    where a probe failed)."""
    context = Context(p, plan, sp, runner, res, log, explain.DeviceSteps(runner))
    ran = []
    try:
        for action in actions:
            if action.applies(context):
                action.run(context)
                ran.append(action.name)
    finally:
        explain.discard_nccl_log()
    return ran
