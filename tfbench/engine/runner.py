"""Runs one benchmark: the start every mode shares, then the runner of the mode.

run(p, log, result) reads what will run (tfbench.engine.resolved.read_facts, with the probes'
refusals: actions.checked_facts), applies the runtime settings and seeds, captures the
environment, creates the strategy, resolves the arithmetic over the replicas it runs (resolve),
reports the header, starts the Meter and hands over to the mode's runner (RUNNERS: train.py,
checkpoint_eval.py, data_only.py, all over base.py), turning the failures a user can cause into
tfbench's errors; the measurements are finished (tfbench.engine.meter) on success and on failure
alike. A ps or worker task of a parameter-server cluster serves instead of running a mode.
--diagnose_input runs this three times (tfbench.engine.diagnose).

The engine knows nothing about output formats: it reports what happens through a RunLog
(tfbench.engine.runlog), which the CLI implements with the classic log, and fills a RunResult.
"""

from __future__ import annotations

import sys
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from tfbench.config import data_source
from tfbench.config.settings import Settings
from tfbench.distribute import devices
from tfbench.distribute import strategy as strategy_lib, sync
from tfbench.engine import actions, explain, meter as meter_lib
from tfbench.engine.base import Clock, ModeRunner
from tfbench.engine.data_only import DataOnlyRunner
from tfbench.engine.checkpoint_eval import CheckpointEvalRunner
from tfbench.engine.meter import Meter
from tfbench.engine.resolved import (DATA_ONLY, EVAL, FORWARD_ONLY, TRAINING, Facts, Resolved,
                                     resolve)
from tfbench.engine.runlog import Header, RunLog, SilentLog, record_notice
from tfbench.engine.train import TrainRunner
from tfbench import errors
from tfbench.errors import OutOfMemory, TfbenchError, out_of_memory_evidence
from tfbench.measure import cpu_units, environment
from tfbench.results import RunResult

RUNNERS: dict[str, type[ModeRunner]] = {TRAINING: TrainRunner, FORWARD_ONLY: TrainRunner,
                                        EVAL: CheckpointEvalRunner, DATA_ONLY: DataOnlyRunner}


def run(p: Settings, log: RunLog = SilentLog(), result: Optional[RunResult] = None, *,
        clock: Clock = Clock()) -> RunResult:
    """Runs the benchmark, filling `result` as it goes (partial results survive errors)."""
    facts = actions.checked_facts(p)   # the probes refuse what they cannot apply
    res = result or RunResult()
    describe(p, facts, res)
    plan = _plan_before_strategy(p, facts, res)
    runtime_notices = devices.prepare_runtime(p, facts.device, facts.mode != FORWARD_ONLY,
                                              p.devices.gpu_memory_limit_mb or None)
    # Keras 3 initializers without a seed draw from Python's `random`, which
    # tf.random.set_seed leaves alone: seeding all of them makes the weights repeatable.
    # Keras takes only numpy's seed range; TensorFlow keeps the full int64 seed, as before.
    keras.utils.set_random_seed(p.workload.tf_random_seed % 2**32)
    tf.random.set_seed(p.workload.tf_random_seed)
    np.random.seed(4321)
    env_before = _capture_environment(res, log)
    record_notice(log, res, *facts.notices, *(plan.replica_notices if plan else ()),
                  *runtime_notices, *explain.prepare(p, facts))
    try:
        sp = strategy_lib.make_strategy(p, facts.device, facts.model_xla)
    finally:
        # A SIGTERM held while a cluster formed reaches the CLI's handler now (errors).
        errors.release_sigterm()
    record_notice(log, res, *sp.notices)
    if plan is None:   # a parameter-server run: its strategy has counted the replicas now
        plan = _resolve(p, facts, res, **_replicas_counted(sp))
        record_notice(log, res, *plan.replica_notices)
    res.variable_update = sp.variables_label
    res.num_workers, res.extra["reduction"] = sp.num_workers, sp.reduction
    res.chief = sync.is_chief(sp.strategy)
    log.header(header(p, plan, sp))
    log.cluster_lines(sp.start_lines)
    if sp.serve is not None:   # a ps or worker task of a parameter-server cluster
        sp.serve()
        res.server_task = sp.cluster.label
        return res
    meter = Meter.start(plan, p.measurement.monitor_interval_ms / 1000.0)
    runner = RUNNERS[plan.mode](p=p, plan=plan, strategy=sp.strategy, log=log, meter=meter,
                                clock=clock)
    try:
        runner.run(res)
    except (tf.errors.OpError, StopIteration, MemoryError) as exc:
        failure = _failure(exc, p, plan, sp, res)
        if failure is None:
            raise
        kept = explain.keep_nccl_log(exc.message if isinstance(exc, tf.errors.OpError)
                                     else str(exc))
        if kept:
            failure.args = ("%s; %s" % (failure, kept),)
        raise failure from None
    finally:
        # On a failure the FLOP count (a second trace of the model) is skipped.
        try:
            meter_lib.finish(res, p, plan, meter, runner.model, env_before, log,
                             failed=sys.exc_info()[0] is not None)
            if sys.exc_info()[0] is not None:
                explain.discard_nccl_log()
        finally:
            runner.close()
    actions.run_all(p, plan, sp, runner, res, log)   # the probes, after the run's figures
    return res


