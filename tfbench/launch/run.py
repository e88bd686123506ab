"""`tfbench launch`: several hosts in one command, one benchmark task per host over ssh.

`tfbench launch --hosts=h1,h2 -- FLAGS` runs, on host i, `<remote_cmd> FLAGS --job_name=worker
--worker_hosts=h1:port,h2:port --task_index=i` (tfbench.launch_remote), i.e. one
MultiWorkerMirroredStrategy cluster whose chief (task 0) prints the classic log on this
terminal, unchanged, while every host's log goes to its own file.

Before anything starts every host answers with its versions; a host that cannot be reached or
runs other versions than the chief is one error line naming it, and nothing runs. During the run,
the first task to fail is named in one line; the others get a few seconds to end by themselves
(TensorFlow finds a dead peer at once and a hung one within its 10 s heartbeat) and are then
stopped, all within --cluster_timeout_secs. SIGINT/SIGTERM stop every task the same way. Every
task's row (its own, or one written for it when it could not) goes to the local CSV.

`--sweep_hosts=1,2,4` runs that on the first N hosts for each N and prints the scaling
efficiency table (report.studies) with the interconnect each point saw (tfbench.nccl_log).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import shlex
import signal
import threading
import time
from typing import Optional, Sequence, TextIO

from tfbench import errors
from tfbench.measure import nccl_log
from tfbench.output import classic_log, csv_out
from tfbench.sweep import child as sweep_child
from tfbench.launch.remote import (DEFAULT_REMOTE_CMD, Host, RemoteTask, ask_versions,
                                   remote_script, rsh_argv, task_flags, version_problems)

# Flags tfbench launch sets for every task itself.
CLUSTER_FLAGS = ("job_name", "worker_hosts", "task_index", "ps_hosts", "controller_host")
MULTI_WORKER_VALUES = ("collective_all_reduce", "distributed_all_reduce",
                       "distributed_replicated")


def parse_counts(text: str, num_hosts: int) -> list[int]:
    """--sweep_hosts '1,2,4' -> [1, 2, 4]: the first N hosts of --hosts for each point."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise errors.UsageError("--sweep_hosts=%s: give host counts such as 1,2,4" % text) \
            from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise errors.UsageError("--sweep_hosts=%s: give distinct host counts >= 1" % text)
    if max(counts) > num_hosts:
        raise errors.UsageError("--sweep_hosts=%s needs %d hosts; --hosts names %d"
                                % (text, max(counts), num_hosts))
    return counts


# --- the chief's console -----------------------------------------------------------------------

class ChiefConsole:
    """Prints the chief's stdout and stderr lines as they come, holding back a trailing legacy
    footer (dashes, total images/sec, dashes), so that the launcher's own lines can go before it
    and nothing follows it."""

    def __init__(self, stdout: TextIO, stderr: TextIO):
        self.stdout, self.stderr = stdout, stderr
        self.held: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def _footer_prefix(lines: list[str]) -> bool:
        pattern = [lambda s: s == classic_log.DASHES,
                   lambda s: s.startswith("total images/sec: "),
                   lambda s: s == classic_log.DASHES]
        return len(lines) <= 3 and all(p(s) for p, s in zip(pattern, lines))

    def out(self, line: str) -> None:
        with self._lock:
            if self.held or line == classic_log.DASHES:
                self.held.append(line)
                if self._footer_prefix(self.held):
                    return
                lines, self.held = self.held, []
                if lines[-1] == classic_log.DASHES:   # a new candidate footer starts here
                    lines, self.held = lines[:-1], [lines[-1]]
                for held in lines:
                    self.stdout.write(held + "\n")
            else:
                self.stdout.write(line + "\n")
            self.stdout.flush()

    def err(self, line: str) -> None:
        with self._lock:
            self.stderr.write(line + "\n")
            self.stderr.flush()

    def finish(self, own_lines: Sequence[str], error: str = "") -> None:
        """tfbench launch's lines, then the held footer; an error line last, on stderr."""
        with self._lock:
            for line in own_lines:
                self.stdout.write(line + "\n")
            for line in self.held:
                self.stdout.write(line + "\n")
            self.held = []
            self.stdout.flush()
            if error:
                self.stderr.write("tfbench launch: error: %s\n" % error)
                self.stderr.flush()


# --- one launch ------------------------------------------------------------------------------

