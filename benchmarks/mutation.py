"""Mutation score of the modules that compute or print tfbench's figures (mutmut 3).

    pip install -r benchmarks/requirements-mutation.txt
    python benchmarks/mutation.py --list                 # the targets and their test files
    python benchmarks/mutation.py stats                  # one target
    python benchmarks/mutation.py all --survivors        # every target, one after another
    python benchmarks/mutation.py stats --root /tmp/old  # another checkout (e.g. a git archive)

Each target mutates one module (or some functions of it) and runs only the fast test files that
check it, in a copy of the checkout under a temporary directory (mutmut writes its `mutants/`
copy there, never into the checkout), one mutant at a time by default (--max_children): the
machine is shared. Not a test, not in CI: every target but timed_loop takes about half an hour
on a 2-core machine; timed_loop (whole benchmarks on a fake clock, ~190 mutants) 1-2 hours.

The score is killed / all mutants; a mutant "no tests" (no selected test runs its function) counts
as a survivor, a timeout as killed. --survivors prints each survivor's diff (mutmut show).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name -> (module file, mutant name patterns (empty: every function), test files).
# Test files that do not exist in the checkout under test are left out (older checkouts).
FIGURE_TESTS = ["tests/output/test_console.py", "tests/figures/test_table.py",
                "tests/measure/test_stats.py"]
TARGETS: dict[str, tuple[str, list[str], list[str]]] = {
    "stats": ("tfbench/measure/stats.py", [],
              ["tests/measure/test_stats.py", "tests/output/test_classic_log.py"]),
    "cuda_visible": ("tfbench/measure/cuda_visible.py", [],
                     ["tests/measure/test_cuda_visible.py", "tests/measure/test_nvml.py",
                      "tests/sweep/test_evaluation.py"]),
    # The NVML side of the CUDA_VISIBLE_DEVICES reader (cuda_visible.py holds the rest).
    "nvml_visible": ("tfbench/measure/nvml.py",
                     ["*parse_visible*", "*_resolve_entry*", "*_lookup*", "*cuda_device_count*",
                      "*resolve_handles*", "*_by_uuid*", "*_cuda_order*", "*_as_cuda_sees*"],
                     ["tests/measure/test_cuda_visible.py", "tests/measure/test_nvml.py",
                      "tests/sweep/test_evaluation.py"]),
    "memory": ("tfbench/measure/memory.py", [], ["tests/measure/test_memory.py"]),
    "estimate": ("tfbench/measure/estimate.py", [], ["tests/measure/test_estimate.py"]),
    "console": ("tfbench/output/console.py", [],
                FIGURE_TESTS + ["tests/monitors/test_nvml.py", "tests/monitors/test_host.py",
                                "tests/measure/test_estimate.py", "tests/measure/test_memory.py",
                                "tests/data/test_diagnose.py"]),
    "classic_log": ("tfbench/output/classic_log.py", [],
                    ["tests/output/test_classic_log.py", "tests/figures/test_table.py"]),
    "csv_out": ("tfbench/output/csv_out.py", [],
                ["tests/output/test_csv_out.py", "tests/test_promises.py",
                 "tests/figures/test_table.py"]),
    "benchmark_logger": ("tfbench/output/benchmark_logger.py", [],
                         ["tests/output/test_benchmark_logger.py"]),
    "output_environment": ("tfbench/output/environment.py", [],
                           ["tests/output/test_environment.py",
                            "tests/measure/test_environment.py"]),
    "studies": ("tfbench/report/studies.py", [], ["tests/report/test_studies.py"]),
    # The runner's timed loop (TrainRunner._timed_loop), whole benchmarks in this process on a
    # fake clock: the tests that run the command in a child process are not seen by mutmut's
    # trampolines. Each mutant costs ~30 s of TensorFlow: the few tests that time the loop.
    "timed_loop": ("tfbench/engine/train.py", ["*TrainRunner*ǁ_timed_loop__mutmut*"],
                   ["tests/e2e/test_figures_recomputed.py::"
                    "test_repeats_report_the_median_for_odd_and_even_counts",
                    "tests/e2e/test_figures_recomputed.py::"
                    "test_ewma_step_lines_and_evaluations_outside_the_timed_wall"] + [
                       "tests/engine/test_meter.py::" + t for t in (
                           "test_step_images_per_sec_covers_every_timed_step_of_the_last_repeat",
                           "test_power_and_energy_cover_the_timed_repeats_not_the_cooldown",
                           "test_a_nan_in_the_second_repeat_keeps_the_first_repeats_figure")]),
}
# TensorFlow deadlocks in a child forked after it ran: targets whose tests run TensorFlow fork
# each mutant from a server that has only imported it.
TENSORFLOW_TARGETS = {"timed_loop"}
PRELOAD = "numpy\ntensorflow\nkeras\n"
COPY = ["tfbench", "tests", "docs", "flags", "scripts", "setup.py"]


def _setup_cfg(module: str, tests: list[str], tensorflow: bool) -> str:
    lines = ["[mutmut]", "source_paths=tfbench", "only_mutate=%s" % module,
             "pytest_add_cli_args_test_selection=" + "\n    ".join(tests),
             "pytest_add_cli_args=-p\n    no:cacheprovider",
             "also_copy=docs\n    flags\n    scripts\n    setup.py"]
    if tensorflow:
        lines += ["process_isolation=forkserver", "forkserver_warmup=import",
                  "preload_modules_file=preload.txt"]
    return "\n".join(lines) + "\n"


def run_target(name: str, root: str, mutmut: str, max_children: int, survivors: bool,
               keep: bool, sample: int = 1) -> dict:
    module, patterns, wanted = TARGETS[name]
    if sample > 1:
        # Every sample-th mutant (mutmut numbers each function's mutants from 1).
        patterns = [p.rstrip("*") + "_%d" % i for p in patterns or ["*"]
                    for i in range(1, 1000, sample)]
    tests = [t for t in wanted if os.path.exists(os.path.join(root, t.split("::")[0]))]
    work = tempfile.mkdtemp(prefix="tfbench-mutation-%s-" % name)
    try:
        for item in COPY:
            source = os.path.join(root, item)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(work, item),
                                ignore=shutil.ignore_patterns("__pycache__"))
            elif os.path.exists(source):
                shutil.copy(source, work)
        with open(os.path.join(work, "setup.cfg"), "w") as handle:
            handle.write(_setup_cfg(module, tests, name in TENSORFLOW_TARGETS))
        with open(os.path.join(work, "preload.txt"), "w") as handle:
            handle.write(PRELOAD)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        started = time.time()
        with open(os.path.join(work, "mutmut-run.log"), "w") as log:
            subprocess.run([mutmut, "run", "--max-children", str(max_children)] + patterns,
                           cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
        results = subprocess.run([mutmut, "results", "--all", "true"], cwd=work, env=env,
                                 capture_output=True, text=True).stdout
        status = dict(re.findall(r"^\s*(\S+__mutmut_\d+): (.+)$", results, re.M))
        if patterns:
            import fnmatch
            status = {k: v for k, v in status.items()
                      if any(fnmatch.fnmatch(k, p) for p in patterns)}
        counts = collections.Counter(status.values())
        total = len(status)
        killed = counts["killed"] + counts["timeout"]
        report = {"target": name, "module": module, "tests": tests, "total": total,
                  "killed": killed, "counts": dict(counts),
                  "score": killed / total if total else None,
                  "minutes": (time.time() - started) / 60.0}
        print("%s (%s): %d mutants, %d killed, %s; score %s; %.1f min; tests: %s" % (
            name, module, total, killed,
            ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items()) if k != "killed"),
            "%.1f%%" % (100.0 * report["score"]) if total else "n/a", report["minutes"],
            " ".join(tests)), flush=True)
        if survivors:
            alive = sorted((m for m, v in status.items() if v in ("survived", "no tests")),
                           key=_order)
            diffs = _diffs(mutmut, work, env, alive)
            for mutant in alive:
                print("--- %s: %s\n%s" % (mutant, status[mutant], _trim(diffs.get(mutant, ""))),
                      flush=True)
        return report
    finally:
        if keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


# `mutmut show` for many mutants in one process (one `mutmut show` each takes seconds).
_SHOW = """
import sys
from mutmut.__main__ import find_mutant, get_diff_for_mutant
for name in sys.argv[1:]:
    print("@@@mutant " + name)
    print(get_diff_for_mutant(name, path=find_mutant(name).path))
