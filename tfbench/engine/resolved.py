"""What will run: Params resolved against the model registry and the devices.

`resolve(p)` applies the defaults (the model's batch size and image size), the devices and
the legacy arithmetic (global batch, batches and epochs, warm-up, evaluation batches) and
collects the notices that say where tfbench changed what was asked. The result, `Resolved`, is
plain data built by keyword; every runner reads it and none changes it. What it reads (the model,
the devices, the data's sizes: `Facts`) is read once; a parameter-server controller redoes
only the arithmetic once its strategy has counted the workers' replicas.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np

from tfbench.config import data_source, datasets, flagdefs
from tfbench.config import params as params_lib
from tfbench.distribute import devices, gpu_env
from tfbench.distribute import strategy as strategy_lib
from tfbench.errors import UsageError
from tfbench.measure import cpu_units
from tfbench.models import catalog, registry

# The values of Resolved.mode (config.params.run_mode decides it).
TRAINING, FORWARD_ONLY, EVAL, DATA_ONLY = (params_lib.TRAINING, params_lib.FORWARD_ONLY,
                                           params_lib.EVAL, params_lib.DATA_ONLY)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Facts:
    """What resolving reads: the model, the devices, the precision and mode, and the data's
    sizes. Read once per process (a folder dataset is walked to count its images, selecting
    the devices lists the GPUs); the batch arithmetic over them can run again (a parameter-server
    controller learns the workers' replicas from its strategy)."""
    spec: registry.ModelSpec
    device: devices.DeviceSet
    precision: str
    image_size: int
    mode: str
    train_and_eval: bool
    real_data: bool
    notices: tuple[str, ...]
    # The dataset sizes every epoch figure uses: --num_epochs, learning-rate epochs,
    # --eval_during_training_*_epochs and --num_eval_epochs. The legacy constants for imagenet
    # and cifar10, the data's own count for folders and tfds.
    train_examples: int                   # 0 in eval mode
    eval_examples: Optional[int]          # when the run evaluates
    # What counting folder or tfds data found, per split read (data.SplitSize.found; '' for
    # the constants): said before the header, and named when a split is smaller than a batch.
    train_found: str = ""
    eval_found: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resolved:
    """What will run, after defaults and device facts are applied. What resolving read is
    `facts`, and its model, devices, precision, image size, mode, evaluations, data kind and
    data sizes are read through it (the properties below), so a Resolved has one copy of each."""
    facts: Facts
    batch_size: int              # per device (per micro-batch with accumulation)
    eval_batch_size: int
    accum_steps: int             # micro-batches per device per step (config.params.accum_steps)
    global_batch: int            # images per step, all devices, all micro-batches
    num_runs: int                # timed runs (eval mode: one)
    num_batches: int
    num_epochs: float
    num_warmup: int
    xla: bool
    notices: tuple[str, ...] = ()   # the facts' notices and those of the arithmetic
    num_workers: int = 1         # hosts (or horovod processes) training together
    worker_batch: int = 0        # images per step on this worker (its monitors see these)
    # Images one Step line's images/sec counts: this worker's, or under distributed_all_reduce
    # (the legacy single session, one step of every worker) the global batch.
    step_line_batch: int = 0
    eval_global_batch: int = 0   # images per evaluation step, every device of every worker
    num_eval_batches: int = 0    # batches per evaluation (eval mode: num_batches)
    # Optimizer iterations (the global step) one step adds: on a parameter-server cluster each
    # worker's update counts (legacy: global_step += num_workers per step), else 1.
    iterations_per_step: int = 1
    # Images per optimizer iteration, the learning-rate schedule's batch (legacy
    # examples_per_step): the per-worker batch on a parameter-server cluster.
    images_per_iteration: int = 0
    # Real data: tf.data's private thread pool (None: TensorFlow's shared threads) and where
    # its size comes from (gpu_env.private_threads).
    input_threads: Optional[int] = None
    input_threads_origin: str = ""

    @property
    def spec(self) -> registry.ModelSpec:
        return self.facts.spec

    @property
    def device(self) -> devices.DeviceSet:
        return self.facts.device

    @property
    def precision(self) -> str:
        return self.facts.precision

    @property
    def image_size(self) -> int:
        return self.facts.image_size

    @property
    def mode(self) -> str:
        """training | forward_only | eval | data_only"""
        return self.facts.mode

    @property
    def train_and_eval(self) -> bool:
        return self.facts.train_and_eval

    @property
    def real_data(self) -> bool:
        return self.facts.real_data

    @property
    def train_examples(self) -> int:
        return self.facts.train_examples

    @property
    def eval_examples(self) -> Optional[int]:
        return self.facts.eval_examples

    def with_facts(self, **changes) -> "Resolved":
        """This run with some facts changed and its arithmetic kept (a probe of one device
        runs the same per-device batch on changed devices)."""
        return dataclasses.replace(self, facts=dataclasses.replace(self.facts, **changes))

    @property
    def run_batch_size(self) -> int:
        """The per-device batch of the steps this run times (the header's, the CSV's;
        config.params.timed_batch)."""
        return self.eval_batch_size if self.mode == EVAL else self.batch_size

    @property
    def total_devices(self) -> int:
        """This worker's devices times the workers (every replica of the run, as each worker
        has as many devices)."""
        return self.device.num_devices * self.num_workers


def read_facts(p) -> Facts:
    """The model, devices, precision, mode and data sizes of Params (see Facts)."""
    from tfbench import data
    real = data_source.is_real_data(p)
    if (p.data_only or p.diagnose_input) and not real:
        raise UsageError("--%s needs real data: give --data_dir (and not --use_synthetic_data)"
                         % ("data_only" if p.data_only else "diagnose_input"))
    # Real data is named (and a --data_dir that is not there refused) before the header.
    name = data_source.resolve_data_name(p) if real else p.data_name
    dataset = name if name in (datasets.IMAGENET, datasets.CIFAR10) else None
    spec = catalog.get(p.model, dataset)
    notices: list[str] = []
    if p.use_synthetic_data and p.data_dir:
        notices.append("--use_synthetic_data: synthetic inputs, --data_dir=%s not read"
                       % p.data_dir)
    if dataset is None and spec.dataset != datasets.IMAGENET:
        notices.append("Model %s exists only for %s: using --data_name=%s"
                       % (p.model, spec.dataset, spec.dataset))
    device_set = devices.select_devices(p)
    notices.extend(device_set.notices)
    if device_set.data_format == "NCHW" and not spec.channels_first:
        notices.append("%s cannot run channels-first: running it NHWC (--data_format=NCHW "
                       "ignored)" % spec.name)
        device_set = dataclasses.replace(device_set, data_format="NHWC")
    notices.extend("--%s has no effect under TF2 (TF1 graph-only flag); ignored" % name
                   for name in flagdefs.graph_only_overrides(p)
                   # The legacy script's TF-TRT runs froze the graph; TF-TRT still does.
                   if not (name == "freeze_when_forward_only" and p.trt_mode))
    notices.extend(_serving_facts(p, device_set.kind))
    precision = params_lib.resolve_precision(p)
    if precision == "fp16" and device_set.kind == "cpu" and not _parameter_server(p):
        # (A parameter-server controller's steps run on its workers' devices.)
        notice = cpu_units.cpu_fp16_notice(cpu_units.cpu_flags())
        if notice:
            notices.append(notice)
    mode = params_lib.run_mode(p)
    train_and_eval = mode == TRAINING and bool(
        p.eval_during_training_every_n_steps or p.eval_during_training_every_n_epochs
        or p.eval_during_training_at_specified_steps
        or p.eval_during_training_at_specified_epochs)
    # Synthetic data counts the model dataset's legacy epoch (data.split_size).
    none = data.SplitSize(0)
    train = data.split_size(p, spec.dataset, train=True) if mode != EVAL else none
    evaluated = data.split_size(p, spec.dataset, train=False) \
        if mode == EVAL or train_and_eval else None
    # One line per split counted (a folder of flat layout is both splits: one line).
    notices.extend("Found " + found for found in dict.fromkeys(
        (train.found, evaluated.found if evaluated else "")) if found)
    return Facts(spec=spec, device=device_set, precision=precision,
                 image_size=p.image_size or spec.image_size, mode=mode,
                 train_and_eval=train_and_eval, real_data=real, notices=tuple(notices),
                 train_examples=train.num_examples,
                 eval_examples=evaluated.num_examples if evaluated else None,
                 train_found=train.found, eval_found=evaluated.found if evaluated else "")


def resolve(p, replicas_per_worker: Optional[int] = None,
            facts: Optional[Facts] = None) -> Resolved:
    """Applies defaults, the devices and the model registry to Params.

    replicas_per_worker: the replicas each worker runs when they are not this process's
    devices (a parameter-server controller: the strategy counts the workers' GPUs).
    facts: what an earlier resolve read (Resolved.facts), so that only the arithmetic runs
    again."""
    f = facts if facts is not None else read_facts(p)
    spec, device_set, mode = f.spec, f.device, f.mode
    notices = list(f.notices)
    batch = p.batch_size or spec.batch_size
    eval_batch = p.eval_batch_size or batch
    accum = params_lib.accum_steps(p)
    if p.accum_steps > 1 and mode != TRAINING:
        notices.append("--accum_steps applies to training only; ignored in %s mode" % mode)
    if accum > 1:
        notices.append("Gradient accumulation: %d micro-batches of %d per device per update "
                       "(%d images per device per step)" % (accum, batch, accum * batch))
    timed = params_lib.timed_batch(p, spec.batch_size)
    replicas = replicas_per_worker or device_set.num_devices
    worker_batch = params_lib.global_batch(timed, accum, replicas, 1)
    num_workers = strategy_lib.num_workers(p)
    global_batch = params_lib.global_batch(timed, accum, replicas, num_workers)
    train_examples, eval_examples = f.train_examples, f.eval_examples
    num_eval_batches = None
    eval_global_batch = eval_batch * replicas * num_workers
    if eval_examples is not None:
        num_eval_batches = eval_batches(p, eval_global_batch, eval_examples)
    _check_enough_data(f, global_batch, eval_global_batch)
    if mode == EVAL:
        num_batches = num_eval_batches
        num_epochs = num_batches * global_batch / eval_examples
    else:
        num_batches, num_epochs = params_lib.num_batches_and_epochs(p, global_batch,
                                                                    train_examples)
    iterations_per_step = num_workers if _parameter_server(p) else 1
    if params_lib.served(p) and (replicas > 1 or num_workers > 1 or _parameter_server(p)):
        raise UsageError("--%s times one served model on one device of one process, as a "
                         "deployment runs it: this run has %d device(s) on %d worker(s)%s" % (
                             "trt_mode" if p.trt_mode else "saved_model", replicas, num_workers,
                             " with parameter servers" if _parameter_server(p) else ""))
    if p.validate_devices:
        _validate_devices_applies(p, mode)
    _validate_options(p, mode, replicas * num_workers)
    if f.train_and_eval and p.num_runs > 1:
        raise UsageError("--num_runs cannot be combined with --eval_during_training_*")
    num_runs = 1 if mode == EVAL else p.num_runs
    if num_runs != p.num_runs:
        notices.append("--num_runs applies to training and forward-only runs; evaluating once")
    if p.estimate_dataset_size and mode != TRAINING:
        notices.append("--estimate_dataset_size estimates training time: no estimate for a%s "
                       "%s run" % ("n" if mode == EVAL else "", mode.replace("_", "-")))
    # The CPUs this process may run on, not the host's (the legacy script took the host's).
    cpus = cpu_units.usable_cpus() or os.cpu_count() or 1
    input_threads, input_threads_origin = gpu_env.private_threads(
        p, device_set.num_devices if device_set.kind == "gpu" else 0, cpus) \
        if f.real_data else (None, "")
    return Resolved(
        facts=f, batch_size=batch, eval_batch_size=eval_batch, accum_steps=accum,
        global_batch=global_batch, num_runs=num_runs,
        num_batches=num_batches, num_epochs=num_epochs,
        num_warmup=0 if mode == EVAL else params_lib.num_warmup_batches(p),
        xla=params_lib.xla_requested(p), notices=tuple(notices), num_workers=num_workers,
        worker_batch=worker_batch,
        step_line_batch=global_batch if p.variable_update == "distributed_all_reduce"
        else worker_batch,
        eval_global_batch=eval_global_batch, num_eval_batches=num_eval_batches or 0,
        iterations_per_step=iterations_per_step,
        images_per_iteration=global_batch // iterations_per_step,
        input_threads=input_threads, input_threads_origin=input_threads_origin)


def _check_enough_data(f: Facts, global_batch: int, eval_global_batch: int) -> None:
    """Refuses (UsageError) counted data with fewer examples than one step's batch of every
    device and worker: each step would repeat images, and a --data_dir that is not the dataset
    meant (a folder of plots) would be benchmarked. The legacy constants are not counted."""
    for found, count, batch, what in (
            (f.train_found, f.train_examples, global_batch, "global batch"),
            (f.eval_found, f.eval_examples, eval_global_batch, "global evaluation batch")):
        if found and count < batch:
            raise UsageError("--data_dir holds too few images for one %s of %d: found %s "
                             "(is it the dataset you meant? a smaller --batch_size runs it)"
                             % (what, batch, found))


def _serving_facts(p, device_kind: str) -> list[str]:
    """Refuses what --saved_model and --trt_mode cannot do here (UsageError); returns the
    notices about their flags."""
    from tfbench.measure import tensorrt
    if not params_lib.served(p):
        return []
    if p.saved_model_dir and os.path.isdir(p.saved_model_dir) and os.listdir(p.saved_model_dir):
        raise UsageError("--saved_model_dir=%s is not empty: give a new or empty directory"
                         % p.saved_model_dir)
    if p.saved_model_dir and os.path.exists(p.saved_model_dir) \
            and not os.path.isdir(p.saved_model_dir):
        raise UsageError("--saved_model_dir=%s is a file: give a new or empty directory"
                         % p.saved_model_dir)
    if p.trt_mode:
        reasons = tensorrt.unavailable_reasons(tensorrt.read(), device_kind)
        if reasons:
            raise UsageError(tensorrt.unavailable_message("--trt_mode=" + p.trt_mode, reasons))
    if p.is_explicit("trt_calibration_batches") and p.trt_mode != "INT8":
        return ["--trt_calibration_batches applies to --trt_mode=INT8; ignored"]
    return []


def eval_batches(p, eval_global_batch: int, eval_examples: int) -> int:
    """Batches per evaluation, legacy rule: --num_eval_batches or --num_eval_epochs, else
    training's --num_batches or --num_epochs, over the validation set; a batch is every
    worker's (benchmark_cnn.py: eval_batch_size * num_workers)."""
    if p.num_eval_batches is not None or p.num_eval_epochs is not None:
        p = p.replace(num_batches=p.num_eval_batches, num_epochs=p.num_eval_epochs)
    return params_lib.num_batches_and_epochs(p, eval_global_batch, eval_examples)[0]


def _validate_devices_applies(p, mode: str) -> None:
    """--validate_devices checks the training step on the devices of this process; refuses
    (UsageError) the runs that have none to check."""
    if mode != TRAINING:
        raise UsageError("--validate_devices checks each device's training step and gradients: "
                         "not in %s mode (drop --%s)" % (mode.replace("_", "-"), {
                             FORWARD_ONLY: "forward_only", EVAL: "eval",
                             DATA_ONLY: "data_only"}[mode]))
    if p.diagnose_input:
        raise UsageError("--validate_devices and --diagnose_input each run their own probes "
                         "after a run: give one of them")
    if _parameter_server(p):
        raise UsageError("--validate_devices checks the devices of the process that runs the "
                         "steps: with --ps_hosts the workers run them, not the controller (nor "
                         "a ps task); validate each worker's host in a run of its own")


def _validate_options(p, mode: str, devices: int) -> None:
    """Refuses (UsageError) --validate_device_checks and --validate_allreduce_json where they
    cannot apply."""
    if p.is_explicit("validate_device_checks"):
        unknown = [c for c in p.validate_device_checks if c not in flagdefs.DEVICE_CHECKS]
        if unknown or not p.validate_device_checks:
            raise UsageError("--validate_device_checks=%s: give one or more of %s" % (
                ",".join(p.validate_device_checks), ",".join(flagdefs.DEVICE_CHECKS)))
        if not p.validate_devices:
            raise UsageError("--validate_device_checks chooses --validate_devices' checks: "
                             "add --validate_devices")
    if not p.validate_allreduce_json:
        return
    if mode != TRAINING:
        raise UsageError("--validate_allreduce_json times the training run's all-reduce: not "
                         "in %s mode" % mode.replace("_", "-"))
    if devices < 2:
        raise UsageError("--validate_allreduce_json: one device has no all-reduce to time "
                         "(give --num_gpus=N, N > 1)")
    if _parameter_server(p):
        raise UsageError("--validate_allreduce_json: with --ps_hosts the workers run the "
                         "steps, not the controller; time the all-reduce with `tfbench "
                         "allreduce`")
    folder = os.path.dirname(os.path.abspath(p.validate_allreduce_json))
    if not os.path.isdir(folder):
        raise UsageError("--validate_allreduce_json=%s: the folder %s does not exist"
                         % (p.validate_allreduce_json, folder))


def _parameter_server(p) -> bool:
    from tfbench.distribute import cluster
    found = cluster.read_cluster(p)
    return found is not None and found.mode == cluster.PARAMETER_SERVER


def eval_steps_during_training(p, r: Resolved) -> set[int]:
    """Local step counts after which to evaluate (legacy arithmetic; the last step excluded)."""
    global_batch, num_batches = r.global_batch, r.num_batches

    def step_of_epoch(e: float) -> int:
        return int(e * r.train_examples + global_batch - 1) // global_batch
    if p.eval_during_training_every_n_steps:
        n = p.eval_during_training_every_n_steps
        due = set(range(n, num_batches, n))
    elif p.eval_during_training_every_n_epochs:
        n = p.eval_during_training_every_n_epochs
        due = {step_of_epoch(e) for e in np.arange(n, r.num_epochs, n)}
    elif p.eval_during_training_at_specified_steps:
        due = {int(s) for s in p.eval_during_training_at_specified_steps}
    elif p.eval_during_training_at_specified_epochs:
        due = {step_of_epoch(float(e)) for e in p.eval_during_training_at_specified_epochs}
    else:
        return set()
    return {s for s in due if 0 < s < num_batches}

