"""Params: one frozen, validated object holding every setting of a run.

Fields are generated from the flag table (flagdefs), so a flag and its Params field can never
drift apart. Only the CLI reads absl FLAGS; Params is the flags' values checked (check_flags),
read by tfbench.config alone: what every other package reads is config.settings' Settings,
made from it, the flags grouped by concern and what the run asks for decided once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional

from tfbench.config import flagdefs
from tfbench.errors import UsageError

DEFAULT_NUM_BATCHES = 100
_DEFAULT_NUM_WARMUP_BATCHES = 10

# What a run times (run_mode): the values of the CSV's `mode` and of Resolved.mode.
TRAINING, FORWARD_ONLY, EVAL, DATA_ONLY = "training", "forward_only", "eval", "data_only"


def _field_default(spec: flagdefs.FlagSpec) -> Any:
    return tuple(spec.default) if isinstance(spec.default, list) else spec.default


def _replace(self, **changes: Any) -> "Params":
    return dataclasses.replace(self, **changes)


def _is_explicit(self, name: str) -> bool:
    return name in self.explicit


Params = dataclasses.make_dataclass(
    "Params",
    [(f.name, Any, dataclasses.field(default=_field_default(f))) for f in flagdefs.ALL_FLAGS]
    + [
        # Flags the user typed (absl `.present`): decides whether a default may be adapted.
        ("explicit", frozenset, dataclasses.field(default=frozenset())),
    ],
    frozen=True,
    namespace={"replace": _replace, "is_explicit": _is_explicit},
)
Params.__doc__ = "Every setting of one run (see flagdefs for the meaning of each field)."


def make_params(values: Mapping[str, Any] | None = None,
                explicit: Iterable[str] | None = None) -> "Params":
    """Builds validated Params from flag values; names in `values` count as explicit."""
    values = dict(values or {})
    unknown = sorted(set(values) - set(flagdefs.BY_NAME))
    if unknown:
        raise UsageError("unknown parameter(s): %s" % ", ".join(unknown))
    for name, value in list(values.items()):
        if isinstance(value, list):
            values[name] = tuple(value)
    given = frozenset(explicit) if explicit is not None else frozenset(values)
    params = Params(**values, explicit=given)
    check_flags(params)
    return params


def _check_bounds(p: "Params") -> None:
    for spec in flagdefs.ALL_FLAGS:
        value = getattr(p, spec.name)
        if spec.kind == "enum" and value not in spec.enum_values:
            raise UsageError("--%s=%s is not one of %s" % (spec.name, value,
                                                           flagdefs.choices(spec)))
        if value is None or spec.kind not in ("int", "float"):
            continue
        if spec.lower_bound is not None and value < spec.lower_bound:
            raise UsageError("--%s=%s is out of range: must be >= %s"
                             % (spec.name, value, spec.lower_bound))
        if spec.upper_bound is not None and value > spec.upper_bound:
            raise UsageError("--%s=%s is out of range: must be <= %s"
                             % (spec.name, value, spec.upper_bound))


def _lr_flags_given(p: "Params") -> list[str]:
    return [n for n in ("init_learning_rate", "num_epochs_per_decay",
                        "learning_rate_decay_factor", "minimum_learning_rate")
            if getattr(p, n) not in (None, 0)]


def check_flags(p: "Params") -> None:
    """Raises UsageError for values and combinations the legacy script rejects (and a few more)."""
    positive = ("batch_size", "eval_batch_size", "num_batches", "num_eval_batches", "num_gpus",
                "display_every", "image_size")
    for name in positive:
        value = getattr(p, name)
        if p.is_explicit(name) and value is not None and value <= 0:
            raise UsageError("--%s must be a positive integer, got %s" % (name, value))
    _check_bounds(p)
    for name in ("num_epochs", "num_eval_epochs"):
        value = getattr(p, name)
        if value is not None and value <= 0:
            raise UsageError("--%s must be positive, got %s" % (name, value))
    if p.num_warmup_batches is not None and p.num_warmup_batches < 0:
        raise UsageError("--num_warmup_batches must be >= 0, got %s" % p.num_warmup_batches)
    if p.num_batches is not None and p.num_epochs is not None:
        raise UsageError("At most one of --num_batches and --num_epochs may be specified")
    if p.num_eval_batches is not None and p.num_eval_epochs is not None:
        raise UsageError("At most one of --num_eval_batches and --num_eval_epochs may be specified")
    if p.forward_only and p.eval:
        raise UsageError("At most one of --forward_only and --eval may be specified")
    if p.eval and not p.train_dir:
        raise UsageError("Trained model directory not specified: --eval needs --train_dir")
    if p.save_model_steps is not None and p.save_model_secs:
        raise UsageError("At most one of --save_model_steps and --save_model_secs may be specified")

    during = [n for n in ("eval_during_training_every_n_steps",
                          "eval_during_training_every_n_epochs",
                          "eval_during_training_at_specified_steps",
                          "eval_during_training_at_specified_epochs")
              if getattr(p, n)]
    if len(during) > 1:
        raise UsageError("At most one of --%s may be specified" % ", --".join(during))
    if during and (p.eval or p.forward_only):
        raise UsageError("--%s cannot be used with --eval or --forward_only" % during[0])
    if p.stop_at_top_1_accuracy is not None and not during:
        raise UsageError("--stop_at_top_1_accuracy needs one of the "
                         "--eval_during_training_* flags")
    for name in ("eval_during_training_at_specified_steps",
                 "eval_during_training_at_specified_epochs"):
        for item in getattr(p, name):
            try:
                (int if name.endswith("steps") else float)(item)
            except ValueError:
                raise UsageError("--%s: %r is not a number" % (name, item)) from None

    if p.piecewise_learning_rate_schedule:
        others = _lr_flags_given(p)
        if others:
            raise UsageError("--piecewise_learning_rate_schedule cannot be combined with --%s"
                             % others[0])
        parse_piecewise(p.piecewise_learning_rate_schedule)
    decay = [p.num_epochs_per_decay, p.learning_rate_decay_factor]
    if any(decay) or p.minimum_learning_rate:
        if not (p.init_learning_rate is not None and all(decay)):
            raise UsageError("If one of --num_epochs_per_decay, --learning_rate_decay_factor or "
                             "--minimum_learning_rate is set, --init_learning_rate, "
                             "--num_epochs_per_decay and --learning_rate_decay_factor must all "
                             "be set")

    _check_serving(p)
    if p.precision == "bf16" and p.use_fp16:
        raise UsageError("--use_fp16 asks for fp16 but --precision=bf16: give only one")
    if p.precision == "fp32" and p.use_fp16:
        raise UsageError("--use_fp16 asks for fp16 but --precision=fp32: give only one")
    _refuse_nccl_on_cpu(p)
    if p.device.lower() == "cpu" and p.data_format == "NCHW" and p.is_explicit("data_format") \
            and not p.mkl:
        raise UsageError("--data_format=NCHW is not supported on CPU; use --data_format=NHWC")
    if p.resize_method not in ("nearest", "bilinear", "bicubic", "area", "round_robin"):
        raise UsageError("--resize_method=%s is not one of nearest, bilinear, bicubic, area, "
                         "round_robin" % p.resize_method)
    if p.input_preprocessor not in ("default", "official_models_imagenet"):
        raise UsageError("--input_preprocessor=%s is not one of default, official_models_imagenet"
                         % p.input_preprocessor)


def served(p: "Params") -> bool:
    """The run times a SavedModel's serving signature: --saved_model, or --trt_mode on top."""
    return bool(p.saved_model or p.trt_mode)


