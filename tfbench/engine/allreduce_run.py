"""The all-reduce probe with sizes, in the spirit of NCCL's all_reduce_perf: the strategy a run
builds reduces the model's gradient set, then one tensor per size
(tfbench.distribute.allreduce_probe times each), with the links' expected bus bandwidth.

On GPUs the sizes go up to 1 GiB, where a link's bandwidth shows (at 64 MiB one all-reduce on 8
H100s takes about 0.35 ms, near the host's share of a call). A size is left out, with one notice,
where some GPU of the run lacks the room: each replica holds allreduce_probe.held_copies of the
tensor (4 for NCCL and the collectives: 4 GiB per replica at 1 GiB), against the GPU's memory
that TensorFlow's allocator does not yet hold (gpu_room). Every worker leaves out the same sizes
(allreduce_probe.agreed).

Two callers: `tfbench allreduce` builds the strategy and the model itself (allreduce_probe_run);
a training run with --validate_allreduce_json times it after its device checks on the run's own
strategy and model (after_run), which saves `tfbench validate` a second TensorFlow start, GPU
initialisation and NCCL set-up. Both write the same JSON (AllReduceProbe.to_json).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional

import tensorflow as tf

from tfbench import errors
from tfbench.config.settings import Settings
from tfbench.distribute import allreduce_probe, strategies
from tfbench.distribute.strategy import BuiltStrategy
from tfbench.engine import explain
from tfbench.engine.base import ModeRunner
from tfbench.engine.resolved import TRAINING, Facts
from tfbench.engine.runlog import RunLog, SilentLog
from tfbench.errors import raise_if_stopped
from tfbench.measure import memory as memory_lib
from tfbench.measure import nvml as nvml_lib
from tfbench.results import RunResult

KIB, MIB, GIB = 2 ** 10, 2 ** 20, 2 ** 30
# Of a GPU's memory, what TensorFlow's allocator never gets: its reserve for the system (1.5 GiB
# from compute capability 8, 1.8 GiB from 9: MinSystemMemory, gpu_device.cc) and the CUDA
# context (about 0.5 GiB).
NOT_TENSORFLOWS = 5 * 2 ** 29


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The tensor sizes (bytes, min_bytes x factor each up to max_bytes; none when max_bytes is
    0, the device's VALIDATE_SIZES when None) and the timed calls of each (repeats after
    warmup)."""
    min_bytes: int = 0
    max_bytes: Optional[int] = 0
    factor: int = 2
    repeats: int = allreduce_probe.REPEATS
    warmup: int = allreduce_probe.WARMUP


# --validate_allreduce_json's sizes (`tfbench allreduce`'s defaults): on GPUs up to 1 GiB, where
# busbw nears what the links carry (validate judges the largest busbw); small on CPU devices,
# whose all-reduce copies through host memory and has no link to judge.
VALIDATE_SIZES = {"gpu": Sizes(KIB, GIB, 4, allreduce_probe.REPEATS, allreduce_probe.WARMUP),
                  "cpu": Sizes(KIB, MIB, 4, 3, 1)}


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
                         "at_variables": t.at_variables, "per_sync": t.per_sync}
                        for t in self.timings]}


def gpu_room(device_names, cuda_indices, limit_mb: int = 0, memory_info=None, nvml=None,
             environ=None) -> tuple[Optional[int], str]:
    """(the fewest bytes TensorFlow can still allocate on any of the run's GPUs, which GPU:
    "GPU 3"), or (None, why that is not known). A GPU's memory for TensorFlow is
    --gpu_memory_limit_mb where given, else NVML's total less NOT_TENSORFLOWS; what its
    allocator holds is get_memory_info's "current". memory_info, nvml and environ stand in for
    tf.config.experimental.get_memory_info, pynvml and os.environ in tests."""
    if memory_info is None:
        memory_info = tf.config.experimental.get_memory_info
    held = []
    for name in device_names:
        try:
            held.append(int(memory_info(memory_lib.tf_device(name))["current"]))
        except (ValueError, RuntimeError, KeyError, tf.errors.OpError) as exc:
            return None, "TensorFlow's allocator of %s: %s" % (
                memory_lib.tf_device(name), str(exc).splitlines()[0] if str(exc) else
                type(exc).__name__)
    if limit_mb:
        limits = [limit_mb * MIB] * len(held)
    else:
        module, why = nvml_lib.open_nvml(nvml)
        if module is None:
            return None, why or "NVML unavailable"
        try:
            handles = nvml_lib.resolve_handles(module, list(cuda_indices), environ)
            limits = [int(module.nvmlDeviceGetMemoryInfo(h).total) - NOT_TENSORFLOWS
                      for _, h in handles]
        except Exception as exc:  # noqa: BLE001 - NVMLError, UnmappedGpu
            return None, nvml_lib.reason(exc)
        finally:
            nvml_lib.close_nvml(module)
    rooms = [limit - used for limit, used in zip(limits, held)]
    worst = min(range(len(rooms)), key=rooms.__getitem__)
    return rooms[worst], "GPU %d" % cuda_indices[worst]


