"""`tfbench evaluate`: the GPU evaluation method in one command, the front end of
tfbench.sweep.evaluation (configurations, runs) and tfbench.report.evaluation_report (the report).

    tfbench evaluate [--out_dir=DIR] [--models=M1,M2] [--modes=native,mixed,mixed_xla,tftrt]
                     [--quick] [--mixed_precision=auto|fp16|bf16] [--tftrt_precision=FP16]
                     [--rerun_failed] [--rerun_unstable]
                     [method options] [benchmark flags for every run: --num_gpus, --data_dir, ...]

The same command again in the same --out_dir continues an interrupted evaluation.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from typing import Optional, Sequence

from tfbench import errors
from tfbench.children.outcome import study_end
from tfbench.children.process import DEFAULT_CHILD
from tfbench.cli.guard import MIXED_FLAGS, Parser, guarded, split_benchmark_flags
from tfbench.config.argv import settings_of_flags
from tfbench.sweep import evaluation as ev

DEFAULT_OUT_DIR = "tfbench_evaluation"


def _parser() -> argparse.ArgumentParser:
    d = ev.Method()
    p = Parser(
        prog="tfbench evaluate", allow_abbrev=False,
        description="Evaluate a GPU the way practitioners publish it: five models x three "
                    "execution modes, training throughput, inference latency at batch 1, peak "
                    "memory, power and stability, each run in its own process; one directory "
                    "with the rows, logs, manifests and the report. Other flags go to every run.",
        epilog=MIXED_FLAGS)
    p.add_argument("--out_dir", default=DEFAULT_OUT_DIR,
                   help="the evaluation's directory; the same command again continues it "
                        "(default %s)" % DEFAULT_OUT_DIR)
    p.add_argument("--models", default=None, help="comma-separated models (default %s)"
                   % ",".join(d.models))
    p.add_argument("--modes", default=None, help="comma-separated execution modes among %s "
                   "(default all; tftrt, inference only, runs where TF-TRT runs and is left "
                   "out with one line elsewhere)" % ",".join(ev.MODES))
    p.add_argument("--quick", action="store_true",
                   help="a CPU-sized smoke run: %s (options given win)" % ", ".join(
                       "--%s=%s" % kv for kv in ev.QUICK.items()))
    p.add_argument("--mixed_precision", choices=("auto", "fp16", "bf16"), default=None,
                   help="mixed precision of the mixed modes; auto: fp16 (dynamic loss scaling) "
                        "when an NVIDIA GPU is visible, else bf16")
    p.add_argument("--tftrt_precision", choices=("FP32", "FP16", "INT8"), default=None,
                   help="--trt_mode of the tftrt mode's inference runs (default %s)"
                   % d.tftrt_precision)
    for name, what in (("train_batch_size", "training batch per device"),
                       ("train_steps", "timed training steps"),
                       ("warmup_steps", "warm-up steps before the timed ones"),
                       ("latency_steps", "timed inference steps at batch 1"),
                       ("repeats", "repeats of each measurement (--num_runs)"),
                       ("seed", "--tf_random_seed of every run"),
                       ("image_size", "input size in px; 0 = each model's default")):
        p.add_argument("--" + name, type=int, default=None,
                       help="%s (default %s)" % (what, getattr(d, name)))
    p.add_argument("--rerun_failed", action="store_true",
                   help="run again the configurations whose latest row is not ok")
    p.add_argument("--rerun_unstable", action="store_true",
                   help="run again the configurations whose repeats spread above the threshold")
    p.add_argument("--run_timeout_sec", type=float, default=None,
                   help="stop a run that takes longer than this (status error)")
    p.add_argument("--browser_check", choices=("auto", "yes", "no"), default="auto",
                   help="check report.html in headless Chromium and save a screenshot; auto: "
                        "when Chromium is installed (default)")
    return p


def _names(text: Optional[str], allowed: Optional[Sequence[str]], what: str) -> Optional[tuple]:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise errors.UsageError("--%s: no names given" % what)
    if len(set(names)) != len(names):
        raise errors.UsageError("--%s=%s: a name is repeated" % (what, text))
    bad = [n for n in names if allowed is not None and n not in allowed]
    if bad:
        raise errors.UsageError("--%s: %s is not one of %s" % (what, bad[0], ", ".join(allowed)))
    return names


def _check_models(models: Sequence[str]) -> None:
    """Models outside the method's five are looked up in the registry (imports TensorFlow)."""
    others = [m for m in models if m not in ev.MODELS]
    if others:
        from tfbench.models import catalog
        for name in others:
            catalog.get(name)