def _check_serving(p: "Params") -> None:
    """--saved_model and --trt_mode serve one model on one device of one process, exported once
    (the device and worker counts the flags do not show are checked in engine/resolved.py)."""
    flag = "--trt_mode" if p.trt_mode else "--saved_model"
    if p.saved_model_dir and not served(p):
        raise UsageError("--saved_model_dir keeps the export of --saved_model or --trt_mode: "
                         "add --saved_model")
    if not served(p):
        return
    if p.data_only or p.diagnose_input:
        raise UsageError("%s serves a model, and --%s runs none: give one of them"
                         % (flag, "data_only" if p.data_only else "diagnose_input"))
    if not (p.forward_only or p.eval):
        # The legacy script's rule too: TF-TRT only in forward-only mode.
        raise UsageError("%s times the served model of an inference run: add --forward_only, "
                         "or --eval with --train_dir" % flag)
    if p.trt_mode and (p.xla or p.xla_compile):
        raise UsageError("--trt_mode hands the graph to TensorRT, --xla to XLA: give one of them")
    if p.eval_interval_secs:
        raise UsageError("%s exports one checkpoint before the timed steps: "
                         "--eval_interval_secs cannot be combined with it" % flag)
    if p.num_gpus > 1 or p.variable_update == "horovod":
        raise UsageError("%s times one served model on one device, as a deployment runs it: "
                         "use --num_gpus=1 and no --variable_update=horovod (got %s)"
                         % (flag, "--num_gpus=%d" % p.num_gpus if p.num_gpus > 1
                            else "--variable_update=horovod"))