def fitting_sets(strategy: tf.distribute.Strategy, sets: list,
                 room: tuple[Optional[int], str]) -> tuple[list, list[str]]:
    """(the tensor sets every rank has room for, notices: on those left out, or that this
    worker's room is not known). `room` is this worker's gpu_room; where it is not known
    nothing is left out on its account."""
    have, where = room
    copies = allreduce_probe.held_copies(strategy)
    fits = [have is None or copies * t.nbytes <= have for t in sets]
    everywhere = allreduce_probe.agreed(strategy, lambda _: fits)
    kept = [t for t, ok in zip(sets, everywhere) if ok]
    unknown = [] if have is not None else [
        "sizes: the GPUs' free memory is not known (%s): no size is left out for want of it"
        % where]
    if len(kept) == len(sets):
        return sets, unknown
    out = [t for t, ok in zip(sets, everywhere) if not ok]
    need = copies * out[0].nbytes
    if have is not None and need > have:
        why = "%s has %s free for TensorFlow" % (where, allreduce_probe.human_bytes(max(have, 0)))
    else:
        why = "another worker's GPU has less free"
    return kept, unknown + [
        "sizes: %s left out: each replica would hold %s (%d copies of the tensor) and %s"
        % (", ".join(t.label for t in out), allreduce_probe.human_bytes(need), copies, why)]


def _measure(runner: ModeRunner, sp: BuiltStrategy, variables: list, sizes: Sizes,
             notices: list[str]) -> AllReduceProbe:
    """The gradient set of `variables`, then each size, on the strategy of `sp`. A TensorFlow
    failure is TfbenchError's one line (with where NCCL's log is kept, when it is)."""
    strategy, plan = sp.strategy, runner.plan
    sets = [allreduce_probe.gradient_set("%s gradients" % plan.spec.name, variables)]
    sized: list = []
    if sizes.max_bytes and allreduce_probe.at_variables(strategy):
        notices.append("sizes: --variable_update=parameter_server sums gradients at the "
                       "variables' devices, not in an all-reduce: only the model's own are "
                       "probed")
    elif sizes.max_bytes:
        dtype = sets[0].dtypes[0] if sets[0].count else "float32"
        sized = allreduce_probe.size_sets(sizes.min_bytes, sizes.max_bytes, sizes.factor, dtype)
    compiled, _ = strategies.replica_step_compilation(strategy, xla=plan.xla)
    timings = []
    try:
        if sized and plan.device.kind == "gpu":
            room = gpu_room(plan.device.names, plan.device.gpu_indices
                            or range(plan.device.num_devices), runner.p.devices.gpu_memory_limit_mb)
            sized, left_out = fitting_sets(strategy, sized, room)
            notices += left_out
        for tensors in sets + sized:
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


def allreduce_probe_run(p: Settings, facts: Facts, sizes: Sizes = Sizes(),
                        log: RunLog = SilentLog()) -> AllReduceProbe:
    """`tfbench allreduce`: the strategy a run of the settings `p` builds reduces the model's
    gradients, then one tensor per size. `facts`: the run's, as actions.checked_facts reads
    them (with the probes' refusals)."""
    from tfbench.distribute import devices
    from tfbench.distribute import strategy as strategy_lib
    from tfbench.engine.resolved import resolve
    plan = resolve(p, facts=facts)
    if sizes.max_bytes is None:
        sizes = dataclasses.replace(sizes, max_bytes=VALIDATE_SIZES[plan.device.kind].max_bytes)
        if sizes.min_bytes > sizes.max_bytes:
            raise errors.UsageError("sizes: --min_bytes=%d is above the largest size on %s "
                                    "devices (%s): give --max_bytes too"
                                    % (sizes.min_bytes, plan.device.kind.upper(),
                                       allreduce_probe.human_bytes(sizes.max_bytes)))
    notices = list(plan.notices) + devices.prepare_runtime(p, plan.device)
    notices += explain.prepare(p.with_flags(explain_scaling=True), plan.facts)
    try:
        sp = strategy_lib.make_strategy(p, plan.device, plan.facts.model_xla)
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
        log.probe_started("Timing the all-reduce alone: %s's gradients, then sizes up to %s"
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
        runner.record_notice(res, "--validate_allreduce_json: %s; the run's own figures "
                                  "stand" % data["error"])
    with open(path, "w") as handle:
        json.dump(data, handle, indent=1)


def refuse_options(p: Settings, facts: Facts) -> None:
    """Refuses (UsageError), before anything runs, --validate_allreduce_json where the run has
    no all-reduce of its own to time or its file cannot be written."""
    path = p.measurement.validate_allreduce_json
    if not path:
        return
    if facts.mode != TRAINING:
        raise errors.UsageError("--validate_allreduce_json times the training run's all-reduce: "
                                "not in %s mode" % facts.mode.replace("_", "-"))
    if p.mode.diagnose_input:
        raise errors.UsageError("--validate_allreduce_json and --diagnose_input each run their "
                                "own probes after a run: give one of them")
    if facts.device.num_devices * facts.num_workers < 2:
        raise errors.UsageError("--validate_allreduce_json: one device has no all-reduce to time "
                                "(give --num_gpus=N, N > 1)")
    if facts.parameter_server:
        raise errors.UsageError("--validate_allreduce_json: with --ps_hosts the workers run the "
                                "steps, not the controller; time the all-reduce with `tfbench "
                                "allreduce`")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise errors.UsageError("--validate_allreduce_json=%s: the folder %s does not exist"
                                % (path, folder))