def method_from(args: argparse.Namespace) -> ev.Method:
    """The Method: the published defaults, then --quick's, then the options given."""
    values = dict(ev.QUICK) if args.quick else {}
    for field in dataclasses.fields(ev.Method):
        given = getattr(args, field.name, None)
        if given is not None:
            values[field.name] = given
    models = _names(args.models, None, "models")
    modes = _names(args.modes, ev.MODES, "modes")
    if models:
        _check_models(models)
        values["models"] = models
    if modes:
        values["modes"] = tuple(m for m in ev.MODES if m in modes)
    for name in ("train_batch_size", "train_steps", "latency_steps", "repeats"):
        if name in values and values[name] < 1:
            raise errors.UsageError("--%s must be >= 1, got %d" % (name, values[name]))
    for name in ("warmup_steps", "image_size"):
        if name in values and values[name] < 0:
            raise errors.UsageError("--%s must be >= 0, got %d" % (name, values[name]))
    return ev.Method(**values)


def build(argv: Sequence[str], child_cmd: Sequence[str] = DEFAULT_CHILD, stream=None,
          gpus: Optional[tuple[int, str]] = None, tensorrt_reader=None):
    """Parses argv; returns (options, Evaluation, the directory's record: stored, or new and not
    yet saved). Nothing runs and nothing is written. Evaluation.tftrt_left_out says why the
    tftrt mode is left out ('' when it runs or was not asked for)."""
    args, base = split_benchmark_flags(_parser(), argv)
    ev.check_flags(base)
    method = method_from(args)
    settings = ev.settings_record(method, args.quick, base)
    record = ev.check_settings(args.out_dir, settings)
    if record is None:   # a new evaluation; a resumed one keeps the precision it started with
        mixed, why = ev.resolve_mixed_precision(method.mixed_precision, base, gpus)
        record = {"settings": settings, "mixed_precision": mixed, "mixed_precision_why": why}
    auto_gpu = method.mixed_precision == "auto" and record["mixed_precision"] == "fp16"
    why_not = ev.tftrt_unavailable(base, gpus, tensorrt_reader) \
        if ev.TFTRT in method.modes else ""
    if why_not and method.modes == (ev.TFTRT,):
        raise errors.UsageError("--modes=tftrt: TF-TRT cannot run here (%s); it runs in NVIDIA's "
                                "TensorFlow container on a GPU" % why_not)
    evaluation = ev.Evaluation(method, base, args.out_dir, record["mixed_precision"], child_cmd,
                               stream, args.run_timeout_sec,
                               record["mixed_precision_why"] if auto_gpu else "",
                               tftrt=ev.TFTRT in method.modes and not why_not,
                               tftrt_left_out=why_not)
    evaluation.check()
    return args, evaluation, record


