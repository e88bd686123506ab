"""--validate_devices: after the timed steps of a training run, each of this worker's devices
checked alone, for `tfbench validate` (docs/validate.md, "Each GPU alone: the device checks").
--validate_device_checks chooses which of these run (all three by default):

  step     the run's training step on each device alone, one device after the other: the
           one-device step --explain_scaling times (explain.DeviceSteps, shared with it; with
           --explain_scaling its figures, all-at-once included, are taken as it measured them)
  kernels  the matmul and 3x3 convolution training step of `tfbench peak`
           (tfbench.measure.peak) on each device in the run's precision: TFLOP/s of the median
           of KERNEL_REPEATS calls after KERNEL_WARMUP
  numeric  one forward and backward pass without an update on every device, from the weights
           (and optimizer state) of the first device, on one fixed batch and labels (seeded by
           --tf_random_seed), with TensorFlow's op determinism on: a digest of the loss and every
           gradient, and each device's largest difference from the first device's
           (tfbench.measure.agreement). It runs last: op determinism changes which kernels
           TensorFlow picks, and is turned off again after it.

Each device's entry goes to RunResult.extra["device_checks"] (in the order of the run's
devices), the numeric check's settings to extra["device_checks_numeric"], the summary figures
to extra under their CSV names (tfbench/figures/table.py). A check that fails on a device (a
TensorFlow error, out of memory) is recorded in that device's entry, with its first line, and
the other devices are still checked; the run's own figures stand.
"""

from __future__ import annotations

import contextlib
import statistics
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf

from tfbench import errors
from tfbench.config.flagdefs import DEVICE_CHECKS
from tfbench.config.settings import Settings
from tfbench.engine import explain, optimizers, steps
from tfbench.engine.base import ModeRunner
from tfbench.engine.resolved import DATA_ONLY, EVAL, FORWARD_ONLY, TRAINING, Facts
from tfbench.engine.runlog import RunLog, SilentLog
from tfbench.errors import raise_if_stopped
from tfbench.measure import agreement, peak, stats
from tfbench.results import RunResult

KERNEL_REPEATS, KERNEL_WARMUP = 10, 2
# The kernels' sizes on CPU devices, small: logical CPU devices share the host's cores. GPUs
# run tfbench peak's (peak.PROBE_SIZES).
CPU_PROBE_SIZES = (256, 4)
# What each check's entry holds, None until measured.
ENTRY_KEYS = ("alone_ms", "together_ms", "matmul_tflops", "conv_tflops", "digest", "loss",
              "bit_exact", "max_rel_diff", "within_bound", "agrees")


def check(runner: ModeRunner, res: RunResult, shared: explain.DeviceSteps,
          log: RunLog = SilentLog()) -> None:
    """Runs the device checks after the run's timed steps (and --explain_scaling's probes)."""
    plan = runner.plan
    entries = [dict({"device": label}, **dict.fromkeys(ENTRY_KEYS), errors={})
               for label in shared.labels]
    chosen = [c for c in DEVICE_CHECKS if c in runner.p.measurement.validate_device_checks]
    res.extra["device_checks"] = entries
    res.extra["device_checks_run"] = chosen
    what = {"step": "the training step of %s" % plan.spec.name,
            "kernels": "a matmul and a 3x3 convolution in %s" % plan.precision,
            "numeric": "one forward and backward pass on the same batch from the same weights "
                       "(op determinism on)"}
    log.probe_started("Checking each device alone: %s" % _and([what[c] for c in chosen]))
    work = {"step": lambda: _steps(runner, shared, entries, res),
            "kernels": lambda: _kernels(runner, shared, entries),
            "numeric": lambda: _numeric(runner, shared, entries, res)}
    try:
        for name in chosen:
            work[name]()
            raise_if_stopped()
    except (tf.errors.OpError, MemoryError) as exc:   # outside any one device's check
        runner.record_notice(res, "--validate_devices: the checks stopped, %s; the run's own "
                                  "figures stand" % _reason(exc))
    summarise(entries, res)


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _reason(exc: BaseException) -> str:
    """A failure in one line: 'out of memory', or its type and first line."""
    message = (exc.message if isinstance(exc, tf.errors.OpError) else str(exc)) or ""
    if errors.out_of_memory_evidence(message, type(exc).__name__) is not None:
        return "out of memory"
    return "%s: %s" % (type(exc).__name__, (message.strip().splitlines() or ["(no message)"])[0])


