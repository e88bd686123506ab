"""`tfbench launch`: the command-line layer over tfbench.launch.

    tfbench launch --hosts=h1,h2,... [--rsh="ssh -o BatchMode=yes"] [--remote_cmd=tfbench]
                   [--port=2222] [--sweep_hosts=1,2,4] [--nccl_debug] [--out_dir=DIR]
                   -- BENCHMARK FLAGS
    tfbench launch --hosts=h1,h2,... [options] -- validate [VALIDATE OPTIONS] [BENCHMARK FLAGS]

Everything after `--` goes to every task (--flagfile is read here, so hosts need no copy);
tfbench launch adds --job_name, --worker_hosts, --task_index and the task's --csv_file itself.
With `validate` first after `--`, the hosts are validated (tfbench.launch.validate_hosts): the
validate options are those of tfbench/validate/options.py.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
from typing import Optional, Sequence, TextIO

from tfbench import errors
from tfbench.validate import figures, options as validate_options
from tfbench.cli.guard import (FLAGS_AFTER_SEPARATOR, MIXED_FLAGS, Parser, guarded,
                               split_benchmark_flags)
from tfbench.config import presets
from tfbench.config.argv import settings_of_flags, strip_flags
from tfbench.launch import remote as launch_remote, run as launch, validate_hosts


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="tfbench launch",
        usage="tfbench launch --hosts=H1,H2,... [options] -- BENCHMARK FLAGS",
        description="Run one benchmark task per host through a remote shell (ssh), as one "
                    "MultiWorkerMirroredStrategy cluster: the chief's classic log on stdout, "
                    "each host's log in its own file, every host's CSV row in the local CSV. "
                    "With `validate` first after --, validate every host alone, then the hosts "
                    "together (tfbench launch -- validate --help).",
        epilog=FLAGS_AFTER_SEPARATOR)
    p.add_argument("--hosts", required=True, metavar="[USER@]HOST[:PORT],...",
                   help="one task per entry, the first the chief; PORT is the task's "
                        "TensorFlow port (default --port; a host named again gets the next, "
                        "and --num_gpus GPUs of its own)")
    p.add_argument("--rsh", default=launch_remote.DEFAULT_RSH,
                   help="remote shell taking HOST COMMAND as ssh does (default %(default)r); "
                        "no -t: the tasks stop when its stdin closes. scripts/local_rsh.sh (a "
                        "preset, found from any directory) runs 127.0.0.1 hosts on this machine")
    p.add_argument("--remote_cmd", default=launch_remote.DEFAULT_REMOTE_CMD,
                   help="how a host starts tfbench, a shell fragment such as "
                        "'cd bench && venv/bin/tfbench' (default %(default)r)")
    p.add_argument("--port", type=int, default=launch_remote.DEFAULT_PORT,
                   help="TensorFlow port of hosts given without one (default %(default)s)")
    p.add_argument("--sweep_hosts", default=None, metavar="N1,N2,...",
                   help="scaling series: run on the first N hosts for each N, then print the "
                        "efficiency table (devices x workers)")
    p.add_argument("--nccl_debug", action="store_true",
                   help="have NCCL log its transport on every host (NCCL_DEBUG=INFO, to a file "
                        "the launcher collects) and state the interconnect in the report")
    p.add_argument("--out_dir", default=None,
                   help="host logs, rows.csv (sweep.csv and the tables with --sweep_hosts) "
                        "(default tfbench_launch_<UTC time>)")
    return p


def build(argv: Sequence[str]) -> tuple[argparse.Namespace, launch.LaunchConfig]:
    """Parses and checks everything; no process is started. UsageError on bad input."""
    args, flags = split_benchmark_flags(_parser(), argv, after_separator=True)
    return args, _config(args, flags, argv)


def _config(args: argparse.Namespace, flags: list[str],
            argv: Sequence[str]) -> launch.LaunchConfig:
    """The launch of `flags` on args.hosts, every check done; UsageError on bad input."""
    given = {t[2:].split("=", 1)[0] for t in flags if t.startswith("--")}
    taken = [name for name in launch.CLUSTER_FLAGS if name in given]
    if taken:
        raise errors.UsageError("--%s is set by tfbench launch for every task (one task per "
                                "--hosts entry); leave it out" % taken[0])
    hosts = launch_remote.parse_hosts(args.hosts, args.port)
    p = settings_of_flags(launch_remote.task_flags(flags, hosts, 0))
    if p.devices.variable_update == "horovod":
        raise errors.UsageError("--variable_update=horovod starts its processes with "
                                "horovodrun or mpirun, not tfbench launch")
    if p.is_explicit("variable_update") and p.devices.variable_update not in \
            launch.MULTI_WORKER_VALUES:
        raise errors.UsageError("tfbench launch runs MultiWorkerMirroredStrategy: use "
                                "--variable_update=%s (or leave it out), not %s"
                                % (", ".join(launch.MULTI_WORKER_VALUES),
                                   p.devices.variable_update))
    gpus_per_task = None if p.asks.cpu else p.asks.devices
    machines = [h.machine for h in hosts]
    shared = sorted({m for m in machines if machines.count(m) > 1})
    if shared and p.devices.gpu_indices and gpus_per_task:
        raise errors.UsageError("--gpu_indices=%s would give every task on %s the same GPUs; "
                                "leave it out: tfbench launch gives each task on a host named "
                                "several times --num_gpus GPUs of its own"
                                % (p.devices.gpu_indices, ", ".join(shared)))
    rsh = shlex.split(args.rsh)
    if rsh and shutil.which(rsh[0]) is None and presets.find(rsh[0]):
        rsh[0] = os.path.abspath(presets.find(rsh[0]))   # scripts/local_rsh.sh from anywhere
    if not rsh or shutil.which(rsh[0]) is None:
        raise errors.UsageError("--rsh=%s: %s" % (args.rsh, "empty" if not rsh else
                                                  "%s not found" % rsh[0]))
    bad = _ssh_stdin_options(rsh)
    if bad:
        raise errors.UsageError("--rsh=%s: ssh %s would take the connection's stdin away or give "
                                "the task a terminal, and tfbench launch stops a host's task "
                                "when that stdin closes: leave out -n, -f and -t" % (args.rsh, bad))
    if not args.remote_cmd.strip():
        raise errors.UsageError("--remote_cmd is empty")
    if args.sweep_hosts is not None:
        launch.parse_counts(args.sweep_hosts, len(hosts))
    return launch.LaunchConfig(
        hosts=hosts, flags=strip_flags(flags, ["csv_file"]), rsh=rsh,
        remote_cmd=args.remote_cmd.strip(), out_dir=args.out_dir or launch.default_out_dir(),
        csv_file=p.outputs.csv_file or "", cluster_timeout=float(p.cluster.cluster_timeout_secs),
        nccl_debug=args.nccl_debug, gpus_per_task=gpus_per_task,
        command=shlex.join(["tfbench", "launch"] + list(argv)))


def _validate_at(argv: Sequence[str]) -> Optional[int]:
    """Where `validate` is, when it is the first word after `--`."""
    argv = list(argv)
    if "--" not in argv:
        return None
    at = argv.index("--") + 1
    return at if argv[at:at + 1] == ["validate"] else None


def _validate_parser() -> argparse.ArgumentParser:
    p = Parser(prog="tfbench launch -- validate",
               usage="tfbench launch --hosts=H1,H2,... [options] -- validate [options] "
                     "[BENCHMARK FLAGS]",
               description="Validate every host alone, then the hosts together, then find the "
                           "host or link that drags the ring (docs/validate.md).",
               epilog=MIXED_FLAGS)
    validate_options.add_options(p, over_hosts=True)
    return p


# A baseline travels inside every host's command line, one argument of the remote shell.
MAX_BASELINE_BYTES = 64 * 1024


def _read_baseline(path: str) -> str:
    size = os.path.getsize(path)
    if size > MAX_BASELINE_BYTES:
        raise errors.UsageError("--baseline=%s is %.0f KiB: over several hosts it travels in "
                                "each host's command, which takes at most %d KiB; give the "
                                "validate.json of one earlier validation"
                                % (path, size / 1024.0, MAX_BASELINE_BYTES // 1024))
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.UsageError("--baseline=%s: not a tfbench result (%s)"
                                % (path, exc.strerror if isinstance(exc, OSError)
                                   else "not text")) from None


def build_validate(argv: Sequence[str]
                   ) -> tuple[launch.LaunchConfig, validate_hosts.ValidateOptions]:
    """`tfbench launch ... -- validate ...` parsed and checked; no process is started."""
    argv = list(argv)
    at = _validate_at(argv)
    assert at is not None
    args, _ = split_benchmark_flags(_parser(), argv[:at - 1], after_separator=True)
    if args.sweep_hosts is not None:
        raise errors.UsageError("--sweep_hosts runs a scaling series; a validation runs its own "
                                "plan over the hosts: leave one of them out")
    vargs, flags = split_benchmark_flags(_validate_parser(), argv[at + 1:])
    validate_options.check(vargs, over_hosts=True)
    cfg = _config(args, flags, argv)
    machines = [h.machine for h in cfg.hosts]
    shared = sorted({m for m in machines if machines.count(m) > 1})
    if shared and cfg.gpus_per_task:
        raise errors.UsageError("a validation checks each host's GPUs: --hosts names %s more "
                                "than once; name each host once" % ", ".join(shared))
    timeout = vargs.host_timeout_secs or validate_hosts.default_host_timeout(
        vargs.level, vargs.soak_minutes)
    return cfg, validate_hosts.ValidateOptions(
        level=vargs.level, host_args=validate_options.host_args(vargs), host_timeout=timeout,
        tolerance_pct=vargs.tolerance_pct,
        min_efficiency_pct=(figures.DEFAULT_MIN_EFFICIENCY_PCT
                            if vargs.min_efficiency_pct is None else vargs.min_efficiency_pct),
        baseline=vargs.baseline,
        baseline_text=_read_baseline(vargs.baseline) if vargs.baseline else None)


def run(argv: Sequence[str], stdout: Optional[TextIO] = None,
        stderr: Optional[TextIO] = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if _validate_at(argv) is not None:
        cfg, opts = build_validate(argv)
        return validate_hosts.validate_hosts(cfg, opts, stdout, stderr)
    args, cfg = build(argv)
    if args.sweep_hosts is not None:
        counts = launch.parse_counts(args.sweep_hosts, len(cfg.hosts))
        return launch.launch_series(cfg, counts, stdout, stderr)
    return launch.launch(cfg, stdout, stderr)


# ssh options that take an argument (getopt: the rest of the token, or the next one).
_SSH_WITH_ARGUMENT = set("BbcDEeFIiJLlmOoPpQRSWw")


def _ssh_stdin_options(rsh: list[str]) -> str:
    """The first of ssh's -n, -f, -t in `rsh` ('' if none, or if it is not ssh): -n and -f
    take stdin away, so every host's watcher would stop its task at once; -t gives the task a
    terminal, whose SIGHUP replaces the watcher's stop."""
    if os.path.basename(rsh[0]) != "ssh":
        return ""
    args = iter(rsh[1:])
    for arg in args:
        if not arg.startswith("-") or arg == "--":
            break   # the host, or the end of the options
        for i, char in enumerate(arg[1:]):
            if char in "nft":
                return "-" + char
            if char in _SSH_WITH_ARGUMENT:
                if i == len(arg) - 2:
                    next(args, None)   # its argument is the next token
                break
    return ""


def main(argv: list[str]) -> int:
    """Entry point for `tfbench launch ...` (argv without the subcommand)."""
    return guarded(run, argv, (signal.SIGINT, signal.SIGTERM))