def run(argv: Sequence[str], child_cmd: Sequence[str] = DEFAULT_CHILD, stdout=None,
        stderr=None, gpus: Optional[tuple[int, str]] = None, tensorrt_reader=None) -> int:
    """The whole command; returns the exit code once the report is written: 0 when every
    configuration of the method has an ok latest row, 6 (errors.EXIT_INCOMPLETE) when some have
    not (one error line counts them; --rerun_failed runs them again), 1 when none has, 1 too
    when --browser_check=yes fails, 130/143 when interrupted."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr

    def say(text: str) -> None:
        print("tfbench evaluate: " + text, file=stderr)

    args, evaluation, record = build(argv, child_cmd, stderr, gpus, tensorrt_reader)
    out_dir = args.out_dir
    if "command" not in record:    # a new evaluation (build returns a stored one with it)
        rows = os.path.join(out_dir, ev.ROWS_FILE)
        if os.path.exists(rows):
            os.replace(rows, rows + ".replaced")
            say("%s held an evaluation with other settings and no successful run; starting "
                "over (its rows are in %s.replaced)" % (out_dir, rows))
        record = ev.save_settings(out_dir, record["settings"], record["mixed_precision"],
                                  record["mixed_precision_why"], ev.command_line(argv))
    todo = evaluation.pending(args.rerun_failed, args.rerun_unstable)
    total = len(evaluation.all_points)
    say("%s; mixed precision: %s (%s)%s" % (
        out_dir, record["mixed_precision"], record["mixed_precision_why"],
        "; quick mode" if args.quick else ""))
    if evaluation.tftrt_left_out:
        say("TF-TRT mode left out: %s" % evaluation.tftrt_left_out)
    if settings_of_flags(evaluation.sweep.config.base_flags).asks.devices > 1:
        say("training runs use --num_gpus or --gpu_indices; inference runs at batch 1 use one "
            "device")
    say("%d of %d runs to do (%d already finished)" % (len(todo), total, total - len(todo))
        if todo else "every run of the plan has finished; writing the report")
    code = errors.EXIT_OK
    interrupted: Optional[errors.Interrupted] = None
    try:
        if todo:
            evaluation.run(todo)
    except (KeyboardInterrupt, errors.Interrupted) as exc:
        interrupted = exc if isinstance(exc, errors.Interrupted) else \
            errors.Interrupted(signal.SIGINT)
        code = interrupted.exit_code
        say("interrupted; the same command continues it. Writing the report of the finished "
            "runs")
    rows_path = os.path.join(out_dir, ev.ROWS_FILE)
    have_rows = os.path.exists(rows_path)
    where = "rows in %s, logs in %s" % (rows_path, os.path.join(out_dir, "logs"))
    if have_rows:
        _, checked = _report(args, evaluation.method, record, stdout, say)
    if interrupted is not None:
        # As a run and a sweep end on a signal: one error line, after the report.
        print(errors.error_line("%s; the same command continues it%s" % (
            interrupted, "; " + where if have_rows else "")), file=stderr)
        return code
    if not have_rows:
        return code
    if code == errors.EXIT_OK:
        code, line = study_end(ev.statuses(out_dir, evaluation.all_points), "runs", where)
        if line:
            print(errors.error_line(line), file=stderr)
    if code == errors.EXIT_OK and checked is False and args.browser_check == "yes":
        code = errors.EXIT_RUN_ERROR
    return code


def _report(args, method: ev.Method, record: dict, stdout, say):
    """Writes the report, prints its first table and where it is, checks it in a browser;
    returns (the report, whether the check passed: None when skipped)."""
    from tfbench.report import evaluation_report, tables
    title = "tfbench evaluate%s" % (" --quick (CPU-sized smoke run: small images, few steps; "
                                    "not comparable with a full evaluation)" if args.quick else "")
    mixed, why = record["mixed_precision"], record["mixed_precision_why"]
    notes = ["Command: %s" % record["command"],
             "Mixed precision: %s%s, chosen %s" % (
                 mixed, " (training with dynamic loss scaling)" if mixed == "fp16" else "",
                 "by --mixed_precision" if why.startswith("--mixed") else
                 "automatically: %s" % why)]
    report = evaluation_report.build(args.out_dir, models=method.models, title=title,
                                     notes=notes)
    first = report.sections[0]
    runs = next(s.frame for s in report.sections if s.slug == "runs")
    unstable = int((runs["stable"] == "no").sum())
    if unstable:
        say("%d of %d configurations unstable (repeats spread above the threshold); the report "
            "says which and what to check, and --rerun_unstable runs them again"
            % (unstable, len(runs)))
    stdout.write("%s\n\n%s\n" % (first.title, tables.text(first.frame, first.columns)))
    stdout.write("rows:   %s\nreport: %s\n        %s\n" % (
        os.path.join(args.out_dir, ev.ROWS_FILE), report.markdown_path, report.html_path))
    checked, line = _browser_check(report.html_path, args.browser_check)
    stdout.write(line + "\n")
    stdout.flush()
    return report, checked


def _browser_check(html_path: str, mode: str) -> tuple[Optional[bool], str]:
    """(passed, or None when skipped; its one line)."""
    from tfbench.report import browser_check
    if mode == "no":
        return None, "browser check: skipped (--browser_check=no)"
    try:
        return browser_check.check_report(html_path, required=mode == "yes")
    except browser_check.BrowserUnavailable as exc:
        raise errors.UsageError("--browser_check=yes: %s" % exc) from None


def main(argv: list[str]) -> int:
    """Entry point for `tfbench evaluate ...` (argv without the subcommand)."""
    return guarded(run, argv)