def describe(p: Settings, facts: Facts, res: RunResult) -> None:
    """What will run, as the facts say, in RunResult's fields (and a few of `extra`'s): a run
    whose strategy fails (a cluster that does not form) keeps them in its row. What the
    replicas decide is describe_steps'."""
    res.model = facts.spec.name
    res.dataset = facts.spec.dataset
    res.mode = facts.mode
    res.train_and_eval = facts.train_and_eval
    res.precision = facts.precision
    res.xla = facts.xla
    res.batch_size = facts.run_batch_size
    res.data_format = facts.device.data_format
    res.image_size = facts.image_size
    res.num_warmup_batches = facts.num_warmup
    res.accum_steps = facts.accum_steps
    res.data_source = data_source.data_source_label(p.data)
    res.tf_version = tf.__version__
    res.keras_version = keras.__version__
    # The devices that run the steps, named once: none on a parameter-server controller, whose
    # own devices are not the workers' (no peak, MFU or published range is judged from them).
    res.extra["device_name"] = "" if facts.parameter_server else devices.device_name(facts.device)
    res.extra["devices"] = list(facts.device.names)
    res.extra["tf_git_hash"] = tf.version.GIT_VERSION


def _plan_before_strategy(p: Settings, facts: Facts, res: RunResult) -> Optional[Resolved]:
    """The arithmetic over the replicas is done once they are counted: this process's
    devices, known before the strategy exists (so its refusals come before anything is
    printed); None on a parameter-server run, whose workers' replicas only its strategy
    counts (run resolves it then)."""
    return None if facts.parameter_server else _resolve(p, facts, res)


def _resolve(p: Settings, facts: Facts, res: RunResult, **replicas) -> Resolved:
    """The run's arithmetic over its replicas (resolve), described (describe_steps)."""
    plan = resolve(p, facts=facts, **replicas)
    describe_steps(plan, res)
    return plan


def describe_steps(plan: Resolved, res: RunResult) -> None:
    """What the replicas that run the steps decide (Resolved's arithmetic), in RunResult: on
    a parameter-server controller the workers' devices, as TensorFlow counted them."""
    res.global_batch_size = plan.global_batch
    res.num_devices = plan.replicas_per_worker
    res.device_kind = plan.replica_kind
    res.num_batches = plan.num_batches
    res.step_line_batch = plan.step_line_batch
    res.extra["num_epochs"] = plan.num_epochs


