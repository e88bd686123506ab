"""`tfbench allreduce`: the gradient all-reduce of a run, timed alone (in the spirit of NCCL's
all_reduce_perf; the probe itself is tfbench.engine.allreduce_run.allreduce_probe_run).

    tfbench allreduce [--min_bytes=1K] [--max_bytes=1G on GPUs, 1M on CPUs] [--step_factor=4]
                      [--repeats=5] [--warmup=1] [--json_file=FILE] [BENCHMARK FLAGS: --model,
                      --num_gpus, --variable_update, --all_reduce_spec, --precision,
                      --gradient_repacking, --worker_hosts, ...]

The benchmark flags build the strategy a run of them builds; the model's gradient set is
reduced first, then one tensor per size.
"""

from __future__ import annotations

import re
import sys
from typing import Optional, TextIO

from tfbench.cli.guard import MIXED_FLAGS, Parser, flush_native_stdout, guarded, \
    split_benchmark_flags
from tfbench.config.argv import settings_of_flags
from tfbench.errors import UsageError

# The probe's (tfbench.distribute.allreduce_probe: PER_SYNC, REPEATS, WARMUP), kept here so that
# the help and a bad flag need no TensorFlow; tests/cli/test_allreduce.py holds them equal.
PER_SYNC, REPEATS, WARMUP = 10, 5, 1

_UNITS = {"": 1, "B": 1, "K": 2 ** 10, "KB": 2 ** 10, "KIB": 2 ** 10, "M": 2 ** 20,
          "MB": 2 ** 20, "MIB": 2 ** 20, "G": 2 ** 30, "GB": 2 ** 30, "GIB": 2 ** 30}


def parse_bytes(text: str, name: str) -> int:
    """'64M' -> 67108864 (K, M, G: powers of 1024, as all_reduce_perf reads them)."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in _UNITS:
        raise UsageError("--%s=%s: give a size such as 8, 1K, 64M or 1G" % (name, text))
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def _parser() -> Parser:
    p = Parser(
        prog="tfbench allreduce",
        description="Time the gradient all-reduce of a run alone: the strategy, reduction, "
                    "transfer dtype and packing the same benchmark flags run with reduce the "
                    "model's gradients, then one tensor per size. Each call runs %d "
                    "all-reduces back to back and waits for them once; time is the median "
                    "call's / %d, over --repeats calls after --warmup; algbw = bytes / time; "
                    "busbw = algbw x 2(n-1)/n for n ranks of the whole cluster (NCCL tests' "
                    "definitions). Other flags are benchmark "
                    "flags (--model, --num_gpus, --device, --variable_update, "
                    "--all_reduce_spec, --precision, --worker_hosts, ...)."
                    % (PER_SYNC, PER_SYNC),
        epilog=MIXED_FLAGS)
    p.add_argument("--min_bytes", default="1K", help="smallest size (default %(default)s)")
    p.add_argument("--max_bytes", default="",
                   help="largest size; 0 probes the model's gradients only (default 1G on "
                        "GPUs, sizes a GPU has no room for left out with a notice; 1M on CPU "
                        "devices)")
    p.add_argument("--step_factor", type=int, default=4,
                   help="each size is the previous times this (default %(default)s)")
    p.add_argument("--repeats", type=int, default=REPEATS,
                   help="timed calls per size, each of %d all-reduces (default %%(default)s)"
                        % PER_SYNC)
    p.add_argument("--warmup", type=int, default=WARMUP,
                   help="untimed calls first (default %(default)s)")
    p.add_argument("--json_file", default="",
                   help="also write the table and the links as JSON to this file (tfbench "
                        "validate reads it)")
    return p


def _number(value: Optional[float], fmt: str) -> str:
    return "-" if value is None else fmt % value


def table_lines(probe) -> list[str]:
    """The probe's table, one line per tensor set."""
    head = "%-22s %11s %6s %-9s %10s %13s %13s %10s" % (
        "tensors", "size", "count", "dtype", "time (ms)", "algbw (GB/s)", "busbw (GB/s)",
        "spread (%)")
    lines = [head]
    from tfbench.distribute.allreduce_probe import human_bytes
    for t in probe.timings:
        lines.append("%-22s %11s %6d %-9s %10.3f %13s %13s %10s" % (
            t.label, human_bytes(t.nbytes), t.count, t.dtype, t.time_ms,
            _number(t.algbw_gbs, "%.4g"), _number(t.busbw_gbs, "%.4g"),
            _number(t.summary.get("spread_pct"), "%.1f")))
    return lines


def run(argv: list[str], stdout: Optional[TextIO] = None) -> int:
    stdout = stdout or sys.stdout
    args, rest = split_benchmark_flags(_parser(), argv)
    min_bytes = parse_bytes(args.min_bytes, "min_bytes")
    # None: the device's (allreduce_run.VALIDATE_SIZES), known once the run's devices are.
    max_bytes = parse_bytes(args.max_bytes, "max_bytes") if args.max_bytes else None
    if max_bytes != 0 and (min_bytes < 1 or args.step_factor < 2
                           or (max_bytes is not None and max_bytes < min_bytes)):
        raise UsageError("sizes: give 1 <= --min_bytes <= --max_bytes and --step_factor >= 2")
    if args.repeats < 1 or args.warmup < 0:
        raise UsageError("--repeats must be >= 1 and --warmup >= 0")
    p = settings_of_flags(rest)
    from tfbench.engine import lean_import
    lean_import.import_frameworks()
    from tfbench.engine import actions, allreduce_run
    probe = allreduce_run.allreduce_probe_run(p, actions.checked_facts(p), allreduce_run.Sizes(
        min_bytes, max_bytes, args.step_factor, args.repeats, args.warmup))
    out = ["%s" % notice for notice in probe.notices]
    out.append("All-reduce probe: %d ranks (%d worker%s); %s" % (
        probe.ranks, probe.workers, "" if probe.workers == 1 else "s", probe.reduction))
    if probe.link:   # the link's description ends with what decides the expectation
        out.append("Links: %s%s" % (probe.link, ": up to %.3g GB/s" % probe.expected_busbw_gbs
                                    if probe.expected_busbw_gbs else ""))
    out.append("time: one all-reduce's, a call of %d back to back / %d (median of %d calls "
               "after %d warm-up); algbw = size / time; busbw = algbw x 2(n-1)/n, n = %d "
               "(GB = 10^9 bytes, as NCCL's tests)"
               % (PER_SYNC, PER_SYNC, args.repeats, args.warmup, probe.ranks))
    out += table_lines(probe)
    if args.json_file:
        import json
        with open(args.json_file, "w") as handle:
            json.dump(probe.to_json(), handle, indent=1)
    flush_native_stdout()   # NCCL's own stdout lines (a user's NCCL_DEBUG) above the table
    stdout.write("\n".join(out) + "\n")
    stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    """Entry point for `tfbench allreduce ...` (argv without the subcommand)."""
    return guarded(run, argv)
