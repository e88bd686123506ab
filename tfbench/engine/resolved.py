"""What will run: the Settings resolved against the model registry, the devices and the cluster.

Resolving has two steps, each done once per run. `read_facts(p)` reads what a run depends on
(the model, the devices, the cluster, the data's sizes), applies the per-device defaults (the
model's batch size and image size, micro-batches, warm-up, repeats) and refuses what they
cannot run: `Facts`, known before any strategy exists. `resolve(p, ...)` then does the legacy
arithmetic over the replicas that run the steps (global batch, batches and epochs, evaluation
batches): this process's devices, or on a parameter-server controller the workers' replicas,
which only its strategy counts. The result, `Resolved`, is plain data built by keyword; every
runner reads it and none changes it. Both collect the notices that say where tfbench changed
what was asked. Longer than the layout guide's 420 lines: one concept, what will run, with the
refusals of what cannot, kept in one module (Resolved reads each fact through one property).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np

from tfbench.config import data_source, datasets, flagdefs
from tfbench.config import settings as settings_lib
from tfbench.config.settings import Settings
from tfbench.distribute import devices, gpu_env
from tfbench.distribute import strategy as strategy_lib
from tfbench.errors import UsageError
from tfbench.measure import cpu_units
from tfbench.models import catalog, registry

# The values of Resolved.mode (config.settings.Asks.run_mode decides it).
TRAINING, FORWARD_ONLY, EVAL, DATA_ONLY = (settings_lib.TRAINING, settings_lib.FORWARD_ONLY,
                                           settings_lib.EVAL, settings_lib.DATA_ONLY)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Facts:
    """What is known of a run before its strategy exists: what resolving reads (the model, the
    devices, the cluster, the data's sizes) and the per-device settings decided from them, with
    their notices. Read once per process (a folder dataset is walked to count its images,
    selecting the devices lists the GPUs, the cluster is read from flags, TF_CONFIG or Slurm);
    the arithmetic over the replicas (resolve) runs once they are counted."""
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
    # A parameter-server cluster (--ps_hosts, or TF_CONFIG with ps): its workers run the
    # steps, and each worker's update counts in the global step. The one answer to "is this a
    # parameter-server run?" for everything that has a plan (Resolved.parameter_server).
    parameter_server: bool = False
    num_workers: int = 1         # hosts (or horovod processes) training together
    # Training's per-device batch, per micro-batch with accumulation (not the CSV's batch_size:
    # that is run_batch_size, the batch of the steps the run times).
    train_batch_size: int = 0
    eval_batch_size: int = 0
    accum_steps: int = 1         # micro-batches per device per step (settings.Asks.accum_steps)
    num_runs: int = 1            # timed runs (eval mode: one)
    num_warmup: int = 0
    xla: bool = False
    # fp16's loss scaling (none | static | dynamic) and its initial scale: the optimizer's and
    # the steps' (config.settings.loss_scaling).
    loss_scaling: str = "none"
    loss_scale: float = 1.0
    # Whether training steps compute top-1/top-5 (--print_training_accuracy): see
    # Resolved.step_accuracy.
    training_accuracy: bool = False
    # The element of a step's output [base_loss, total_loss, top_1, top_5] that Step lines,
    # RunResult.losses and the summaries report (--loss_type_to_report).
    loss_index: int = 1
    # Real data: tf.data's private thread pool (None: TensorFlow's shared threads) and where
    # its size comes from (gpu_env.private_threads).
    input_threads: Optional[int] = None
    input_threads_origin: str = ""

    @property
    def model_xla(self) -> str:
        """What of the model's step Keras compiles with XLA whatever --xla, with the model's
        name ('' for nothing; distribute.strategy.make_strategy reads it)."""
        return "%s: %s" % (self.spec.name, self.spec.xla_compiled) if self.spec.xla_compiled \
            else ""

    @property
    def run_batch_size(self) -> int:
        """The per-device batch of the steps this run times (the header's, the CSV's)."""
        return settings_lib.batch_timed_in(self.mode, self.train_batch_size,
                                           self.eval_batch_size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resolved:
    """What will run: the arithmetic over the replicas that run the steps, on `facts`. What
    resolving read and decided per device is `facts`, read through the properties below, so a
    Resolved has one copy of each."""
    facts: Facts
    global_batch: int            # images per step, all devices, all micro-batches
    num_batches: int
    num_epochs: float
    # The replicas each worker runs and their device kind: this process's devices, or on a
    # parameter-server controller the workers' (its strategy counts them).
    replicas_per_worker: int = 1
    replica_kind: str = "cpu"
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
    replica_notices: tuple[str, ...] = ()   # the arithmetic's notices (Resolved.notices: all)

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

    @property
    def parameter_server(self) -> bool:
        """A parameter-server run (Facts.parameter_server)."""
        return self.facts.parameter_server

    @property
    def num_workers(self) -> int:
        return self.facts.num_workers

    @property
    def train_batch_size(self) -> int:
        return self.facts.train_batch_size

    @property
    def eval_batch_size(self) -> int:
        return self.facts.eval_batch_size

    @property
    def accum_steps(self) -> int:
        return self.facts.accum_steps

    @property
    def num_runs(self) -> int:
        return self.facts.num_runs

    @property
    def num_warmup(self) -> int:
        return self.facts.num_warmup

    @property
    def xla(self) -> bool:
        return self.facts.xla

    @property
    def loss_scaling(self) -> str:
        return self.facts.loss_scaling

    @property
    def loss_scale(self) -> float:
        return self.facts.loss_scale

    @property
    def loss_index(self) -> int:
        return self.facts.loss_index

    def step_accuracy(self, mode: str) -> bool:
        """Whether a step of `mode` computes top-1/top-5: evaluation and forward-only steps
        always, training steps with --print_training_accuracy (Facts.training_accuracy)."""
        return mode != TRAINING or self.facts.training_accuracy

    @property
    def input_threads(self) -> Optional[int]:
        return self.facts.input_threads

    @property
    def input_threads_origin(self) -> str:
        return self.facts.input_threads_origin

    @property
    def notices(self) -> tuple[str, ...]:
        """Every notice of resolving: the facts', then the arithmetic's."""
        return self.facts.notices + self.replica_notices

    def with_facts(self, **changes) -> "Resolved":
        """This run with some facts changed and its arithmetic kept (a probe of one device
        runs the same per-device batch on changed devices)."""
        return dataclasses.replace(self, facts=dataclasses.replace(self.facts, **changes))

    @property
    def run_batch_size(self) -> int:
        """The per-device batch of the steps this run times (Facts.run_batch_size)."""
        return self.facts.run_batch_size

    @property
    def total_devices(self) -> int:
        """This worker's devices times the workers (every replica of the run, as each worker
        has as many devices)."""
        return self.device.num_devices * self.num_workers


def read_facts(p: Settings) -> Facts:
    """What a run is before its strategy exists (see Facts); refuses (UsageError) what the
    flags and these facts cannot run, before any device or cluster is set up."""
    from tfbench import data
    from tfbench.distribute import cluster as cluster_lib
    real = data_source.is_real_data(p.data)
    if (p.mode.data_only or p.mode.diagnose_input) and not real:
        raise UsageError("--%s needs real data: give --data_dir (and not --use_synthetic_data)"
                         % ("data_only" if p.mode.data_only else "diagnose_input"))
    # Real data is named (and a --data_dir that is not there refused) before the header.
    name = data_source.resolve_data_name(p.data) if real else p.data.data_name
    dataset = name if name in (datasets.IMAGENET, datasets.CIFAR10) else None
    spec = catalog.get(p.workload.model, dataset)
    notices: list[str] = []
    if p.data.use_synthetic_data and p.data.data_dir:
        notices.append("--use_synthetic_data: synthetic inputs, --data_dir=%s not read"
                       % p.data.data_dir)
    if dataset is None and spec.dataset != datasets.IMAGENET:
        notices.append("Model %s exists only for %s: using --data_name=%s"
                       % (p.workload.model, spec.dataset, spec.dataset))
    device_set = devices.select_devices(p)
    notices.extend(device_set.notices)
    if device_set.data_format == "NCHW" and not spec.channels_first:
        notices.append("%s cannot run channels-first: running it NHWC (--data_format=NCHW "
                       "ignored)" % spec.name)
        device_set = dataclasses.replace(device_set, data_format="NHWC")
    # The cluster, read once here (make_strategy reads it again to build the strategy).
    cluster = cluster_lib.read_cluster(p)
    parameter_server = cluster is not None and cluster.mode == cluster_lib.PARAMETER_SERVER
    num_workers = strategy_lib.num_workers(p, cluster)
    notices.extend("--%s has no effect under TF2 (TF1 graph-only flag); ignored" % name
                   for name in flagdefs.graph_only_overrides(p.flag_values())
                   # The legacy script's TF-TRT runs froze the graph; TF-TRT still does.
                   if not (name == "freeze_when_forward_only" and p.mode.trt_mode))
    notices.extend(_serving_facts(p, device_set, num_workers, parameter_server))
    precision = p.asks.precision
    loss_scaling, loss_scale = settings_lib.loss_scaling(p, precision)
    mode = p.asks.run_mode
    train_and_eval = mode == TRAINING and bool(
        p.mode.eval_during_training_every_n_steps or p.mode.eval_during_training_every_n_epochs
        or p.mode.eval_during_training_at_specified_steps
        or p.mode.eval_during_training_at_specified_epochs)
    # Synthetic data counts the model dataset's legacy epoch (data.split_size).
    none = data.SplitSize(0)
    train = data.split_size(p, spec.dataset, train=True) if mode != EVAL else none
    evaluated = data.split_size(p, spec.dataset, train=False) \
        if mode == EVAL or train_and_eval else None
    # One line per split counted (a folder of flat layout is both splits: one line).
    notices.extend("Found " + found for found in dict.fromkeys(
        (train.found, evaluated.found if evaluated else "")) if found)
    batch = settings_lib.train_batch(p, spec.batch_size)
    accum = p.asks.accum_steps
    if p.schedule.accum_steps > 1 and mode != TRAINING:
        notices.append("--accum_steps applies to training only; ignored in %s mode" % mode)
    if accum > 1:
        notices.append("Gradient accumulation: %d micro-batches of %d per device per update "
                       "(%d images per device per step)" % (accum, batch, accum * batch))
    if train_and_eval and p.schedule.num_runs > 1:
        raise UsageError("--num_runs cannot be combined with --eval_during_training_*")
    num_runs = 1 if mode == EVAL else p.schedule.num_runs
    if num_runs != p.schedule.num_runs:
        notices.append("--num_runs applies to training and forward-only runs; evaluating once")
    if p.measurement.estimate_dataset_size and mode != TRAINING:
        notices.append("--estimate_dataset_size estimates training time: no estimate for a%s "
                       "%s run" % ("n" if mode == EVAL else "", mode.replace("_", "-")))
    # The CPUs this process may run on, not the host's (the legacy script took the host's).
    cpus = cpu_units.usable_cpus() or os.cpu_count() or 1
    input_threads, input_threads_origin = gpu_env.private_threads(
        p, device_set.num_devices if device_set.kind == "gpu" else 0, cpus) \
        if real else (None, "")
    return Facts(spec=spec, device=device_set, precision=precision,
                 image_size=p.workload.image_size or spec.image_size, mode=mode,
                 train_and_eval=train_and_eval, real_data=real, notices=tuple(notices),
                 train_examples=train.num_examples,
                 eval_examples=evaluated.num_examples if evaluated else None,
                 train_found=train.found, eval_found=evaluated.found if evaluated else "",
                 parameter_server=parameter_server, num_workers=num_workers,
                 train_batch_size=batch,
                 eval_batch_size=settings_lib.eval_batch(p, spec.batch_size),
                 accum_steps=accum, num_runs=num_runs,
                 # eval: the one untimed cold call before the first checkpoint's timed batches
                 # (checkpoint_eval._cold_call).
                 num_warmup=1 if mode == EVAL else p.asks.warmup_batches,
                 xla=p.asks.xla, loss_scaling=loss_scaling,
                 loss_scale=loss_scale, training_accuracy=p.measurement.print_training_accuracy,
                 loss_index=0 if p.measurement.loss_type_to_report == "base_loss" else 1,
                 input_threads=input_threads, input_threads_origin=input_threads_origin)


def resolve(p: Settings, replicas_per_worker: Optional[int] = None, facts: Optional[Facts] = None,
            replica_kind: Optional[str] = None) -> Resolved:
    """The arithmetic over the replicas that run the steps, on the facts of the Settings.

    replicas_per_worker, replica_kind: the replicas each worker runs and their device kind
    when they are not this process's devices (a parameter-server controller: its strategy
    counts the workers' replicas). facts: read_facts(p) when read already (a run reads them
    before its strategy exists); read here otherwise."""
    f = facts if facts is not None else read_facts(p)
    mode, num_workers = f.mode, f.num_workers
    notices: list[str] = []
    replicas = replicas_per_worker or f.device.num_devices
    kind = replica_kind or f.device.kind
    own = f.device.num_devices
    worker_batch = settings_lib.global_batch(f.run_batch_size, f.accum_steps, replicas, 1)
    global_batch = settings_lib.global_batch(f.run_batch_size, f.accum_steps, replicas,
                                           num_workers)
    if replicas != own:
        notices.append("Parameter-server workers run %d replica(s) each: a step counts %d "
                       "images per worker, not this controller's %d device(s)"
                       % (replicas, worker_batch, own))
    if f.precision == "fp16" and kind == "cpu":
        # A parameter-server controller cannot read its workers' CPUs' units.
        notice = cpu_units.cpu_fp16_notice(None if f.parameter_server
                                           else cpu_units.cpu_flags())
        if notice:
            notices.append(notice)
    train_examples, eval_examples = f.train_examples, f.eval_examples
    num_eval_batches = None
    eval_global_batch = f.eval_batch_size * replicas * num_workers
    if eval_examples is not None:
        num_eval_batches = eval_batches(p, eval_global_batch, eval_examples)
    _check_enough_data(f, global_batch, eval_global_batch)
    if mode == EVAL:
        num_batches = num_eval_batches
        num_epochs = num_batches * global_batch / eval_examples
    else:
        num_batches, num_epochs = settings_lib.num_batches_and_epochs(p, global_batch,
                                                                    train_examples)
    iterations_per_step = num_workers if f.parameter_server else 1
    return Resolved(
        facts=f, global_batch=global_batch, num_batches=num_batches, num_epochs=num_epochs,
        replicas_per_worker=replicas, replica_kind=kind, worker_batch=worker_batch,
        step_line_batch=global_batch if p.devices.variable_update == "distributed_all_reduce"
        else worker_batch,
        eval_global_batch=eval_global_batch, num_eval_batches=num_eval_batches or 0,
        iterations_per_step=iterations_per_step,
        images_per_iteration=global_batch // iterations_per_step,
        replica_notices=tuple(notices))


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


def _serving_facts(p: Settings, device_set: devices.DeviceSet, num_workers: int,
                   parameter_server: bool) -> list[str]:
    """Refuses what --saved_model and --trt_mode cannot do here (UsageError); returns the
    notices about their flags."""
    from tfbench.measure import tensorrt
    if not p.asks.served:
        return []
    if p.mode.saved_model_dir and os.path.isdir(p.mode.saved_model_dir) \
            and os.listdir(p.mode.saved_model_dir):
        raise UsageError("--saved_model_dir=%s is not empty: give a new or empty directory"
                         % p.mode.saved_model_dir)
    if p.mode.saved_model_dir and os.path.exists(p.mode.saved_model_dir) \
            and not os.path.isdir(p.mode.saved_model_dir):
        raise UsageError("--saved_model_dir=%s is a file: give a new or empty directory"
                         % p.mode.saved_model_dir)
    if p.mode.trt_mode:
        reasons = tensorrt.unavailable_reasons(tensorrt.read(), device_set.kind)
        if reasons:
            raise UsageError(tensorrt.unavailable_message("--trt_mode=" + p.mode.trt_mode, reasons))
    replicas = device_set.num_devices
    if replicas > 1 or num_workers > 1 or parameter_server:
        raise UsageError("--%s times one served model on one device of one process, as a "
                         "deployment runs it: this run has %d device(s) on %d worker(s)%s" % (
                             "trt_mode" if p.mode.trt_mode else "saved_model",
                             replicas, num_workers,
                             " with parameter servers" if parameter_server else ""))
    if p.is_explicit("trt_calibration_batches") and p.mode.trt_mode != "INT8":
        return ["--trt_calibration_batches applies to --trt_mode=INT8; ignored"]
    return []


def eval_batches(p: Settings, eval_global_batch: int, eval_examples: int) -> int:
    """Batches per evaluation, legacy rule: --num_eval_batches or --num_eval_epochs, else
    training's --num_batches or --num_epochs, over the validation set; a batch is every
    worker's (benchmark_cnn.py: eval_batch_size * num_workers)."""
    if p.schedule.num_eval_batches is not None or p.schedule.num_eval_epochs is not None:
        p = p.with_flags(num_batches=p.schedule.num_eval_batches,
                         num_epochs=p.schedule.num_eval_epochs)
    return settings_lib.num_batches_and_epochs(p, eval_global_batch, eval_examples)[0]


def eval_steps_during_training(p: Settings, plan: Resolved) -> set[int]:
    """Local step counts after which to evaluate (legacy arithmetic; the last step excluded)."""
    global_batch, num_batches = plan.global_batch, plan.num_batches

    def step_of_epoch(e: float) -> int:
        return int(e * plan.train_examples + global_batch - 1) // global_batch
    if p.mode.eval_during_training_every_n_steps:
        n = p.mode.eval_during_training_every_n_steps
        due = set(range(n, num_batches, n))
    elif p.mode.eval_during_training_every_n_epochs:
        n = p.mode.eval_during_training_every_n_epochs
        due = {step_of_epoch(e) for e in np.arange(n, plan.num_epochs, n)}
    elif p.mode.eval_during_training_at_specified_steps:
        due = {int(s) for s in p.mode.eval_during_training_at_specified_steps}
    elif p.mode.eval_during_training_at_specified_epochs:
        due = {step_of_epoch(float(e)) for e in p.mode.eval_during_training_at_specified_epochs}
    else:
        return set()
    return {s for s in due if 0 < s < num_batches}