def header(p: Settings, plan: Resolved, sp: strategy_lib.BuiltStrategy) -> Header:
    """The header's figures: what will run, as the strategy runs it."""
    return Header(
        tf_version=tf.__version__, model=plan.spec.header_name,
        dataset=data_source.describe(p.data, plan.spec.dataset), mode=plan.mode,
        train_and_eval=plan.train_and_eval, batch_size=plan.run_batch_size,
        global_batch_size=plan.global_batch, num_batches=plan.num_batches,
        num_epochs=plan.num_epochs, devices=tuple(plan.device.names),
        data_format=plan.device.data_format, optimizer=p.learning.optimizer,
        variable_update=sp.variables_label, all_reduce_spec=sp.all_reduce_label,
        show_all_reduce=sp.show_all_reduce, job_name=sp.job_name,
        horovod_device=sp.horovod_device)


def _capture_environment(res: RunResult, log: RunLog) -> dict:
    env = environment.capture(res.command.split() if res.command else None)
    res.environment = {"before": env}
    log.environment(env)
    warning = environment.vm_warning(env, using_real_data=res.data_source != "synthetic")
    if warning:
        record_notice(log, res, warning)
    return env


def _replicas_counted(sp: strategy_lib.BuiltStrategy) -> dict:
    """resolve's replicas_per_worker and replica_kind on a parameter-server run, whose
    workers run the steps, one replica per worker GPU (TensorFlow counts them from the
    workers' devices, parameter_server_strategy_v2); none on its ps and worker tasks, which
    serve (resolve counts this process's devices)."""
    if sp.strategy is None:
        return {}
    strategy = sp.strategy
    return {"replicas_per_worker": strategy.num_replicas_in_sync,
            "replica_kind": "gpu" if getattr(strategy.extended, "_num_gpus_per_worker", 0)
            else "cpu"}


def _failure(exc: BaseException, p: Settings, plan: Resolved, sp: strategy_lib.BuiltStrategy,
             res: RunResult) -> Optional[TfbenchError]:
    """The error a user can act on for a failed step or input, or None (re-raised as is)."""
    from tfbench import data
    evidence = _oom_evidence(exc)
    if evidence is not None:
        # A parameter-server controller cannot read its workers' CPUs: no bf16 advice there.
        flags = None if plan.parameter_server else cpu_units.cpu_flags()
        return OutOfMemory("Out of memory running %s at batch size %d per device in %s: %s [%s]"
                           % (plan.spec.name, plan.run_batch_size, plan.precision,
                              errors.oom_remedies(res.device_kind, plan.precision,
                                                  cpu_units.bf16_units(flags), plan.mode),
                              evidence))
    if plan.real_data and data.is_data_error(exc):
        return data.data_error(exc, p, plan.mode == TRAINING)
    failure = strategy_lib.distributed_failure(exc, sp)
    if failure is None and isinstance(exc, tf.errors.OpError):
        failure = _runtime_failure(exc, p, plan, res)
    return failure


def _runtime_failure(exc: "tf.errors.OpError", p: Settings, plan: Resolved,
                     res: RunResult) -> TfbenchError:
    """TensorFlow's runtime refused a step for a reason tfbench has no better words for (a cuDNN
    or driver failure, say): its own first line is what a user can search for and act on; the
    whole message goes to the JSON manifest."""
    lines = [line.strip() for line in (exc.message or "").strip().splitlines() if line.strip()]
    res.extra["exception"] = "%s: %s" % (type(exc).__name__, exc.message)
    return TfbenchError(
        "TensorFlow's runtime failed running %s on %s (%s, batch size %d per device): %s%s" % (
            plan.spec.name, plan.device.kind.upper(), plan.precision, plan.run_batch_size,
            lines[0] if lines else type(exc).__name__,
            " (TensorFlow's whole message is in the JSON manifest)" if p.outputs.json_dir else ""))


def _oom_evidence(exc: BaseException) -> Optional[str]:
    """'Class: line' showing that `exc` is a failed allocation, else None (errors.py lists the
    texts: near the limit cuDNN and cuBLAS fail with classes other than ResourceExhaustedError)."""
    name = type(exc).__name__
    message = exc.message if isinstance(exc, tf.errors.OpError) else str(exc)
    evidence = out_of_memory_evidence(message or "", name)
    if evidence is None or evidence == name:
        return evidence
    return "%s: %s" % (name, evidence)