def parse_piecewise(text: str) -> tuple[list[float], list[int]]:
    """`LR0;E1;LR1;...;En;LRn` -> (learning rates, epoch boundaries)."""
    parts = text.split(";")
    if len(parts) % 2 != 1:
        raise UsageError("--piecewise_learning_rate_schedule must have an odd number of parts "
                         "(LR0;E1;LR1;...;En;LRn), got %d" % len(parts))
    try:
        rates = [float(x) for x in parts[0::2]]
        epochs = [int(x) for x in parts[1::2]]
    except ValueError:
        raise UsageError("--piecewise_learning_rate_schedule=%r: learning rates must be numbers "
                         "and epochs whole numbers" % text) from None
    if any(b <= a for a, b in zip(epochs, epochs[1:])):
        raise UsageError("--piecewise_learning_rate_schedule: epochs must increase")
    return rates, epochs


def num_warmup_batches(p: "Params") -> int:
    """--num_warmup_batches, else the legacy default max(10, 5 x t^2), t = --autotune_threshold
    or 1: with TF_AUTOTUNE_THRESHOLD=t, TensorFlow's cuDNN autotuner (AutotuneMap) may tune a
    shape again over its first max(10, 5 x t^2) runs."""
    if p.num_warmup_batches is not None:
        return p.num_warmup_batches
    threshold = p.autotune_threshold or 1
    return max(_DEFAULT_NUM_WARMUP_BATCHES, 5 * threshold * threshold)


def xla_requested(p: "Params") -> bool:
    """--xla or its legacy spelling --xla_compile."""
    return bool(p.xla or p.xla_compile)


def resolve_precision(p: "Params") -> str:
    """--precision wins when given; --use_fp16 is the legacy spelling of fp16."""
    if p.precision:
        return p.precision
    return "fp16" if p.use_fp16 else "fp32"


# --- what a run asks for, read from the flags alone (no TensorFlow, no devices) -------------

def run_mode(p: "Params") -> str:
    """training | forward_only | eval | data_only: --data_only wins over --eval and
    --forward_only (check_flags refuses --eval with --forward_only)."""
    if p.data_only:
        return DATA_ONLY
    if p.eval:
        return EVAL
    return FORWARD_ONLY if p.forward_only else TRAINING


def accum_steps(p: "Params") -> int:
    """Micro-batches per device per step: --accum_steps in training, else 1 (an inference or
    input-only step has no update to accumulate for)."""
    return p.accum_steps if run_mode(p) == TRAINING else 1


