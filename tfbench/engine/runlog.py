"""How a run reports what happens while it runs: the RunLog interface the engine calls.

The engine formats no line. It calls one RunLog method per event, at the moment the legacy
tf_cnn_benchmarks script printed the matching line (the header before the model is built, a
Step line right after its step, ...), with the figures that line is made of. A notice (what
tfbench changed from what was asked, a figure left empty and why) is said with record_notice,
which records it in RunResult.notices (the CSV's `notices` column) and shows it: the engine
never calls RunLog.show_notice itself.
tfbench.output.classic_log.ClassicLog implements RunLog by printing the classic log (the CLI
passes one); SilentLog ignores every event (library use, tests). What must last goes into
RunResult as well: a RunLog only shows it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Protocol, Sequence, runtime_checkable

from tfbench.results import RunResult

# The parts of --diagnose_input, in the order they run (RunLog.diagnosis_started).
DIAGNOSIS_PARTS = ("input_only", "synthetic", "real")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Header:
    """The header block's figures: what will run, as the strategy resolved it."""
    tf_version: str
    model: str                   # the model's header name
    dataset: str                 # e.g. "imagenet (synthetic)"
    mode: str                    # training | forward_only | eval | data_only
    train_and_eval: bool
    batch_size: int              # per device
    global_batch_size: int
    num_batches: int
    num_epochs: float
    devices: tuple[str, ...]
    data_format: str
    optimizer: str
    variable_update: str         # what ran
    all_reduce_spec: Optional[str]
    show_all_reduce: bool
    job_name: str                # non-empty in a cluster
    horovod_device: Optional[str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepReport:
    """One Step line's figures (tfbench.measure.stats.perf_stats over the timed steps so far)."""
    step: int                    # 1-based timed step of this worker
    images_per_sec: float
    plusminus: float
    jitter: float
    loss: float                  # 0.0 where no loss is computed (--data_only)
    top_1: Optional[float] = None   # shown with --print_training_accuracy and forward-only
    top_5: Optional[float] = None


@runtime_checkable
class RunLog(Protocol):
    """The events of a run, in the order they can happen. Every method returns None."""

    def environment(self, env: Mapping[str, Any]) -> None:
        """The environment manifest (tfbench.measure.environment.capture), before the run."""

    def show_notice(self, text: str) -> None:
        """Shows one notice, and only shows it: record_notice, its one caller, has recorded it
        in RunResult.notices."""

    def header(self, header: Header) -> None:
        """What will run; the model is not built yet."""

    def cluster_lines(self, lines: Sequence[str]) -> None:
        """A cluster task's own lines after the header (`Starting worker N`)."""

    def generating_training_model(self) -> None:
        """Training and forward-only runs build their model."""

    def generating_evaluation_model(self) -> None:
        """An evaluation's model (--eval, --eval_during_training_*) is built."""

    def generating_input_pipeline(self) -> None:
        """--data_only builds the input pipeline."""

    def initializing(self) -> None:
        """Models and steps are built; variables are restored next."""

    def warmup_started(self) -> None:
        """The untimed warm-up steps start."""

    def tracing(self, trace_file: str) -> None:
        """--trace_file: a few untimed steps are traced."""

    def warmup_done(self) -> None:
        """Warm-up is over; the timed steps come next."""

    def repeat_started(self, run: int, num_runs: int) -> None:
        """--num_runs: repeat `run` (1-based, from 2) of num_runs starts."""

    def steps_started(self, loss_name: str, with_accuracy: bool) -> None:
        """A measurement's timed steps start (the Step lines' column header)."""

    def step(self, report: StepReport) -> None:
        """A displayed step (--display_every) ended."""

    def step_progress(self, phase: str, done: int, total: int) -> None:
        """`done` of `total` warm-up ("warmup") or timed ("timed") steps are done: after each
        step, and with done=0 as they start. For a progress display: the legacy log prints
        nothing for it."""

    def checkpoint_loaded(self, path: str) -> None:
        """--eval restored a checkpoint."""

    def evaluation_started(self, global_step: int, final: bool) -> None:
        """An evaluation during training starts (the final one after training: final)."""

    def evaluation_progress(self, step: int, examples_per_sec: float) -> None:
        """Every --display_every evaluation steps."""

    def accuracy(self, top_1: float, top_5: float, num_examples: int) -> None:
        """An evaluation ended."""

    def early_stop(self, target: float) -> None:
        """--stop_at_top_1_accuracy was reached: training stops."""

    def training_resumed(self) -> None:
        """Training goes on after an evaluation."""

    def training_done(self) -> None:
        """Training with evaluations ended; the final evaluation may follow."""

    def probe_started(self, text: str) -> None:
        """A probe after the timed steps starts (--explain_scaling, --validate_devices,
        --validate_allreduce_json): `text` says what it measures. Not a notice: nothing was
        changed from what was asked."""

    def diagnosis_started(self, part: str) -> None:
        """--diagnose_input: one of DIAGNOSIS_PARTS starts, a run of its own."""


class SilentLog(RunLog):
    """A RunLog that shows nothing."""


def record_notice(log: RunLog, res: RunResult, *texts: str) -> None:
    """Records each notice in the run's notices (RunResult.notices, the CSV's `notices`
    column) and shows it now: the one way the engine says a notice."""
    for text in texts:
        res.notices.append(text)
        log.show_notice(text)
