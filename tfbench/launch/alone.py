"""Every host's `tfbench validate` at once, each alone (no cluster flags): the tasks, the wait
(a host that has not ended after its timeout is stopped: its validate writes what it ran, and
is killed if it does not end), and what each came back with: its validate.json's rows under the
host's name, its children's CSV rows, its images/sec alone, and a FAIL row when it did not end
with its verdict.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import time
from typing import Any, Callable, Optional, Sequence

from tfbench import errors
from tfbench.children import rows as rows_lib
from tfbench.launch.hosts_verdicts import alone_images_per_sec, read_host_json, training_rows
from tfbench.launch.remote import RemoteTask, remote_script, rsh_argv
from tfbench.launch.tasks import LaunchConfig, host_failure_row
from tfbench.validate import verdicts
from tfbench.validate.verdicts import FAIL, Check

# A host's validate ended with its verdict: all pass, a WARN, a FAIL (verdicts.EXIT_CODES).
COMPLETED = tuple(sorted(set(verdicts.EXIT_CODES.values())))
VALIDATE_JSON = "validate/validate.json"


def file_part(name: str) -> str:
    """A host's name as part of a file name."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name)


@dataclasses.dataclass
class Alone:
    """One host's validation alone, as it came back."""
    index: int
    name: str
    rows: list[Check]
    csv_rows: list[dict[str, str]]
    images_per_sec: Optional[float]
    training_row: Optional[dict[str, str]]
    step: dict[str, Any]           # its entry in validate.json's steps

    @property
    def passes(self) -> bool:
        return self.images_per_sec is not None and verdicts.overall(self.rows) != FAIL


def alone_task(cfg: LaunchConfig, index: int, name: str, validate_args: Sequence[str],
               baseline: Optional[str] = None, baseline_text: Optional[str] = None
               ) -> RemoteTask:
    """Host `index`'s task: `<remote_cmd> validate VALIDATE_ARGS FLAGS --out_dir=... ` in its
    task directory, the baseline's text written there, its validate.json sent back."""
    host = cfg.hosts[index]
    files_in, dir_flags = {}, [("out_dir", "validate")]
    if baseline_text is not None:
        ext = re.sub(r"[^A-Za-z0-9.]", "", os.path.splitext(baseline or "")[1])
        files_in["baseline" + ext] = baseline_text
        dir_flags.append(("baseline", "baseline" + ext))
    flags = ["validate"] + list(validate_args) + list(cfg.flags)
    script = remote_script(cfg.remote_cmd, flags, False, cfg.kill_after,
                           tag="validate/%s" % host.address, files_in=files_in,
                           dir_flags=dir_flags, files_back=[VALIDATE_JSON])
    log = os.path.join(cfg.out_dir, "alone", "%s.log" % file_part(name))
    task = RemoteTask(index, host, list(cfg.flags),
                      rsh_argv(cfg.rsh, host, "sh -c " + shlex.quote(script)), log)
    task.command = shlex.join([cfg.remote_cmd] + flags)     # type: ignore[attr-defined]
    return task


def run_alone(tasks: Sequence[RemoteTask], timeout: float, kill_after: float,
              ended: Callable[[RemoteTask, bool, bool], None]) -> None:
    """Starts every task, calls ended(task, hung, interrupted) as each ends; `timeout` s after
    the start the tasks still running are stopped (hung), killed `kill_after` s later. On
    SIGINT or SIGTERM every task is stopped the same way, `ended` called for each with
    interrupted = True, and errors.Interrupted raised."""
    done: set[int] = set()
    stopped_at = None
    started = time.monotonic()

    def collect(force: bool, interrupted: bool = False) -> None:
        for task in tasks:
            if task.index not in done and task.proc is not None and (force or not task.running):
                if force and task.running:
                    task.kill()
                task.finish()
                done.add(task.index)
                ended(task, task.stopped and stopped_at is not None, interrupted)
    try:
        for task in tasks:
            task.start()
        while len(done) < len(tasks):
            collect(False)
            now = time.monotonic()
            if stopped_at is None and now - started >= timeout:
                stopped_at = now
                for task in tasks:
                    if task.running:
                        task.stop()
            if stopped_at is not None and now - stopped_at >= kill_after:
                collect(True)
            time.sleep(0.05)
    except (KeyboardInterrupt, errors.Interrupted) as exc:
        interrupted = exc if isinstance(exc, errors.Interrupted) else \
            errors.Interrupted(signal.SIGINT)
        stopped_at = None
        for task in tasks:
            if task.proc is not None:
                task.stop()
        deadline = time.monotonic() + kill_after
        while any(t.proc is not None and t.running for t in tasks) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        collect(True, interrupted=True)
        raise interrupted from None


def outcome(cfg: LaunchConfig, task: RemoteTask, name: str, timeout: float, hung: bool,
            interrupted: bool) -> tuple[Alone, Optional[str]]:
    """What host `name`'s task came back with, and the text of its validate.json (None when
    none came back)."""
    code = task.exit_code
    text = task.file_text(VALIDATE_JSON)
    rows: list[Check] = []
    problem = ""
    if text is not None:
        try:
            _, rows = read_host_json(text, name)
        except ValueError as exc:
            problem = "its validate.json does not read (%s)" % exc
    if hung:
        problem = "hung: no end after %.0f s (--host_timeout_secs); stopped: %s" % (
            timeout, task.cause(cfg.rsh))
    elif code not in COMPLETED:
        problem = task.cause(cfg.rsh)
    elif text is None:
        problem = ("ended with exit code %d, but its validate.json did not come back: it "
                   "writes it under ${TMPDIR:-/tmp} on its host, which a --remote_cmd that "
                   "starts a container must mount" % code)
    completed = code in COMPLETED and not hung
    csv_rows = task.rows()
    if csv_rows and not completed:
        rows_lib.mark_abnormal(csv_rows, "ended abnormally after writing its row: " + problem)
    if not csv_rows and not completed:
        csv_rows = [host_failure_row(cfg.flags, "interrupted" if interrupted else "error",
                                     problem or "no row", task.command, task.host, 1)]
    figure = alone_images_per_sec(csv_rows) if completed else None
    if problem and (hung or not interrupted):
        rows.append(Check(name, "host", "validate", FAIL, "check_failed", problem,
                          "tfbench validate ends with its verdict (exit code 0, 7 or 8)"))
    if figure is None and completed and verdicts.overall(rows) != FAIL:
        rows.append(Check(name, "host", "validate", FAIL, "check_failed",
                          "no training row with images/sec came back",
                          "the training step's images/sec alone, to compare the hosts "
                          "together with"))
    training = training_rows(csv_rows)
    step = {"name": "alone %s" % name,
            "status": "ok" if completed and not problem else
            "interrupted" if interrupted and not hung else "failed",
            "seconds": round((task.ended or time.monotonic()) - task.started, 1),
            "command": task.command, "log": task.log_path, "validate_json": None,
            "exit_code": code, "images_per_sec": figure, "error": problem}
    return Alone(task.index, name, rows, csv_rows, figure, training[0] if training else None,
                 step), text