def _failed(entry: dict, check_name: str, exc: BaseException) -> None:
    """Records a check that failed on the entry's device."""
    entry["errors"][check_name] = _reason(exc)


def _each(entries: list[dict], check_name: str, work: Callable[[int], None]) -> None:
    """work(i) for every device; a failure is recorded in its entry and the next device runs."""
    for i, entry in enumerate(entries):
        try:
            work(i)
        except (tf.errors.OpError, MemoryError) as exc:
            _failed(entry, check_name, exc)
        raise_if_stopped()


def _steps(runner: ModeRunner, shared: explain.DeviceSteps, entries: list[dict],
           res: RunResult) -> None:
    """Each device's step alone: --explain_scaling's figures when it measured them."""
    measured = {row["device"]: row for row in
                (res.extra.get("scaling_probes") or {}).get("devices") or []}
    now = runner.clock.perf_counter

    def step(i: int) -> None:
        row = measured.get(entries[i]["device"])
        if row is not None:
            entries[i]["alone_ms"] = row["alone"]["median_ms"]
            entries[i]["together_ms"] = row["together"]["median_ms"]
            return
        times = explain.time_alone(shared.call(i), now)
        entries[i]["alone_ms"] = stats.probe_summary(times)["median_ms"]
    _each(entries, "step", step)


def kernel_sizes(device_kind: str) -> tuple[int, int]:
    """(N of the NxN matmul, image size of the convolution) on this kind of device."""
    return peak.PROBE_SIZES["gpu"] if device_kind == "gpu" else CPU_PROBE_SIZES


def _kernels(runner: ModeRunner, shared: explain.DeviceSteps, entries: list[dict]) -> None:
    plan, now = runner.plan, runner.clock.perf_counter
    matmul_n, conv_size = kernel_sizes(plan.device.kind)

    def tflops(call: Callable[[], object], flops: float) -> float:
        times = stats.timed_calls(call, KERNEL_REPEATS, KERNEL_WARMUP, now)
        return flops / statistics.median(times) / 1e12

    def kernels(i: int) -> None:
        device = shared.devices[i]
        entries[i]["matmul_tflops"] = tflops(*peak.matmul_probe(device, plan.precision,
                                                                 matmul_n))
        entries[i]["conv_tflops"] = tflops(*peak.conv_probe(device, plan.precision, conv_size))
    _each(entries, "kernels", kernels)


# --- the numeric check ----------------------------------------------------------------------

