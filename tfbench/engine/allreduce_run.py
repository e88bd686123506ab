"""The all-reduce probe with sizes, in the spirit of NCCL's all_reduce_perf: the strategy a run
builds reduces the model's gradient set, then one tensor per size
(tfbench.distribute.allreduce_probe times each), with the links' expected bus bandwidth.

Two callers: `tfbench allreduce` builds the strategy and the model itself (allreduce_probe_run);
a training run with --validate_allreduce_json times it after its device checks on the run's own
strategy and model (after_run), which saves `tfbench validate` a second TensorFlow start, GPU
initialisation and NCCL set-up. Both write the same JSON (AllReduceProbe.to_json).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

import tensorflow as tf

from tfbench import errors
from tfbench.distribute import allreduce_probe, strategies
from tfbench.distribute.strategy import BuiltStrategy
from tfbench.engine import explain
from tfbench.engine.base import ModeRunner
from tfbench.engine.runlog import RunLog, SilentLog
from tfbench.errors import raise_if_stopped
from tfbench.results import RunResult

KIB, MIB = 2 ** 10, 2 ** 20


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The tensor sizes (bytes, min_bytes x factor each up to max_bytes; none when max_bytes is
    0) and the timed calls of each (repeats after warmup)."""
    min_bytes: int = 0
    max_bytes: int = 0
    factor: int = 2
    repeats: int = allreduce_probe.REPEATS
    warmup: int = allreduce_probe.WARMUP


# --validate_allreduce_json's sizes: all_reduce_perf's range up to 64 MiB on GPUs (`tfbench
# allreduce`'s defaults); small on CPU devices, whose all-reduce copies through host memory and
# has no link to judge.
VALIDATE_SIZES = {"gpu": Sizes(KIB, 64 * MIB, 4, allreduce_probe.REPEATS, allreduce_probe.WARMUP),
                  "cpu": Sizes(KIB, MIB, 4, 10, 2)}


@dataclasses.dataclass
class AllReduceProbe:
    """What the probe measured: the model's gradient set, then each size."""
    ranks: int
    workers: int
    reduction: str                        # BuiltStrategy.reduction: what reduces the gradients
    notices: list[str]
    timings: list[allreduce_probe.Timing]
    link: str = ""
    expected_busbw_gbs: Optional[float] = None

    def to_json(self) -> dict[str, Any]:
        """`tfbench allreduce --json_file`'s and --validate_allreduce_json's content: the
        ranks, the reduction, the links and their expected busbw (GB/s, None: none expected;
        `link` ends with what decides it), one entry per tensor set."""
        return {
            "ranks": self.ranks, "workers": self.workers, "reduction": self.reduction,
            "link": self.link or "", "expected_busbw_gbs": self.expected_busbw_gbs,
            "notices": list(self.notices),
            "timings": [{"label": t.label, "count": t.count, "bytes": t.nbytes,
                         "dtype": t.dtype, "time_ms": t.time_ms, "algbw_gbs": t.algbw_gbs,
                         "busbw_gbs": t.busbw_gbs, "spread_pct": t.summary.get("spread_pct"),
                         "at_variables": t.at_variables} for t in self.timings]}