def cpu_requested(p: "Params") -> bool:
    """--device=cpu (the default, gpu, falls back to the CPU only where no GPU is visible)."""
    return p.device.lower() == "cpu"


def gpu_indices(p: "Params") -> list[int]:
    """--gpu_indices as distinct CUDA indices ([] when not given); UsageError otherwise."""
    text = p.gpu_indices
    if not text:
        return []
    try:
        indices = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError("--gpu_indices=%r must be comma-separated integers" % text) from None
    if not indices or min(indices) < 0 or len(set(indices)) != len(indices):
        raise UsageError("--gpu_indices=%r must name distinct GPUs by index (0, 1, ...)" % text)
    return indices


def requested_devices(p: "Params") -> int:
    """Devices per worker the flags ask for: as many as --gpu_indices names, else --num_gpus;
    with --device=cpu, --num_gpus logical CPU devices (--gpu_indices has no effect there).
    UsageError when --gpu_indices and an explicit --num_gpus disagree. What a host decides at
    run time (horovod's one GPU per process, the GPUs a Slurm step binds, the CPU where no GPU
    is visible) is tfbench.distribute.devices'."""
    if cpu_requested(p) or not p.gpu_indices:
        return p.num_gpus
    count = len(gpu_indices(p))
    if p.is_explicit("num_gpus") and count != p.num_gpus:
        raise UsageError("--gpu_indices names %d GPUs but --num_gpus=%d" % (count, p.num_gpus))
    return count


def global_batch(per_device: int, accum_steps: int, replicas: int, workers: int) -> int:
    """Images per step, every micro-batch of every replica of every worker."""
    return per_device * accum_steps * replicas * workers


def per_device_for_global(global_batch_size: int, accum_steps: int, replicas: int,
                          workers: int) -> int:
    """The per-device batch whose global batch (see global_batch) is `global_batch_size`;
    UsageError when it does not divide."""
    parts = accum_steps * replicas * workers
    if global_batch_size % parts:
        raise UsageError("global batch %d is not divisible by %d (%d micro-batch(es) x %d "
                         "device(s) x %d worker(s))" % (global_batch_size, parts, accum_steps,
                                                        replicas, workers))
    return global_batch_size // parts


def nccl_refusal(spec: Optional[str], on_gpus: bool, *, multi_worker: bool) -> Optional[str]:
    """Why --all_reduce_spec=`spec` cannot reduce on these devices (None when it can): NCCL
    runs between GPUs only. multi_worker: MultiWorkerMirroredStrategy's collectives (whose
    other choice is TensorFlow's ring), else one host's MirroredStrategy. The caller decides
    whether anything is reduced at all (one device reduces nothing)."""
    name = (spec or "").partition("#")[0].strip().lower()
    if name != "nccl" or on_gpus:
        return None
    if multi_worker:
        return ("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); on CPU use "
                "--all_reduce_spec=ring or leave it unset")
    return ("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); on CPU use "
            "--all_reduce_spec=pscpu or hierarchical_copy")


def _refuse_nccl_on_cpu(p: "Params") -> None:
    """--device=cpu with --all_reduce_spec=nccl where the strategy would reduce between
    devices: several on one host, or a MultiWorkerMirroredStrategy cluster of the flags
    (tfbench.distribute.strategy refuses it too, after TensorFlow starts; here a study refuses
    the point before starting any process). Horovod reduces with its own allreduce."""
    if not cpu_requested(p) or p.variable_update == "horovod":
        return
    multi_worker = bool(p.worker_hosts) and not p.ps_hosts
    if multi_worker or (not p.worker_hosts and not p.ps_hosts and requested_devices(p) > 1):
        why = nccl_refusal(p.all_reduce_spec, False, multi_worker=multi_worker)
        if why:
            raise UsageError(why)