@dataclasses.dataclass
class LaunchConfig:
    hosts: list[Host]
    flags: list[str]                 # benchmark flags every task gets (no cluster flags, no csv)
    rsh: list[str]
    remote_cmd: str = DEFAULT_REMOTE_CMD
    out_dir: str = "tfbench_launch"
    csv_file: str = ""               # the local CSV every row is appended to ('' = none)
    cluster_timeout: float = 120.0
    nccl_debug: bool = False

    @property
    def own_grace(self) -> float:
        """After a task fails, how long the others may take to end by themselves."""
        return min(10.0, 0.4 * self.cluster_timeout)

    @property
    def kill_after(self) -> float:
        """From SIGTERM to SIGKILL of a remote task."""
        return min(5.0, 0.3 * self.cluster_timeout)

    @property
    def local_kill_after(self) -> float:
        """From closing a remote shell's stdin to killing the local remote-shell process."""
        return self.kill_after + min(3.0, 0.2 * self.cluster_timeout)


@dataclasses.dataclass
class LaunchResult:
    hosts: list[Host]
    rows: list[dict[str, str]]       # one or more per task, task order
    exit_code: int
    error: str                       # the one line, '' when every task ended well
    interconnect: str
    seconds: float
    stop_seconds: Optional[float] = None   # first failure (or interrupt) to the last task's end
    log_dir: str = ""


def _now() -> float:
    return time.monotonic()


def run_tasks(cfg: LaunchConfig, hosts: Sequence[Host], log_dir: str,
              console: Optional[ChiefConsole] = None) -> LaunchResult:
    """Runs one task per host until all end; returns their rows and what went wrong.

    Raises errors.Interrupted (after stopping every task and gathering its rows into the
    result attached as exc.launch_result) when the launcher gets SIGINT/SIGTERM."""
    tasks = []
    for i, host in enumerate(hosts):
        flags = task_flags(cfg.flags, hosts, i)
        script = remote_script(cfg.remote_cmd, flags, cfg.nccl_debug, cfg.kill_after,
                               tag="%s/%d" % (",".join(h.address for h in hosts), i))
        name = "worker%d_%s.log" % (i, re.sub(r"[^A-Za-z0-9.]+", "-", host.label))
        argv = rsh_argv(cfg.rsh, host, "sh -c " + shlex.quote(script))
        chief = console is not None and i == 0
        tasks.append(RemoteTask(i, host, flags, argv, os.path.join(log_dir, name),
                                console.out if chief else None, console.err if chief else None))
    started = _now()
    interrupted: Optional[errors.Interrupted] = None
    first_trouble: Optional[float] = None
    stop_at = kill_at = None
    try:
        for task in tasks:
            task.start()
        while any(t.running for t in tasks):
            now = _now()
            done = [t for t in tasks if not t.running]
            failed = [t for t in done if t.proc.returncode != 0 and not t.stopped]
            if failed and first_trouble is None:
                first_trouble = min(t.ended for t in failed)
                stop_at = min(stop_at or float("inf"), first_trouble + cfg.own_grace)
            if stop_at is None and tasks[0] in done:
                # The chief is done; the others end with it (same steps), or are stopped.
                stop_at = tasks[0].ended + cfg.cluster_timeout
            if stop_at is not None and now >= stop_at and kill_at is None:
                for t in tasks:
                    if t.running:
                        t.stop()
                kill_at = now + cfg.local_kill_after
            if kill_at is not None and now >= kill_at:
                for t in tasks:
                    if t.running:
                        t.kill()
            time.sleep(0.05)
    except (KeyboardInterrupt, errors.Interrupted) as exc:
        interrupted = exc if isinstance(exc, errors.Interrupted) else \
            errors.Interrupted(signal.SIGINT)
        first_trouble = _now()
        _stop_all(tasks, cfg.local_kill_after)
    finally:
        for task in tasks:
            if task.proc is not None and task.poll() is None:   # only if start() failed midway
                task.kill()
    for task in tasks:
        task.finish()
    result = _result(cfg, tasks, hosts, log_dir, started, first_trouble, interrupted)
    if interrupted is not None:
        interrupted.launch_result = result    # type: ignore[attr-defined]
        raise interrupted
    return result


