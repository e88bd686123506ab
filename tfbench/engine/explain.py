"""--explain_scaling: after the timed steps of a run on several devices (or workers), the probes
that say where its scaling efficiency goes (tfbench.measure.scaling splits the step with them).

  all-reduce   the model's gradient set (every trainable variable's shape and dtype) reduced
               alone by the run's own strategy, reduction and packing
               (tfbench.distribute.allreduce_probe): time, algbw, busbw
  links        what NVML says of the run's GPUs' PCIe and NVLink links, read right after the
               all-reduce, and the bandwidth to expect of them (tfbench.measure.links); the
               transport NCCL chose, from its log (tfbench.measure.nccl_log); on several
               workers the slowest hop's, the NICs between hosts NCCL names
               (tfbench.measure.nics)
  devices      the one-device step (the model, optimizer and step a one-device run builds) on
               each of this worker's devices, first alone, one device after the other, then on
               all at once (one thread per device), which also shows a limit they share
  input        real data: the input alone, as the run's steps read it (every replica's
               pipeline through the same distributed iterator), a step's batch at a time

Each probe's time is the median of its repeats after untimed warm-up calls
(tfbench.measure.stats.probe_summary). The figures go to RunResult.extra under their CSV names
(tfbench/figures/table.py); the per-device and per-probe detail to the JSON manifest. Every
worker of a cluster runs the probes (the all-reduce is a collective); each reports its own
devices. A probe that fails (out of memory building a model per device, say) ends the probes
with a notice; the run's own figures stand.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import statistics
import tempfile
import threading
from typing import Callable, Optional

import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.distribute import allreduce_probe, strategies
from tfbench.distribute.strategy import BuiltStrategy
from tfbench.engine.base import ModeRunner
from tfbench.engine.resolved import FORWARD_ONLY, TRAINING, Facts, Resolved
from tfbench.engine.runlog import RunLog, SilentLog
from tfbench import errors
from tfbench.errors import raise_if_stopped
from tfbench.measure import links as links_lib
from tfbench.measure import nccl_log, nics, scaling, stats
from tfbench.results import RunResult

# Device steps: repeats after warm-up; input batches likewise.
DEVICE_REPEATS, DEVICE_WARMUP = 10, 2
INPUT_BATCHES, INPUT_WARMUP = 10, 2
MIB = 2 ** 20
NCCL_LOG_ENV = "TFBENCH_NCCL_LOG"   # where prepare() had NCCL write its log


def prepare(p: Settings, facts: Facts) -> list[str]:
    """Before the strategy exists: notices for a run the probes do not apply to, and on GPUs
    NCCL's log to a file of its own (NCCL reads NCCL_DEBUG when it starts, at the first
    all-reduce), unless NCCL_DEBUG is set already (then what it logs is where the user said).
    A user's NCCL_DEBUG_SUBSYS is kept.

    Where NCCL's version line goes under these settings (NCCL's src/init.cc showVersion and
    src/debug.cc): NCCL <= 2.21 prints it with printf and fflush(stdout), once per process,
    when rank 0 makes its first communicator, at the run's first all-reduce, so it lands among
    the step lines, above the footer, and logs a copy to the file; NCCL >= 2.22 logs it to
    the file only. INFO and WARN lines go to the file (opened unbuffered)."""
    if not (p.measurement.explain_scaling or p.measurement.validate_allreduce_json):
        return []
    if p.measurement.explain_scaling and facts.mode not in (TRAINING, FORWARD_ONLY):
        return ["--explain_scaling applies to training and forward-only runs; not in %s mode"
                % facts.mode]
    notices = []
    if facts.device.kind == "gpu" and "NCCL_DEBUG" not in os.environ:
        path = os.path.join(tempfile.gettempdir(), "tfbench-nccl-%d.log" % os.getpid())
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_FILE=path)
        subsys = os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
        os.environ[NCCL_LOG_ENV] = path
        if not nccl_log.subsys_logs_init(subsys):
            notices.append("%s: your NCCL_DEBUG_SUBSYS=%s leaves out INIT, where NCCL "
                           "names the transport it uses: the transport is not read" % (
                               "--explain_scaling" if p.measurement.explain_scaling
                               else "--validate_allreduce_json", subsys))
    return notices


def _nccl_log() -> Optional[nccl_log.Transport]:
    """What NCCL said it used, from the log prepare() asked for (None when none was written)."""
    path = os.environ.get(NCCL_LOG_ENV)
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, errors="replace") as handle:
            text = handle.read()
    finally:
        discard_nccl_log()
    return nccl_log.parse(text)


def discard_nccl_log() -> None:
    """Removes the log prepare() asked NCCL for, read or not (a run leaves no file behind),
    unless keep_nccl_log handed it to the user."""
    path = os.environ.get(NCCL_LOG_ENV)
    if path and os.path.exists(path):
        os.remove(path)


def keep_nccl_log(failure: str) -> str:
    """After a failure: where NCCL's log is kept, as a clause for the failure's one line ('' when
    none is kept). It is kept when it holds a NCCL WARN line or the failure names NCCL
    (TensorFlow's NCCL errors say "run with NCCL_DEBUG=INFO for details", which prepare() did:
    the details are in that file); otherwise it is removed."""
    path = os.environ.get(NCCL_LOG_ENV)
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as handle:
        warnings = nccl_log.warnings(handle.read())
    if not warnings and "NCCL" not in failure:
        discard_nccl_log()
        return ""
    del os.environ[NCCL_LOG_ENV]   # the user's now: nothing removes it
    return "NCCL's log%s is kept in %s" % (
        " (%d warning%s)" % (len(warnings), "" if len(warnings) == 1 else "s")
        if warnings else "", path)


def applies(p: Settings, plan: Resolved, sp: BuiltStrategy) -> bool:
    return bool(p.measurement.explain_scaling) and plan.mode in (TRAINING, FORWARD_ONLY) and \
        sp.strategy is not None and not plan.parameter_server


def probe(runner: ModeRunner, sp: BuiltStrategy, res: RunResult,
          log: RunLog = SilentLog(), shared: Optional["DeviceSteps"] = None) -> None:
    """Runs every probe after the run's timed steps; their figures go into res.extra (each
    device's one-device step is `shared`'s when given, which --validate_devices shares)."""
    plan = runner.plan
    if plan.total_devices < 2:
        runner.record_notice(res, "--explain_scaling: one device, no scaling to explain")
        return
    log.probe_started("Probing where the scaling goes: the exchange of %s's gradients, each "
                      "device's step alone and all together%s" % (
                          plan.spec.name, ", the input pipeline alone" if plan.real_data else ""))
    found: dict = {}
    res.extra["scaling_probes"] = found
    try:
        if plan.mode == TRAINING:
            _allreduce(runner, found, res)
        _links(plan, found, res, sp.num_workers)
        raise_if_stopped()
        if plan.real_data:
            _input(runner, found, res)
        _devices(runner, found, res, shared or DeviceSteps(runner))
    except (tf.errors.OpError, MemoryError) as exc:
        message = exc.message if isinstance(exc, tf.errors.OpError) else str(exc)
        if errors.out_of_memory_evidence(message or "", type(exc).__name__) is not None:
            why = "out of memory (each device holds one more model for its one-device step)"
        else:
            why = "TensorFlow failed: %s" % ((message or "").strip().splitlines()
                                             or [type(exc).__name__])[0]
        kept = keep_nccl_log(message or "")
        runner.record_notice(res, "--explain_scaling: the probes stopped, %s; %sthe run's own "
                                  "figures stand" % (why, kept + "; " if kept else ""))
        return
    explained = explain_run(res)
    if explained is not None:
        res.extra["scaling_explained"] = explained


def explain_run(res: RunResult) -> Optional[dict]:
    """The run's step split against its own one-device probe (tfbench.measure.scaling), with
    the verdict, as the console shows it; None without the figures it needs."""
    extra = res.extra
    if not res.images_per_sec or extra.get("one_device_step_ms") is None:
        return None
    d = scaling.decompose(scaling.step_ms(res.global_batch_size, res.images_per_sec),
                          extra["one_device_step_ms"],
                          extra.get("slowest_device_step_ms"), extra.get("allreduce_ms"),
                          extra.get("input_step_ms"))
    return {"step_ms": d.step_ms, "reference_ms": d.reference_ms,
            "reference": "one device alone (probe)", "efficiency_pct": d.efficiency_pct,
            "lost_ms": d.lost_ms, "lost_pts": d.lost_pts, "largest": d.largest,
            "overlap_ms": d.overlap_ms,
            "verdict": scaling.verdict(d, scaling.evidence(
                {**extra, "num_workers": res.num_workers}, res.device_kind,
                res.global_batch_size))}


def _allreduce(runner: ModeRunner, found: dict, res: RunResult) -> None:
    strategy, plan = runner.strategy, runner.plan
    why = allreduce_probe.not_probed(strategy)
    if why is not None:
        found["allreduce"] = {"not_probed": why}
        return
    tensors = allreduce_probe.gradient_set("%s gradients" % plan.spec.name,
                                           runner.model.trainable_variables)
    # XLA compiles each replica's all-reduce where it compiles the run's replica steps.
    compiled, _ = strategies.replica_step_compilation(strategy, xla=plan.xla)
    timing = allreduce_probe.time_all_reduce(strategy, tensors, compiled=compiled,
                                             variables=runner.model.trainable_variables)
    found["allreduce"] = {**dataclasses.asdict(timing), "algbw_gbs": timing.algbw_gbs,
                          "busbw_gbs": timing.busbw_gbs}
    res.extra.update(allreduce_ms=timing.time_ms, allreduce_mib=timing.nbytes / MIB,
                     allreduce_algbw_gbs=timing.algbw_gbs,
                     allreduce_busbw_gbs=timing.busbw_gbs)


def _links(plan: Resolved, found: dict, res: RunResult, workers: int = 1) -> None:
    if plan.device.kind != "gpu":
        res.extra["link"] = "logical CPU devices (host memory)" \
            if plan.device.num_devices > 1 else "one CPU device per worker"
        return
    links, why, res.extra["link"], expected = gpu_links(plan, workers)
    found["links"] = links.to_json() if links is not None else {"not_read": why}
    res.extra["expected_busbw_gbs"] = expected.gbs
    if links is not None:
        found["degraded"] = links.degraded()


def gpu_links(plan: Resolved, workers: int = 1
               ) -> tuple[Optional[links_lib.Links], str, str, links_lib.Expectation]:
    """(the run's GPUs' links as NVML reads them, or None; why not; the link line: NVML's
    description, or why it has none, the transport NCCL logged and what decides the busbw to
    expect; that expectation: over several workers the slowest hop's, tfbench.measure.nics)."""
    links, why = links_lib.gpu_links(plan.device.gpu_indices or range(plan.device.num_devices))
    transport = _nccl_log()   # read and removed before anything else can fail
    text = links.describe() if links is not None else "NVML: %s" % why
    if links is not None:
        # The run's NCCL rates the link between the CPU sockets (tfbench.measure.sockets).
        local = links.expectation(transport.version if transport is not None else None)
    elif plan.device.num_devices > 1 and workers > 1:
        local = links_lib.Expectation.none("the links within a host are unknown (NVML: %s)"
                                           % why)
    else:
        local = links_lib.Expectation(None)
    expected = nics.slowest_hop(local, workers, transport)
    said = nccl_log.describe(transport) if transport is not None else None
    return links, why, "; ".join(x for x in (text, said, expected.basis) if x), expected


def _input(runner: ModeRunner, found: dict, res: RunResult) -> None:
    """The input as the run's steps read it (every replica's pipeline, through the same
    distributed iterator, onto the devices), without the model."""
    from tfbench.data import diagnose
    plan = runner.plan
    iterator, _ = runner.inputs(plan.train_batch_size * plan.accum_steps, train=True)
    for _ in range(INPUT_WARMUP):
        next(iterator)
    times = list(diagnose.arrival_intervals(iterator, INPUT_BATCHES, runner.clock.perf_counter))
    # The pipeline's rate is its mean time per batch (a slow batch now and then counts).
    found["input"] = {"batch": plan.worker_batch, "times": times}
    res.extra["input_step_ms"] = 1000.0 * statistics.fmean(times)


def device_label(plan: Resolved, index: int) -> str:
    """'GPU 5' (the CUDA index --gpu_indices names) or the CPU device's name."""
    if plan.device.kind == "gpu" and plan.device.gpu_indices:
        return "GPU %d" % plan.device.gpu_indices[index]
    return plan.device.names[index]


def one_device_runner(runner: ModeRunner, device: str, index: int = 0) -> ModeRunner:
    """The runner of a one-device run of the same model, step and batch on `device`, the
    run's device number `index` (whose CUDA index its DeviceSet keeps, for whatever reads it)."""
    whole = runner.plan
    one = dataclasses.replace(whole.device, num_devices=1, names=(device,),
                              gpu_indices=whole.device.gpu_indices[index:index + 1])
    plan = whole.with_facts(device=one, real_data=False, train_and_eval=False)
    p = runner.p.with_flags(train_dir=None)
    return type(runner)(p=p, plan=plan, strategy=tf.distribute.OneDeviceStrategy(device),
                        clock=runner.clock)


class DeviceSteps:
    """The one-device step (one_device_runner's model, optimizer and step) on each of this
    worker's devices, each built when a probe first asks for it and then kept, so that the
    probes that time it (these, and --validate_devices') share one copy per device."""

    def __init__(self, runner: ModeRunner):
        self.runner = runner
        self._built: dict[int, tuple[ModeRunner, object]] = {}

    @functools.cached_property
    def devices(self) -> list[str]:
        return list(self.runner.strategy.extended.worker_devices)

    @functools.cached_property
    def labels(self) -> list[str]:
        return [device_label(self.runner.plan, i) for i in range(len(self.devices))]

    def setup(self, index: int) -> tuple[ModeRunner, object]:
        """(the one-device runner of device `index`, its train.Setup)."""
        if index not in self._built:
            one = one_device_runner(self.runner, self.devices[index], index)
            self._built[index] = one, one.setup(RunResult())
        return self._built[index]

    def call(self, index: int) -> Callable[[], object]:
        """One step on device `index`, its result fetched to the host."""
        s = self.setup(index)[1]
        return lambda: s.step_fn(s.inputs).numpy()


def time_alone(call: Callable[[], object], now: Callable[[], float]) -> list[float]:
    """A device's step timed alone: DEVICE_REPEATS calls after DEVICE_WARMUP."""
    return stats.timed_calls(call, DEVICE_REPEATS, DEVICE_WARMUP, now)


def _devices(runner: ModeRunner, found: dict, res: RunResult, shared: DeviceSteps) -> None:
    calls = [shared.call(i) for i in range(len(shared.devices))]
    now = runner.clock.perf_counter
    alone = [time_alone(call, now) for call in calls]
    raise_if_stopped()
    together = _together(calls, DEVICE_REPEATS, now)
    rows = []
    for i, (a, t) in enumerate(zip(alone, together)):
        rows.append({"device": shared.labels[i], "alone": stats.probe_summary(a),
                     "together": stats.probe_summary(t)})
    found["devices"] = rows
    alone_ms = [row["alone"]["median_ms"] for row in rows]
    together_ms = [row["together"]["median_ms"] for row in rows]
    slowest = max(range(len(rows)), key=lambda i: together_ms[i])
    res.extra.update(
        one_device_step_ms=min(alone_ms), slowest_device_step_ms=together_ms[slowest],
        slowest_device=rows[slowest]["device"],
        slowest_device_ratio=together_ms[slowest] / statistics.median(together_ms))


def _together(calls: list[Callable[[], object]], repeats: int,
              now: Callable[[], float]) -> list[list[float]]:
    """Every call timed `repeats` times, all devices at once: one thread each, started
    together (TensorFlow runs each call without holding Python's lock)."""
    results: list[list[float]] = [[] for _ in calls]
    failures: list[BaseException] = []
    start = threading.Barrier(len(calls))

    def work(i: int) -> None:
        try:
            calls[i]()            # one untimed call, then all start at once
            start.wait()
            results[i] = stats.timed_calls(calls[i], repeats, 0, now)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(exc)
            start.abort()
    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    real = [e for e in failures if not isinstance(e, threading.BrokenBarrierError)]
    if failures:
        raise (real or failures)[0]
    return results
