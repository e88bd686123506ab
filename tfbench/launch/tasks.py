"""One launch: a task per host over the remote shell, the first failure named, the others
stopped within --cluster_timeout_secs, and every task's row (its own or one written for it).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import time
from typing import Optional, Sequence

from tfbench import errors
from tfbench.children import outcome as outcome_lib
from tfbench.children import rows as rows_lib
from tfbench.children.process import ChildOutcome
from tfbench.measure import nccl_log
from tfbench.launch.console import ChiefConsole
from tfbench.launch.remote import (DEFAULT_REMOTE_CMD, Host, RemoteTask, remote_script, rsh_argv,
                                   task_flags)


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
    # GPUs each task drives (--num_gpus); None on CPUs. A host named several times gives each
    # of its tasks GPUs of their own (remote.task_flags).
    gpus_per_task: Optional[int] = None
    command: str = ""                # the user's command line, recorded in every row

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
    status: str = "ok"               # the launch's, as a study counts it: its named task's row's


def _now() -> float:
    return time.monotonic()


def run_tasks(cfg: LaunchConfig, hosts: Sequence[Host], log_dir: str,
              console: Optional[ChiefConsole] = None) -> LaunchResult:
    """Runs one task per host until all end; returns their rows and what went wrong.

    Raises errors.Interrupted (after stopping every task and gathering its rows into the
    result attached as exc.launch_result) when the launcher gets SIGINT/SIGTERM."""
    tasks = []
    for i, host in enumerate(hosts):
        flags = task_flags(cfg.flags, hosts, i, cfg.gpus_per_task)
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
    result = _result(cfg, tasks, hosts, started, first_trouble, interrupted)
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


def _result(cfg: LaunchConfig, tasks: Sequence[RemoteTask], hosts: Sequence[Host],
            started: float, first_trouble: Optional[float],
            interrupted: Optional[errors.Interrupted]) -> LaunchResult:
    own = [task_rows(cfg, task, len(tasks), interrupted) for task in tasks]
    rows = [row for task_rows_ in own for row in task_rows_]
    status = "ok"
    last_end = max((t.ended for t in tasks if t.ended), default=_now())
    stop_seconds = None if first_trouble is None else max(0.0, last_end - first_trouble)
    exit_code, error = errors.EXIT_OK, ""
    if interrupted is not None:
        exit_code, status = interrupted.exit_code, "interrupted"
        error = "%s; the %d task(s) stopped within %.1f s" % (interrupted, len(tasks),
                                                              stop_seconds or 0.0)
    else:
        root = _root_cause(tasks)
        if root is not None:
            exit_code = _exit_code(root)
            status = rows_lib.rows_status(own[root.index])
            others = len(tasks) - 1
            error = "%s (worker %d): %s" % (root.host.label, root.index,
                                            _root_phrase(root, tasks, cfg.rsh))
            if others and not root.stopped:
                error += "; the other %d task(s) ended within %.1f s" % (
                    others, max(0.0, last_end - root.ended))
        elif any(r["error"] == NO_ROW for r in rows):
            task = next(t for t in tasks if not t.rows())
            exit_code, status = errors.EXIT_RUN_ERROR, "error"
            error = "%s (worker %d): %s" % (task.host.label, task.index, NO_ROW)
    if exit_code and status == "ok":
        status = "error"
    return LaunchResult(list(hosts), rows, exit_code, error,
                        interconnect(rows, tasks, cfg.nccl_debug), last_end - started, status)


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


# A task that ended well wrote its row where its host's shell could not read it: a container
# started by --remote_cmd has its own /tmp unless the host's is mounted.
NO_ROW = ("ended with exit code 0, but its CSV row did not come back: the task writes it under "
          "${TMPDIR:-/tmp} on its host, which a --remote_cmd that starts a container must mount "
          "(docker run -v \"${TMPDIR:-/tmp}:${TMPDIR:-/tmp}\"); its classic log is in the "
          "host's log file")


def task_rows(cfg: LaunchConfig, task: RemoteTask, num_workers: int,
              interrupted: Optional[errors.Interrupted] = None) -> list[dict[str, str]]:
    """The task's own rows (marked error when it then ended badly), else one written for it."""
    rows = task.rows()
    command = shlex.join([cfg.remote_cmd] + task.flags)
    if rows:
        if not task.ok:
            rows_lib.mark_abnormal(rows, "ended abnormally after writing its row: "
                                   + task.cause(cfg.rsh))
        return rows
    if task.ok:
        return [host_failure_row(task.flags, "error", NO_ROW, command, task.host, num_workers)]
    sig = task.signal_number()
    if interrupted is not None or (task.stopped and sig in (signal.SIGTERM, signal.SIGINT)):
        status = "interrupted"
        error = "stopped by tfbench launch (%s)" % (interrupted or "another task failed")
    else:
        code = -sig if sig is not None else (task.exit_code if task.exit_code is not None
                                             else 1)
        # A SIGKILL may be the launcher's own (a task that outlived its SIGTERM), or any host's.
        status, _ = outcome_lib.classify_failure(
            ChildOutcome(code, task.ended - task.started), "\n".join(task.tail),
            sigkill_is_oom=False)
        error = task.cause(cfg.rsh)
    return [host_failure_row(task.flags, status, error, command, task.host, num_workers)]


def host_failure_row(flags: Sequence[str], status: str, error: str, command: str, host: Host,
                     num_workers: int) -> dict[str, str]:
    """The row for a host's task that wrote none: what it would have run as one of
    `num_workers` workers (tfbench.children.rows), on that host."""
    return rows_lib.failure_row(flags, status, error, command,
                                hostname=host.target.rpartition("@")[2], workers=num_workers)


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
    return ("no NCCL log line (the all-reduce did not use NCCL, e.g. --all_reduce_spec=ring; "
            "or a container did not get NCCL_DEBUG: docker run -e NCCL_DEBUG "
            "-e NCCL_DEBUG_SUBSYS -e NCCL_DEBUG_FILE -v \"${TMPDIR:-/tmp}:${TMPDIR:-/tmp}\")")