def numeric_batch(batch_size: int, eval_batch_size: int) -> int:
    """The numeric check's batch per device: half the run's, moved off every batch the run's
    steps and the kernel probes ran on these devices. TensorFlow keys the convolution
    algorithms it autotuned by shapes, dtype and device, not by op determinism
    (core/util/autotune_maps/conv_parameters.cc), and looks there first
    (core/kernels/conv_ops_gpu.cc, AutotuneUnfusedConv); XLA's autotuning is cached by
    instruction and device model likewise. On a shape the run used, the check would reuse the
    fastest algorithm found without determinism, which may not be deterministic."""
    used = {batch_size, eval_batch_size, peak.CONV_BATCH}
    batch = max(1, batch_size // 2)
    while batch in used:
        batch += 1
    return batch


def fixed_batch(seed: int, batch: int, image_size: int,
                num_label_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """The numeric check's images (float32 in [0, 255), as the synthetic ones) and labels, the
    same bytes on every device and in every process given the same seed."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0.0, 255.0, (batch, image_size, image_size, 3)).astype(np.float32)
    labels = rng.integers(0, num_label_classes, batch).astype(np.int32)
    return images, labels


@contextlib.contextmanager
def op_determinism() -> Iterator[None]:
    """TensorFlow's op determinism on inside the block, and off again after it unless it was on
    before (TF_DETERMINISTIC_OPS=1, or the user's call). The switch is read on every use
    (tsl/util/determinism.cc, DeterminismState::Required); turning it off is only in
    tensorflow.python.framework.config (disable_op_determinism, in 2.17.1 and 2.21.0 alike),
    not in tf.config."""
    from tensorflow.python.framework import config as tf_config
    was_on = tf_config.is_op_determinism_enabled()
    tf.config.experimental.enable_op_determinism()
    try:
        yield
    finally:
        if not was_on:
            tf_config.disable_op_determinism()


def _state(setup: Any) -> list[tf.Variable]:
    """Everything a pass reads or moves: the model's variables (batch-norm statistics and
    seed generators included) and the optimizer's (a dynamic loss scale)."""
    return list(setup.model.variables) + list(setup.optimizer.variables)


def pass_function(one: ModeRunner, setup: Any) -> Callable:
    """The numeric check's compiled pass (images, labels) -> (total loss, gradients) of the
    one-device runner `one` and its train.Setup: its step's forward and backward pass, without
    the update, compiled with XLA where the run's step is. Traced under op determinism, it holds
    the ops that TensorFlow picks then (the sparse cross-entropy as log-softmax and gather:
    nn_ops.py's branch on is_op_determinism_enabled)."""
    builder = steps.Steps(setup.model, setup.optimizer, one.strategy, one.step_config(TRAINING))
    return tf.function(
        lambda x, y: one.strategy.run(builder.loss_and_gradients, args=(x, y)),
        jit_compile=one.plan.xla, autograph=False)


def _pass(shared: explain.DeviceSteps, index: int, images: np.ndarray,
          labels: np.ndarray) -> list[np.ndarray]:
    """[loss] + every gradient of one pass (pass_function) on device `index`, fetched to the
    host."""
    one, setup = shared.setup(index)
    with tf.device(shared.devices[index]):
        x = tf.cast(tf.constant(images), optimizers.compute_dtype(one.plan.precision))
        y = tf.constant(labels)
    loss, grads = pass_function(one, setup)(x, y)
    return [loss.numpy()] + [g.numpy() if g is not None else None for g in grads]


def _passes(shared: explain.DeviceSteps, entries: list[dict], built: list[int],
            images: np.ndarray, labels: np.ndarray,
            deterministic: bool) -> dict[int, list[np.ndarray]]:
    """The pass on every device in `built` (a failure recorded in its entry). Under op
    determinism an op without a deterministic kernel (UnimplementedError) is raised instead,
    for the caller to compare without determinism."""
    results: dict[int, list[np.ndarray]] = {}
    for i in built:
        try:
            results[i] = _pass(shared, i, images, labels)
        except tf.errors.UnimplementedError as exc:
            if deterministic:
                raise
            _failed(entries[i], "numeric", exc)
        except (tf.errors.OpError, MemoryError) as exc:
            _failed(entries[i], "numeric", exc)
        raise_if_stopped()
    return results


def _same_state(shared: explain.DeviceSteps, built: list[int]) -> None:
    """Every device in `built` holds the first one's weights and optimizer state."""
    source = _state(shared.setup(built[0])[1])
    for i in built[1:]:
        for target, value in zip(_state(shared.setup(i)[1]), source, strict=True):
            target.assign(value)


def _numeric(runner: ModeRunner, shared: explain.DeviceSteps, entries: list[dict],
             res: RunResult) -> None:
    plan, p = runner.plan, runner.p
    bound = agreement.BOUNDS[plan.precision]
    batch = numeric_batch(plan.train_batch_size, plan.eval_batch_size)
    images, labels = fixed_batch(p.workload.tf_random_seed, batch, plan.image_size,
                                 plan.spec.num_classes - 1)
    info = {"batch": batch, "seed": p.workload.tf_random_seed, "precision": plan.precision,
            "bound": bound, "deterministic": True, "determinism_unavailable": None,
            "reference": None}
    res.extra["device_checks_numeric"] = info
    built = []
    for i, entry in enumerate(entries):
        try:
            shared.setup(i)
            built.append(i)
        except (tf.errors.OpError, MemoryError) as exc:
            _failed(entry, "numeric", exc)
    if not built:
        return
    _same_state(shared, built)   # before any pass moves a statistic
    try:
        with op_determinism():
            results = _passes(shared, entries, built, images, labels, deterministic=True)
    except tf.errors.UnimplementedError as exc:
        # An op of this model has no deterministic kernel on this device: compare within the
        # bound instead.
        info["deterministic"] = False
        info["determinism_unavailable"] = ((exc.message or "").strip().splitlines()
                                           or [type(exc).__name__])[0]
        for i in built:
            entries[i]["errors"].pop("numeric", None)
        _same_state(shared, built)
        results = _passes(shared, entries, built, images, labels, deterministic=False)
    if not results:
        return
    reference = min(results)
    info["reference"] = entries[reference]["device"]
    for i, arrays in results.items():
        entry = entries[i]
        entry["digest"] = agreement.digest(arrays)
        loss = float(arrays[0])
        entry["loss"] = loss if np.isfinite(loss) else None
        entry.update(agreement.compare(arrays, results[reference], bound,
                                       info["deterministic"]))
    if entries[reference]["loss"] is None:
        runner.record_notice(res, "--validate_devices: the loss on the fixed batch is not "
                                  "finite on %s: the gradients compared are not finite either"
                                  % info["reference"])


# --- summary figures ------------------------------------------------------------------------

def summarise(entries: list[dict], res: RunResult) -> None:
    """The summary figures (tfbench/figures/table.py) from the devices' entries."""
    res.extra["devices_checked"] = len(entries)
    # (entry key, figure, whether a larger value is faster)
    for key, name, faster in (("alone_ms", "alone", False), ("matmul_tflops", "matmul", True),
                              ("conv_tflops", "conv", True)):
        found = [(e[key], e["device"]) for e in entries if e[key] is not None]
        if not found:
            continue
        median = statistics.median(v for v, _ in found)
        value, device = min(found) if faster else max(found)
        res.extra["slowest_%s_device" % name] = device
        res.extra["slowest_%s_ratio" % name] = (median / value if faster else value / median) \
            if value and median else None
    compared = [e for e in entries if e["agrees"] is not None]
    if compared:
        res.extra["devices_differing"] = sum(not e["agrees"] for e in compared)
        diffs = [e["max_rel_diff"] for e in compared]
        res.extra["max_grad_rel_diff"] = None if None in diffs else max(diffs)


def refuse_options(p: Settings, facts: Facts) -> None:
    """Refuses (UsageError), before anything runs, --validate_devices where the run has no
    training step of its own to check and --validate_device_checks it cannot apply."""
    given = p.measurement.validate_device_checks
    if p.is_explicit("validate_device_checks"):
        unknown = [c for c in given if c not in DEVICE_CHECKS]
        if unknown or not given:
            raise errors.UsageError("--validate_device_checks=%s: give one or more of %s"
                                    % (",".join(given), ",".join(DEVICE_CHECKS)))
        if not p.measurement.validate_devices:
            raise errors.UsageError("--validate_device_checks chooses --validate_devices' "
                                    "checks: add --validate_devices")
    if not p.measurement.validate_devices:
        return
    if facts.mode != TRAINING:
        raise errors.UsageError(
            "--validate_devices checks each device's training step and gradients: not in %s "
            "mode (drop --%s)" % (facts.mode.replace("_", "-"), {
                FORWARD_ONLY: "forward_only", EVAL: "eval", DATA_ONLY: "data_only"}[facts.mode]))
    if p.mode.diagnose_input:
        raise errors.UsageError("--validate_devices and --diagnose_input each run their own "
                                "probes after a run: give one of them")
    if facts.parameter_server:
        raise errors.UsageError(
            "--validate_devices checks the devices of the process that runs the steps: with "
            "--ps_hosts the workers run them, not the controller (nor a ps task); validate each "
            "worker's host in a run of its own")