def _stop_all(tasks: Sequence[RemoteTask], local_kill_after: float) -> None:
    """Stops every task (remote SIGTERM, then SIGKILL); a second signal kills at once."""
    for t in tasks:
        if t.proc is not None:
            t.stop()
    deadline = _now() + local_kill_after
    try:
        while any(t.proc is not None and t.running for t in tasks) and _now() < deadline:
            time.sleep(0.05)
    except (KeyboardInterrupt, errors.Interrupted):
        pass
    for t in tasks:
        if t.proc is not None and t.running:
            t.kill()


def _result(cfg: LaunchConfig, tasks: Sequence[RemoteTask], hosts: Sequence[Host], log_dir: str,
            started: float, first_trouble: Optional[float],
            interrupted: Optional[errors.Interrupted]) -> LaunchResult:
    rows = []
    for task in tasks:
        rows += task_rows(cfg, task, len(tasks), interrupted)
    last_end = max((t.ended for t in tasks if t.ended), default=_now())
    stop_seconds = None if first_trouble is None else max(0.0, last_end - first_trouble)
    exit_code, error = errors.EXIT_OK, ""
    if interrupted is not None:
        exit_code = interrupted.exit_code
        error = "%s; the %d task(s) stopped within %.1f s" % (interrupted, len(tasks),
                                                              stop_seconds or 0.0)
    else:
        root = _root_cause(tasks)
        if root is not None:
            exit_code = _exit_code(root)
            others = len(tasks) - 1
            error = "%s (worker %d): %s" % (root.host.label, root.index,
                                            _root_phrase(root, tasks, cfg.rsh))
            if others and not root.stopped:
                error += "; the other %d task(s) ended within %.1f s" % (
                    others, max(0.0, last_end - root.ended))
    return LaunchResult(list(hosts), rows, exit_code, error,
                        interconnect(rows, tasks, cfg.nccl_debug), last_end - started,
                        stop_seconds, log_dir)


def _root_cause(tasks: Sequence[RemoteTask]) -> Optional[RemoteTask]:
    """The task to name: the first to fail by itself (crash, OOM, killed), else one that did not
    end while the others did (hung, cut off: the launcher stopped it), else the first that lost
    its peers (exit code 5, the others' consequence of a failure)."""
    failed = [t for t in tasks if not t.ok]
    if not failed:
        return None

    def rank(t: RemoteTask) -> tuple:
        lost_peer = t.exit_code == errors.EXIT_DISTRIBUTED
        return (2 if lost_peer and not t.stopped else 1 if t.stopped else 0, t.ended)
    return min(failed, key=rank)


def _root_phrase(root: RemoteTask, tasks: Sequence[RemoteTask], rsh: Sequence[str]) -> str:
    """The named task's cause; for a task the launcher had to stop, what it outlived."""
    if not root.stopped:
        return root.cause(rsh)
    ended = [t for t in tasks if not t.stopped and t.ended]
    if not ended:
        return root.cause(rsh)
    first = min(ended, key=lambda t: t.ended)
    what = "failed (%s)" % first.cause(rsh) if not first.ok else "ended"
    return "still running %.1f s after worker %d %s; stopped: %s, %.1f s after it" % (
        root.stopped_at - first.ended, first.index, what, root.cause(rsh),
        root.ended - first.ended)


def _exit_code(task: RemoteTask) -> int:
    """tfbench's own exit code for its failures (3 OOM, 4 NaN, 5 lost peer, ...); 5 for a task
    killed by a signal or a host the remote shell could not reach."""
    code = task.exit_code
    if code is not None and 0 < code < 128:
        return code
    return errors.EXIT_DISTRIBUTED


def task_rows(cfg: LaunchConfig, task: RemoteTask, num_workers: int,
              interrupted: Optional[errors.Interrupted] = None) -> list[dict[str, str]]:
    """The task's own rows (marked error when it then ended badly), else one written for it."""
    rows = task.rows()
    command = shlex.join([cfg.remote_cmd] + task.flags)
    if rows:
        if not task.ok:
            for row in rows:
                if row["status"] == "ok":
                    row["status"] = "error"
                    row["error"] = "ended abnormally after writing its row: " + task.cause(
                        cfg.rsh)
        return rows
    sig = task.signal_number()
    if interrupted is not None or (task.stopped and sig in (signal.SIGTERM, signal.SIGINT)):
        status = "interrupted"
        error = "stopped by tfbench launch (%s)" % (interrupted or "another task failed")
    else:
        code = -sig if sig is not None else (task.exit_code if task.exit_code is not None
                                             else 1)
        status, _ = sweep_child.classify_failure(
            sweep_child.ChildOutcome(code, task.ended - task.started), "\n".join(task.tail))
        if sig == signal.SIGKILL:
            status = "error"   # sweep counts SIGKILL as the OOM killer; here it is not known
        error = task.cause(cfg.rsh)
    return [host_failure_row(task.flags, status, error, command, task.host, num_workers)]


