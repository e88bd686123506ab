"""Settings: what everything below the configuration layer reads of a run's flags.

Built once from the validated Params (argv -> Params -> Settings), it holds the flags grouped by
concern (`settings.schedule.batch_size`, `settings.devices.variable_update`: the typed, frozen
groups of config/settings_groups.py, generated from flagdefs.CONCERNS) and, in `asks`, what the
run asks for read from its flags alone, decided here once (mode, precision, micro-batches,
devices, XLA, warm-up). Params itself never leaves tfbench.config.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable, Mapping, Optional

from tfbench.config import flagdefs, params as params_lib
# The mode names and the batch arithmetic, which need no flags: here too, so that what reads the
# settings imports config.settings alone.
from tfbench.config.params import (DATA_ONLY, EVAL, FORWARD_ONLY, TRAINING,  # noqa: F401
                                   global_batch, nccl_refusal, parse_piecewise,
                                   per_device_for_global)
from tfbench.config.settings_groups import (GROUPS, Cluster, Data, Devices, Learning,
                                            Measurement, Mode, Numerics, Outputs, Runtime,
                                            Schedule, Workload)


@dataclasses.dataclass(frozen=True)
class Asks:
    """What the run asks for, read from its flags alone (no TensorFlow, no devices): each
    decided once, here; what a host decides at run time is engine.resolved's Facts."""

    # training | forward_only | eval | data_only (params.TRAINING, ...).
    run_mode: str
    # fp32 | fp16 | bf16: --precision, else fp16 with --use_fp16, else fp32.
    precision: str
    # Micro-batches per device per step: --accum_steps in training, else 1.
    accum_steps: int
    # Untimed warm-up batches: --num_warmup_batches, else the legacy default.
    warmup_batches: int
    # --xla or its legacy spelling --xla_compile.
    xla: bool
    # --device=cpu.
    cpu: bool
    # --saved_model or --trt_mode: the run times a SavedModel's serving signature.
    served: bool
    _params: Any = dataclasses.field(repr=False, compare=False)

    # Read when asked, not when the settings are made: flags that contradict each other here
    # are the run's error to report (UsageError), while a study still writes the row of a point
    # that ran with them (children.rows).
    @functools.cached_property
    def devices(self) -> int:
        """Devices per worker: as many as --gpu_indices names, else --num_gpus."""
        return params_lib.requested_devices(self._params)

    @functools.cached_property
    def gpu_indices(self) -> tuple[int, ...]:
        """--gpu_indices as distinct CUDA indices; () when not given or on the CPU."""
        return () if self.cpu else tuple(params_lib.gpu_indices(self._params))


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of one run, by concern; see the module docstring."""

    workload: Workload
    mode: Mode
    schedule: Schedule
    data: Data
    devices: Devices
    cluster: Cluster
    runtime: Runtime
    numerics: Numerics
    learning: Learning
    measurement: Measurement
    outputs: Outputs
    asks: Asks
    # Flags the user typed (absl `.present`): decides whether a default may be adapted.
    explicit: frozenset
    _params: Any = dataclasses.field(repr=False, compare=False)

    def is_explicit(self, name: str) -> bool:
        return name in self.explicit

    def with_flags(self, **changes: Any) -> "Settings":
        """These settings with some flags changed (by flag name), decided again."""
        return of(self._params.replace(**changes))

    def flag_values(self) -> dict[str, Any]:
        """Every flag's value by name, for what records or passes on the flags as such (the
        manifest, a child's command line, a study's columns)."""
        return {spec.name: getattr(self._params, spec.name) for spec in flagdefs.ALL_FLAGS}


def of(p: "params_lib.Params") -> Settings:
    """The Settings of validated Params."""
    groups = {concern: cls(**{name: getattr(p, name) for name in flagdefs.CONCERNS[concern][1]})
              for concern, cls in GROUPS.items()}
    asks = Asks(run_mode=params_lib.run_mode(p), precision=params_lib.resolve_precision(p),
                accum_steps=params_lib.accum_steps(p),
                warmup_batches=params_lib.num_warmup_batches(p),
                xla=params_lib.xla_requested(p), cpu=params_lib.cpu_requested(p),
                served=params_lib.served(p), _params=p)
    return Settings(**groups, asks=asks, explicit=p.explicit, _params=p)


def make_settings(values: Optional[Mapping[str, Any]] = None,
                  explicit: Optional[Iterable[str]] = None) -> Settings:
    """Validated Settings from flag values by name; names in `values` count as explicit."""
    return of(params_lib.make_params(values, explicit))


def train_batch(s: Settings, model_batch: int) -> int:
    """Training's per-device batch (one micro-batch): --batch_size, else `model_batch`, the
    model's default."""
    return s.schedule.batch_size or model_batch


def eval_batch(s: Settings, model_batch: int) -> int:
    """An evaluation's per-device batch: --eval_batch_size, else training's."""
    return s.schedule.eval_batch_size or train_batch(s, model_batch)


def batch_timed_in(mode: str, train_batch_size: int, eval_batch_size: int) -> int:
    """Which of the two batches a run of `mode` times: the evaluation's in eval mode, else
    training's (forward-only and input-only runs too)."""
    return eval_batch_size if mode == params_lib.EVAL else train_batch_size


def timed_batch(s: Settings, model_batch: int) -> int:
    """The per-device batch of the timed steps (one micro-batch), the CSV's batch_size; what a
    study writes for a run that wrote no row (children.rows), as the run's Facts say it."""
    return batch_timed_in(s.asks.run_mode, train_batch(s, model_batch),
                          eval_batch(s, model_batch))


def num_batches_and_epochs(s: Settings, global_batch_size: int,
                           num_examples: int) -> tuple[int, float]:
    """The legacy rule: (timed batches, epochs they make)."""
    if s.schedule.num_epochs is not None:
        batches = (int(s.schedule.num_epochs * num_examples + global_batch_size - 1)
                   // global_batch_size)
    else:
        batches = (s.schedule.num_batches if s.schedule.num_batches is not None
                   else params_lib.DEFAULT_NUM_BATCHES)
    return batches, batches * global_batch_size / num_examples


# The legacy script's static loss scale for fp16 when --fp16_loss_scale is not given.
DEFAULT_STATIC_LOSS_SCALE = 128.0


def loss_scaling(s: Settings, precision: str) -> tuple[str, float]:
    """(none | static | dynamic, initial scale) for a run of `precision`: fp16 scales its loss,
    statically or, with --fp16_enable_auto_loss_scale, adjusted by a LossScaleOptimizer."""
    if precision != "fp16":
        return "none", 1.0
    if s.numerics.fp16_enable_auto_loss_scale:
        return "dynamic", s.numerics.fp16_loss_scale or 2.0 ** 15
    return "static", s.numerics.fp16_loss_scale or DEFAULT_STATIC_LOSS_SCALE