def _measure(runner: ModeRunner, sp: BuiltStrategy, variables: list, sizes: Sizes,
             notices: list[str]) -> AllReduceProbe:
    """The gradient set of `variables`, then each size, on the strategy of `sp`. A TensorFlow
    failure is TfbenchError's one line (with where NCCL's log is kept, when it is)."""
    strategy, plan = sp.strategy, runner.plan
    sets = [allreduce_probe.gradient_set("%s gradients" % plan.spec.name, variables)]
    if sizes.max_bytes and allreduce_probe.at_variables(strategy):
        notices.append("sizes: --variable_update=parameter_server sums gradients at the "
                       "variables' devices, not in an all-reduce: only the model's own are "
                       "probed")
    elif sizes.max_bytes:
        dtype = sets[0].dtypes[0] if sets[0].count else "float32"
        sets += allreduce_probe.size_sets(sizes.min_bytes, sizes.max_bytes, sizes.factor,
                                          dtype)
    compiled, _ = strategies.replica_step_compilation(strategy, xla=plan.xla)
    timings = []
    try:
        for tensors in sets:
            timings.append(allreduce_probe.time_all_reduce(
                strategy, tensors, sizes.repeats, sizes.warmup, compiled,
                runner.clock.perf_counter, variables))
            raise_if_stopped()
    except tf.errors.OpError as exc:
        lines = (exc.message or "").strip().splitlines() or [type(exc).__name__]
        kept = explain.keep_nccl_log(exc.message or "")
        explain.discard_nccl_log()
        raise errors.TfbenchError("TensorFlow's runtime failed in the all-reduce probe: %s%s"
                                  % (lines[0], "; " + kept if kept else "")) from None
    except BaseException:
        explain.discard_nccl_log()
        raise
    return AllReduceProbe(allreduce_probe.ranks(strategy), sp.num_workers, sp.reduction,
                          notices, timings)


def allreduce_probe_run(p, sizes: Sizes = Sizes(), log: RunLog = SilentLog()
                        ) -> AllReduceProbe:
    """`tfbench allreduce`: the strategy a run of Params `p` builds reduces the model's
    gradients, then one tensor per size."""
    from tfbench.distribute import devices
    from tfbench.distribute import strategy as strategy_lib
    from tfbench.engine.resolved import resolve
    plan = resolve(p)
    notices = list(plan.notices) + devices.prepare_runtime(p, plan.device)
    notices += explain.prepare(p.replace(explain_scaling=True), plan)
    try:
        sp = strategy_lib.make_strategy(p, plan.device)
    finally:
        errors.release_sigterm()
    notices += list(sp.notices)
    why = allreduce_probe.not_probed(sp.strategy)
    if why is not None:
        raise errors.UsageError("nothing to probe: %s" % why)
    runner = ModeRunner(p=p, plan=plan, strategy=sp.strategy, log=log)
    probe = _measure(runner, sp, runner.build_model().trainable_variables, sizes, notices)
    if plan.device.kind == "gpu":
        _, _, probe.link, expected = explain.gpu_links(plan, sp.num_workers)
        probe.expected_busbw_gbs = expected.gbs
    return probe


def after_run(runner: ModeRunner, sp: BuiltStrategy, res: RunResult, path: str,
              log: RunLog = SilentLog()) -> None:
    """--validate_allreduce_json: after the run's probes and device checks, the probe of
    VALIDATE_SIZES on the run's strategy and model, written to `path`. When it cannot run or
    fails, the file holds {"error": its one line, "timings": []} and a notice says so: the run's
    own figures stand."""
    plan = runner.plan
    why = allreduce_probe.not_probed(sp.strategy)
    data: dict[str, Any]
    if why is not None:
        data = {"error": "not probed: %s" % why, "timings": []}
    else:
        log.notice("Timing the all-reduce alone: %s's gradients, then sizes up to %s"
                   % (plan.spec.name, allreduce_probe.human_bytes(
                       VALIDATE_SIZES[plan.device.kind].max_bytes)))
        try:
            probe = _measure(runner, sp, runner.model.trainable_variables,
                             VALIDATE_SIZES[plan.device.kind], [])
        except (errors.TfbenchError, MemoryError) as exc:
            data = {"error": str(exc) or type(exc).__name__, "timings": []}
        else:
            if plan.device.kind == "gpu":
                if "expected_busbw_gbs" in res.extra:   # --explain_scaling read the links
                    probe.link = res.extra.get("link") or ""
                    probe.expected_busbw_gbs = res.extra["expected_busbw_gbs"]
                else:
                    _, _, probe.link, expected = explain.gpu_links(plan, sp.num_workers)
                    probe.expected_busbw_gbs = expected.gbs
            data = probe.to_json()
    if data.get("error"):
        res.notices.append("--validate_allreduce_json: %s; the run's own figures stand"
                           % data["error"])
    with open(path, "w") as handle:
        json.dump(data, handle, indent=1)
