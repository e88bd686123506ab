"""`tfbench validate`: is every GPU of this host healthy, and which one is not; the
command-line layer over tfbench.validate (plan, run_plan, result, console).

    tfbench validate [--level=quick|standard|long] [--tolerance_pct=5] [--baseline=FILE|history]
                     [--min_efficiency_pct=80] [--soak_minutes=30] [--out_dir=DIR]
                     [benchmark flags: --model, --num_gpus, --batch_size, --precision, ...]

The plan and its estimate are printed first, a line as each step ends, then the verdict table
and the overall line. Exit 0 when every check passes (SKIP allowed), 7 when one warns and none
fails, 8 when one fails, 2 on bad input (nothing run), 130/143 when interrupted (validate.json
holds every check already run).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Any, Callable, Optional, Sequence

from tfbench import errors
from tfbench.children.process import DEFAULT_CHILD
from tfbench.cli.guard import MIXED_FLAGS, Parser, guarded, split_benchmark_flags
from tfbench.config import flagdefs
from tfbench.config.argv import settings_of_flags
from tfbench.validate import console, figures, options as validate_options, plan as plan_lib
from tfbench.validate.health_step import HEALTH_CHILD
from tfbench.validate.run_plan import Options, Validation


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="tfbench validate",
        description="Validate this host: each GPU's health facts (NVML), each device alone "
                    "(its training step, a matmul, a convolution, its gradients against its "
                    "peers'), the devices together (the all-reduce's bus bandwidth, the scaling "
                    "efficiency and where it goes), against a baseline or the published range. "
                    "Each check PASS, WARN, FAIL or SKIP with a reason code "
                    "(docs/validate.md). Other flags are benchmark flags for every child.",
        epilog=MIXED_FLAGS)
    validate_options.add_options(p, over_hosts=False)
    # One host's own: over hosts, launch writes every host's rows to its --csv_file.
    p.add_argument("--csv_file", default=flagdefs.BY_NAME["csv_file"].default,
                   help="also append the training children's rows to this CSV, as a run does "
                        "(default %(default)s; empty: only <out_dir>/children.csv)")
    return p


def _judge(args: argparse.Namespace, flags: Sequence[str], host: plan_lib.Host,
           say: Callable[[str], None]) -> tuple[figures.FigureJudge, Optional[str]]:
    """(the judge of the figures, the baseline as the plan names it)."""
    if not args.baseline:
        return figures.published(args.tolerance_pct, args.min_efficiency_pct), None
    if args.baseline == figures.HISTORY:
        from tfbench.history import baseline as history_baseline
        # The store the children add to (their --history), opened now: nothing runs when it
        # cannot be.
        store = history_baseline.open_store(settings_of_flags(flags).outputs.history)
        return figures.with_history(store, args.tolerance_pct, args.min_efficiency_pct, say), \
            "in the history at %s (this host's level, else the fleet's median)" % store.where()
    return figures.with_baseline(args.baseline, plan_lib.run_key(flags, host),
                                 args.tolerance_pct), args.baseline


def _gpus(first: int = 0, nvml_module: Any = None
          ) -> tuple[tuple[int, str], Optional[str]]:
    """(NVIDIA GPUs CUDA will number and why none, the name of the first GPU the run uses:
    CUDA's GPU `first`, not NVML's)."""
    from tfbench.measure import cuda_gpu_name, nvml
    count, why = nvml.cuda_gpus(nvml=nvml_module)
    name = cuda_gpu_name.cuda_gpu_name(first, nvml=nvml_module) if count else None
    return (count, why), name


def _first_gpu(flags: Sequence[str]) -> int:
    """The CUDA index of the run's first GPU: --gpu_indices' first, else 0."""
    indices = settings_of_flags(flags).asks.gpu_indices
    return indices[0] if indices else 0


def build(argv: Sequence[str], child_cmd: Sequence[str] = DEFAULT_CHILD,
          health_cmd: Sequence[str] = HEALTH_CHILD, stdout=None, stderr=None,
          gpus: Optional[tuple[tuple[int, str], Optional[str]]] = None
          ) -> tuple[argparse.Namespace, Validation, str]:
    """Parses argv into a ready Validation (nothing run, nothing written) and a notice ('' or
    one line to say before the plan)."""
    args, flags = split_benchmark_flags(_parser(), argv)
    validate_options.check(args, over_hosts=False)
    (count, why), name = gpus if gpus is not None else _gpus(_first_gpu(flags))
    every, added = plan_lib.benchmark_flags(args.level, flags, count)
    host, notice = plan_lib.host_for(every, (count, why), name)
    stderr = stderr or sys.stderr

    def say(text: str) -> None:
        print(text, file=stderr)
    judge, against = _judge(args, every, host, say)
    out_dir = args.out_dir or "tfbench_validate_" + datetime.datetime.now(
        datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    plan = plan_lib.build(args.level, every, host, out_dir, child_cmd, health_cmd,
                          args.soak_minutes, added, against)
    options = Options(args.tolerance_pct, args.min_efficiency_pct, args.baseline,
                      args.csv_file or None, args.step_timeout_sec)
    validation = Validation(plan, out_dir, options, judge, stdout, say=say)
    return args, validation, notice


def run(argv: Sequence[str], child_cmd: Sequence[str] = DEFAULT_CHILD,
        health_cmd: Sequence[str] = HEALTH_CHILD, stdout=None, stderr=None,
        gpus: Optional[tuple[tuple[int, str], Optional[str]]] = None) -> int:
    """The whole command; returns its exit code (see the module)."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    args, validation, notice = build(argv, child_cmd, health_cmd, stdout, stderr, gpus)
    validation.prepare()   # an --out_dir holding a validation is refused: nothing runs
    if notice:
        print("tfbench validate: " + notice, file=stderr)
    stdout.write("\n".join(validation.plan.lines()) + "\n\n")
    stdout.flush()
    try:
        res = validation.run()
    except (KeyboardInterrupt, errors.Interrupted):
        res = validation.result
        print("\nvalidate interrupted; every check already run is in %s" % res.json_path,
              file=stderr)
    stdout.write("\n" + "\n".join(console.table_lines(res.rows)) + "\n\n")
    stdout.write(console.overall_line(res.rows) + "\n")
    stdout.write("results: %s, %s; logs in %s\n" % (res.json_path, res.csv_path,
                                                   os.path.join(res.out_dir, "logs")))
    from tfbench.history import location, record
    line = record.write_validation(location.resolve(None), res.meta,
                                   [c.to_json() for c in res.rows], res.json_path)
    if line:
        stdout.write(line + "\n")
    stdout.flush()
    return res.final_exit_code()


def main(argv: list[str]) -> int:
    """Entry point for `tfbench validate ...` (argv without the subcommand)."""
    import signal
    return guarded(run, argv, (signal.SIGINT, signal.SIGTERM))