def host_failure_row(flags: Sequence[str], status: str, error: str, command: str, host: Host,
                     num_workers: int) -> dict[str, str]:
    row = sweep_child.failure_row(flags, status, error, command)
    row["hostname"] = host.target.rpartition("@")[2]
    row["num_workers"] = str(num_workers)
    return row


def interconnect(rows: Sequence[dict[str, str]], tasks: Sequence[RemoteTask],
                 nccl_debug: bool) -> str:
    """What carried the all-reduce between hosts, as far as the run shows it."""
    text = "\n".join(line for t in tasks for line in t.nccl_text)
    seen = nccl_log.describe(nccl_log.parse(text))
    if seen:
        return seen
    kinds = {r.get("device_kind") for r in rows if r.get("device_kind")}
    if kinds == {"cpu"}:
        if len(tasks) == 1:
            return "none (one host, CPU)"
        return "gRPC over TCP (TensorFlow's ring all-reduce; CPU devices, no NCCL)"
    if not nccl_debug:
        return "not recorded (--nccl_debug has NCCL log its transport)"
    return "no NCCL log line (the all-reduce did not use NCCL, e.g. --all_reduce_spec=ring)"


# --- the whole command ---------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    exit_code: int
    results: list[LaunchResult]
    tables: str = ""             # the series' Markdown (sweep_hosts)


def preflight(cfg: LaunchConfig, stderr: TextIO) -> Optional[Outcome]:
    """Every host answers with the chief's versions, or one error line, a row per host at fault,
    and exit code 5; None when all is well."""
    answers = ask_versions(cfg.rsh, cfg.hosts, cfg.remote_cmd, cfg.cluster_timeout)
    problems = version_problems(answers)
    if not problems:
        print("tfbench launch: %d host(s), each with %s" % (len(cfg.hosts), answers[0].version),
              file=stderr)
        return None
    message = "; ".join("%s: %s" % (host.label, cause) for host, cause in problems)
    index = {h.address: i for i, h in enumerate(cfg.hosts)}
    rows = [host_failure_row(task_flags(cfg.flags, cfg.hosts, index[host.address]), "error",
                             "%s: %s" % (host.label, cause),
                             shlex.join([cfg.remote_cmd, "--version"]), host, len(cfg.hosts))
            for host, cause in problems]
    _save_rows(cfg, rows, os.path.join(cfg.out_dir, "rows.csv"), stderr)
    print("tfbench launch: error: %s" % message, file=stderr)
    return Outcome(errors.EXIT_DISTRIBUTED, [LaunchResult(list(cfg.hosts), rows,
                                                          errors.EXIT_DISTRIBUTED, message,
                                                          "", 0.0)])


def _save_rows(cfg: LaunchConfig, rows: list[dict[str, str]], path: str,
               stderr: TextIO) -> None:
    csv_out.append_rows(path, rows)
    if cfg.csv_file:
        notice = csv_out.append_rows(cfg.csv_file, rows)
        if notice:
            print(notice, file=stderr)


def launch(cfg: LaunchConfig, stdout: TextIO, stderr: TextIO) -> Outcome:
    """One task per host, the chief's classic log on stdout (see ChiefConsole)."""
    failed = preflight(cfg, stderr)
    if failed is not None:
        return failed
    console = ChiefConsole(stdout, stderr)
    try:
        result = run_tasks(cfg, cfg.hosts, cfg.out_dir, console)
    except errors.Interrupted as exc:
        result = exc.launch_result    # type: ignore[attr-defined]
    _save_rows(cfg, result.rows, os.path.join(cfg.out_dir, "rows.csv"), stderr)
    ok = sum(r["status"] == "ok" for r in result.rows)
    where = cfg.csv_file or os.path.join(cfg.out_dir, "rows.csv")
    own = ["Launch: %d row(s) of %d task(s) (%d ok) appended to %s; host logs in %s"
           % (len(result.rows), len(result.hosts), ok, where, cfg.out_dir),
           "Interconnect: %s" % result.interconnect]
    console.finish(own, result.error)
    return Outcome(result.exit_code, [result])


