"""The classic tf_cnn_benchmarks console log, byte-compatible with the legacy script.

This is the only module that knows the legacy format. It formats plain numbers and strings; it
knows nothing about TensorFlow. Golden tests pin every line.

ClassicLog prints a run's log as the engine reports it (tfbench.engine.runlog.RunLog, one method
per event, each printing its lines at once); the functions below format single lines.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from tfbench.output import environment as environment_text

DASHES = "-" * 64


def _label(name: str) -> str:
    return "%-13s" % (name + ":")


def header_lines(*, tf_version: str, model: str, dataset: str, mode: str, batch_size: int,
                 global_batch_size: int, num_batches: int, num_epochs: float,
                 devices: Sequence[str], data_format: str, optimizer: str,
                 variable_update: str, all_reduce_spec: Optional[str] = None,
                 show_all_reduce: bool = False, job_name: str = "",
                 horovod_device: Optional[str] = None) -> list[str]:
    """The block printed before the run, ending with the `==========` line."""
    major, minor = tf_version.split(".")[:2]
    lines = [
        "TensorFlow:  %i.%i" % (int(major), int(minor)),
        _label("Model") + model,
        _label("Dataset") + dataset,
        _label("Mode") + mode,
        _label("SingleSess") + "False",
        _label("Batch size") + "%s global" % global_batch_size,
        " " * 13 + "%s per device" % batch_size,
        _label("Num batches") + "%d" % num_batches,
        _label("Num epochs") + "%.2f" % num_epochs,
        _label("Devices") + str(list(devices)),
        _label("NUMA bind") + "False",
        _label("Data format") + data_format,
        _label("Optimizer") + optimizer,
        _label("Variables") + variable_update,
    ]
    if show_all_reduce:
        lines.append(_label("AllReduce") + str(all_reduce_spec))
    if job_name:
        lines.append(_label("Sync") + "True")
    if horovod_device is not None:
        lines.append(_label("Horovod on") + horovod_device)
    lines.append("==========")
    return lines


def step_header(loss_name: str, with_accuracy: bool) -> str:
    cols = ["Step", "Img/sec", loss_name]
    if with_accuracy:
        cols += ["top_1_accuracy", "top_5_accuracy"]
    return "\t".join(cols)


def step_line(step: int, mean: float, uncertainty: float, jitter: float, loss: float,
              top_1: Optional[float] = None, top_5: Optional[float] = None) -> str:
    """`step` is the 1-based step number (legacy prints step + 1 of the 0-based timed step)."""
    line = "%i\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f" % (
        step, mean, uncertainty, jitter, loss)
    if top_1 is not None:
        line += "\t%.3f\t%.3f" % (top_1, top_5)
    return line


def eval_progress_line(step: int, examples_per_sec: float) -> str:
    return "%i\t%.1f examples/sec" % (step, examples_per_sec)


def accuracy_line(top_1: float, top_5: float, num_examples: int) -> str:
    return "Accuracy @ 1 = %.4f Accuracy @ 5 = %.4f [%d examples]" % (top_1, top_5, num_examples)


def footer_lines(images_per_sec: float) -> list[str]:
    return [DASHES, "total images/sec: %.2f" % images_per_sec, DASHES]


def mode_label(forward_only: bool, eval_mode: bool, train_and_eval: bool = False) -> str:
    if eval_mode:
        return "evaluation"
    if forward_only:
        return "forward only"
    if train_and_eval:
        return "training + evaluation"
    return "training"


def _mode_text(mode: str, train_and_eval: bool) -> str:
    if mode == "data_only":
        return "input pipeline only"
    return mode_label(mode == "forward_only", mode == "eval", train_and_eval)


# The parts of --diagnose_input (tfbench.engine.runlog.DIAGNOSIS_PARTS).
_DIAGNOSIS = {"input_only": "the input pipeline alone", "synthetic": "synthetic data",
              "real": "real data"}


class ClassicLog:
    """The classic log of one run, printed through `write` (one line per call) at the moments
    the legacy script printed each line. Implements tfbench.engine.runlog.RunLog."""

    def __init__(self, write: Callable[[str], None], progress: Optional[Any] = None):
        """progress: a tfbench.output.progress.StepProgress, erased before each line, so the
        log holds none of it."""
        self._write, self.progress = write, progress

    def write(self, line: str) -> None:
        if self.progress is not None:
            self.progress.before_line()
        self._write(line)

    def _lines(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.write(line)

    def environment(self, env: Mapping[str, Any]) -> None:
        self._lines(environment_text.summary_lines(dict(env)))

    def show_notice(self, text: str) -> None:
        self.write(text)

    def header(self, header) -> None:
        h = header
        self._lines(header_lines(
            tf_version=h.tf_version, model=h.model, dataset=h.dataset,
            mode=_mode_text(h.mode, h.train_and_eval), batch_size=h.batch_size,
            global_batch_size=h.global_batch_size, num_batches=h.num_batches,
            num_epochs=h.num_epochs, devices=h.devices, data_format=h.data_format,
            optimizer=h.optimizer, variable_update=h.variable_update,
            all_reduce_spec=h.all_reduce_spec, show_all_reduce=h.show_all_reduce,
            job_name=h.job_name, horovod_device=h.horovod_device))

    def cluster_lines(self, lines: Sequence[str]) -> None:
        self._lines(lines)

    def generating_training_model(self) -> None:
        self.write("Generating training model")

    def generating_evaluation_model(self) -> None:
        self.write("Generating evaluation model")

    def generating_input_pipeline(self) -> None:
        self.write("Generating input pipeline")

    def initializing(self) -> None:
        self.write("Initializing graph")

    def warmup_started(self) -> None:
        self.write("Running warm up")

    def tracing(self, trace_file: str) -> None:
        self.write("Dumping trace to %s" % trace_file)

    def warmup_done(self) -> None:
        self.write("Done warm up")

    def repeat_started(self, run: int, num_runs: int) -> None:
        self.write("Repeat %d of %d" % (run, num_runs))

    def steps_started(self, loss_name: str, with_accuracy: bool) -> None:
        self.write(step_header(loss_name, with_accuracy))

    def step_progress(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:   # a terminal's bar; the log itself prints nothing
            self.progress.update(phase, done, total)

    def step(self, report) -> None:
        r = report
        self.write(step_line(r.step, r.images_per_sec, r.plusminus, r.jitter, r.loss,
                             r.top_1, r.top_5))

    def checkpoint_loaded(self, path: str) -> None:
        self.write("Successfully loaded model from %s." % path)

    def evaluation_started(self, global_step: int, final: bool) -> None:
        self.write("Running %sevaluation at global_step %d"
                   % ("final " if final else "", global_step))

    def evaluation_progress(self, step: int, examples_per_sec: float) -> None:
        self.write(eval_progress_line(step, examples_per_sec))

    def accuracy(self, top_1: float, top_5: float, num_examples: int) -> None:
        self.write(accuracy_line(top_1, top_5, num_examples))

    def early_stop(self, target: float) -> None:
        self.write("Stopping, as eval accuracy at least %s was reached" % target)

    def training_resumed(self) -> None:
        self.write("Resuming training")

    def training_done(self) -> None:
        self.write("Done with training")

    def probe_started(self, text: str) -> None:
        self.write(text)

    def diagnosis_started(self, part: str) -> None:
        self.write("Input diagnosis: %s" % _DIAGNOSIS[part])
