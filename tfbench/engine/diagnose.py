"""--diagnose_input: the same configuration run three times, on the input pipeline alone, on
synthetic data and on real data (last, so the log ends like a real-data run); the verdict
(input-bound or not) is made from the three images/sec figures (tfbench.data.diagnose).
"""

from __future__ import annotations

from tfbench.config.settings import Settings
from tfbench.engine import actions, runner
from tfbench.engine.base import Clock
from tfbench.engine.resolved import resolve
from tfbench.engine.runlog import RunLog
from tfbench.results import RunResult


def diagnose_input(p: Settings, log: RunLog, result: RunResult, *,
                   clock: Clock = Clock()) -> RunResult:
    """Fills `result` with the real-data run and the diagnosis figures: synthetic and
    input-only images/sec, and `input_bound`."""
    from tfbench import data
    # The configuration, refused before three runs start: as given, --diagnose_input too (the
    # runs below are without it).
    plan = resolve(p, facts=actions.checked_facts(p))
    base = p.with_flags(diagnose_input=False)
    figures = {}
    for part, key, variant in (
            ("input_only", "input_only_images_per_sec", base.with_flags(data_only=True)),
            ("synthetic", "synthetic_images_per_sec", base.with_flags(use_synthetic_data=True))):
        log.diagnosis_started(part)
        figures[key] = runner.run(variant, log, RunResult(), clock=clock).images_per_sec
    log.diagnosis_started("real")
    runner.run(base, log, result, clock=clock)
    bound, _ = data.input_bound_verdict(figures["synthetic_images_per_sec"],
                                        result.images_per_sec,
                                        figures["input_only_images_per_sec"])
    result.extra.update(figures)
    result.extra["input_bound"] = bound
    result.extra["input_settings"] = data.input_settings_line(
        plan.input_threads, plan.input_threads_origin, p.devices.force_gpu_compatible)
    return result