def chief_row(result: LaunchResult) -> dict[str, str]:
    """The chief's row: what its classic log reports (images/sec of every worker)."""
    return result.rows[0]


def launch_series(cfg: LaunchConfig, counts: Sequence[int], stdout: TextIO,
                  stderr: TextIO) -> Outcome:
    """The scaling series: the first N hosts for each N in `counts`, then the efficiency table
    (devices x workers) with the interconnect each point saw."""
    failed = preflight(cfg, stderr)
    if failed is not None:
        return failed
    results: list[LaunchResult] = []
    exit_code = errors.EXIT_OK
    sweep_csv = os.path.join(cfg.out_dir, "sweep.csv")
    try:
        for n, count in enumerate(counts):
            name = "%03d_hosts-%d" % (n, count)
            log_dir = os.path.join(cfg.out_dir, "logs", name)
            print("[%d/%d] %d host(s): %s" % (n + 1, len(counts), count,
                                              ", ".join(h.label for h in cfg.hosts[:count])),
                  file=stderr)
            try:
                result = run_tasks(cfg, cfg.hosts[:count], log_dir)
            except errors.Interrupted as exc:
                result = exc.launch_result    # type: ignore[attr-defined]
                results.append(result)
                _save_rows(cfg, result.rows, sweep_csv, stderr)
                raise
            results.append(result)
            _save_rows(cfg, result.rows, sweep_csv, stderr)
            row = chief_row(result)
            print("      %s, %s images/sec, %.1f s; %s" % (
                row["status"], row["images_per_sec"] or "-", result.seconds,
                result.error or "logs in %s" % log_dir), file=stderr)
            if result.exit_code and not exit_code:
                exit_code = result.exit_code
    except errors.Interrupted as exc:
        exit_code = exc.exit_code
        print("tfbench launch: %s; writing the tables for the %d finished point(s)"
              % (exc, len(results)), file=stderr)
    summary = ""
    if results:
        summary = series_tables(cfg, counts, results)
        stdout.write(summary)
        stdout.write("\nrows: %s\ntables: %s\n" % (sweep_csv,
                                                   os.path.join(cfg.out_dir, "summary.md")))
        stdout.flush()
    if exit_code and exit_code not in (errors.EXIT_SIGINT, errors.EXIT_SIGTERM):
        first = next(r for r in results if r.exit_code)
        print("tfbench launch: error: %d host(s): %s" % (len(first.hosts), first.error),
              file=stderr)
    return Outcome(exit_code, results, summary)


def series_tables(cfg: LaunchConfig, counts: Sequence[int],
                  results: Sequence[LaunchResult]) -> str:
    """Scaling efficiency (report.studies, weak scaling over devices x workers) from the chiefs'
    rows, each point with the interconnect it saw, and every point's status."""
    import pandas as pd

    from tfbench.report import load, studies, tables
    chiefs = [chief_row(r) for r in results]
    df = load.rows_frame(chiefs)
    sections = studies.study_sections(df, ["scaling"], "weak")
    seen = {len(r.hosts): r.interconnect for r in results}
    for section in sections:
        section.frame["interconnect"] = [seen.get(int(w), "") for w in
                                         section.frame["num_workers"]]
        section.columns.append("interconnect")
        section.note += ("; images/sec is the chief's `total images/sec` (every worker's "
                         "images); interconnect: what carried the all-reduce between hosts")
    points = pd.DataFrame([{
        "hosts": len(r.hosts), "status": row["status"],
        "images_per_sec": pd.to_numeric(row["images_per_sec"] or None),
        "seconds": round(r.seconds, 1), "interconnect": r.interconnect,
        "error": r.error} for r, row in zip(results, chiefs)])
    failed = int((points["status"] != "ok").sum())
    sections.append(studies.Section(
        "all_points", "All points", points, list(points.columns),
        "%d of %d points not ok; every host's log in %s" % (
            failed, len(points), os.path.join(cfg.out_dir, "logs"))))
    title = "tfbench launch: --sweep_hosts=%s" % ",".join(str(c) for c in counts)
    return tables.write_sections(cfg.out_dir, sections, title)


def default_out_dir() -> str:
    return "tfbench_launch_" + datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y%m%dT%H%M%SZ")