"""


def _diffs(mutmut: str, work: str, env: dict, names: list[str]) -> dict[str, str]:
    """{mutant: its diff}, through the interpreter mutmut is installed in."""
    if not names:
        return {}
    with open(mutmut) as handle:
        first = handle.readline()
    python = first[2:].strip() if first.startswith("#!") else sys.executable
    out = subprocess.run([python, "-c", _SHOW] + names, cwd=work, env=env,
                         capture_output=True, text=True).stdout
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] if "\n" in part else ""
            for part in out.split("@@@mutant ")[1:]}


def _order(mutant: str) -> tuple[str, int]:
    base, number = mutant.rsplit("__mutmut_", 1)
    return base, int(number)


def _trim(diff: str) -> str:
    """The changed lines of a mutant's diff (mutmut show prints the whole function)."""
    return "\n".join(l for l in diff.splitlines()
                     if l.startswith(("+", "-")) and not l.startswith(("+++", "---")))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="*", help="target names, or all")
    parser.add_argument("--list", action="store_true", help="print the targets and exit")
    parser.add_argument("--root", default=ROOT, help="the checkout to mutate (default: this)")
    parser.add_argument("--mutmut", default=shutil.which("mutmut") or "mutmut")
    parser.add_argument("--max_children", type=int, default=1)
    parser.add_argument("--survivors", action="store_true", help="print surviving mutants")
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    parser.add_argument("--sample", type=int, default=1,
                        help="run every N-th mutant only (an estimate of the score)")
    args = parser.parse_args(argv[1:])
    if args.list or not args.targets:
        for name, (module, patterns, tests) in TARGETS.items():
            print("%-18s %s%s\n%18s tests: %s" % (name, module, " " + " ".join(patterns)
                                                   if patterns else "", "", " ".join(tests)))
        return 0
    names = list(TARGETS) if args.targets == ["all"] else args.targets
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        print("mutation.py: error: unknown target(s) %s (--list)" % ", ".join(unknown),
              file=sys.stderr)
        return 2
    reports = [run_target(n, os.path.abspath(args.root), args.mutmut, args.max_children,
                          args.survivors, args.keep, args.sample) for n in names]
    total = sum(r["total"] for r in reports)
    killed = sum(r["killed"] for r in reports)
    if len(reports) > 1 and total:
        print("all: %d mutants, %d killed; score %.1f%%" % (total, killed, 100.0 * killed / total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
