"""Runs a validation's plan (tfbench.validate.plan): each step's child in its own process
(tfbench.children: its own session, its log in <out_dir>/logs/, under a timeout), its verdicts
added, validate.json rewritten after every step (tfbench.validate.result), a line printed as
each step ends.

A child that fails, crashes or hangs is a `check_failed` row with how it ended ("hung: no end
after 300 s", "oom: ...", its exit status): the next step still runs. A signal stops the child
with it, and the validation ends with what it measured written (Interrupted re-raised for the
command to end 130/143). The training children's benchmark rows go to <out_dir>/children.csv
and to --csv_file, as a sweep's points do.
"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import json
import os
import shlex
import signal
import socket
import statistics
from typing import Any, Callable, Optional, Sequence, TextIO

from tfbench import errors
from tfbench.children import rows as rows_lib
from tfbench.children.outcome import classify_failure
from tfbench.children.process import ChildOutcome, log_tail, run_child
from tfbench.measure.health_read import HostHealth
from tfbench.measure.health_verdicts import FAIL, PASS, SKIP
from tfbench.validate import devices_step, figures, health_step, plan as plan_lib, result, \
    run_figures, together_step
from tfbench.validate.verdicts import Check

CHILDREN_CSV = "children.csv"
DEVICE_ROWS = "device_checks"   # the group of every device's rows (judged on every run's)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclasses.dataclass
class Options:
    tolerance_pct: float = 5.0
    min_efficiency_pct: Optional[float] = None
    baseline: Optional[str] = None
    csv_file: Optional[str] = None
    step_timeout_s: Optional[float] = None    # every child's, instead of its plan's


class Validation:
    """One validation of this host (see the module)."""

    def __init__(self, plan: plan_lib.Plan, out_dir: str, options: Options,
                 judge: figures.FigureJudge, stdout: Optional[TextIO] = None,
                 say: Optional[Callable[[str], None]] = None, host: Optional[str] = None):
        self.plan, self.out_dir, self.options, self.judge = plan, out_dir, options, judge
        self.stdout = stdout
        self.say = say or (lambda text: None)
        self.host = host or socket.gethostname()
        self.result = result.Result(out_dir, {
            "level": plan.level, "tolerance_pct": options.tolerance_pct,
            "min_efficiency_pct": options.min_efficiency_pct,
            "soak_minutes": plan.soak_minutes, "baseline": options.baseline,
            "host": self.host, "started": None,
            "benchmark_flags": list(plan.flags), "added_flags": list(plan.added),
            "estimate_s": round(plan.estimate_s, 1), "estimate_basis": plan.basis(),
            "plan": [s.to_json() for s in plan.steps]})
        # Rows by step group, so a repeated step's rows are judged again as repeats end.
        self.groups: dict[str, list[Check]] = {}
        self.first_health: Optional[HostHealth] = None
        self.first_health_rows: list[Check] = []
        self.device_runs: list[dict[str, Any]] = []    # manifests' extra with device checks
        self.manifests: list[dict[str, Any]] = []      # every ok training child's manifest
        self.busbw: list[float] = []
        self.soak_steps: Optional[int] = None

    # --- the run ----------------------------------------------------------------------------
    def prepare(self) -> None:
        """A new validation's directory: refused when it holds one already."""
        if os.path.exists(self.result.json_path):
            raise errors.UsageError("%s already holds a validation (%s); choose another "
                                    "--out_dir" % (self.out_dir, result.JSON_FILE))
        for sub in ("logs", "points", "runs"):
            os.makedirs(os.path.join(self.out_dir, sub), exist_ok=True)

    def run(self) -> result.Result:
        """Every step in order; Interrupted (or KeyboardInterrupt) propagates once what was
        measured is written."""
        self.prepare()
        self.result.meta["started"] = _now()
        self.result.write()
        try:
            for number, step in enumerate(self.plan.steps, 1):
                record = self._run_step(step)
                self._line(number, step, record)
        except (KeyboardInterrupt, errors.Interrupted) as exc:
            signum = exc.signum if isinstance(exc, errors.Interrupted) else signal.SIGINT
            self.result.interrupted = errors.signal_name(signum)
            self.result.exit_code = exc.exit_code if isinstance(exc, errors.Interrupted) \
                else errors.EXIT_SIGINT
            raise
        finally:
            if self.result.interrupted and not any(
                    s.kind == plan_lib.FIGURES for s in self._done()):
                self._figures_now()   # what the finished runs measured is still judged
            self.result.finished = _now()
            self._sync_rows()
            self.result.write()
        return self.result

    def _done(self) -> list[plan_lib.Step]:
        names = {s.name for s in self.result.steps}
        return [s for s in self.plan.steps if s.name in names]

    def _sync_rows(self) -> None:
        self.result.rows = [r for rows in self.groups.values() for r in rows]

    def _run_step(self, step: plan_lib.Step) -> result.StepRecord:
        kind = step.kind
        handler = {plan_lib.HEALTH: self._health, plan_lib.DEVICES: self._devices,
                   plan_lib.ALLREDUCE: self._allreduce, plan_lib.SOAK: self._soak}
        if kind == plan_lib.FIGURES:
            start = _clock()
            self._figures_now()
            record = result.StepRecord(step.name, result.STEP_OK, _clock() - start, "", "")
            self.result.steps.append(record)
        else:
            record = handler[kind](step)
        self._sync_rows()
        self.result.write()
        return record

    def _figures_now(self) -> None:
        measured = self.measured()
        self.result.measured = measured.to_json()
        self.result.figures = run_figures.figures_json(measured.figures,
                                                       figures.run_key(measured.key))
        try:
            rows = self.judge(measured) if measured.figures else []
        except errors.TfbenchError as exc:
            rows = [Check(self.host, "host", "figures", FAIL, "check_failed", str(exc),
                          "the figures judged")]
        self.groups[plan_lib.FIGURES] = rows

    # --- children ---------------------------------------------------------------------------
    def _timeout(self, step: plan_lib.Step) -> float:
        return self.options.step_timeout_s or step.timeout_s

    def _child(self, step: plan_lib.Step, command: Sequence[str]
               ) -> tuple[ChildOutcome, str, float]:
        log_path = os.path.join(self.out_dir, "logs", step.name + ".log")
        timeout = self._timeout(step)
        outcome = run_child(list(command), log_path, timeout_sec=timeout)
        return outcome, log_path, timeout

    def _record(self, step: plan_lib.Step, command: Sequence[str], outcome: ChildOutcome,
                log_path: str, timeout: float, error: str = "") -> result.StepRecord:
        if outcome.interrupted is not None:
            status = result.STEP_INTERRUPTED
        elif outcome.timed_out:
            status = result.STEP_HUNG
        elif error or outcome.exit_code != 0:
            status = result.STEP_FAILED
        else:
            status = result.STEP_OK
        return result.StepRecord(step.name, status, outcome.seconds, shlex.join(command),
                                 os.path.relpath(log_path, self.out_dir), error)

    def _failure(self, outcome: ChildOutcome, log_path: str, timeout: float) -> str:
        """How a child ended badly, in one line."""
        if outcome.timed_out:
            return "hung: no end after %.0f s" % timeout
        status, error = classify_failure(outcome, log_tail(log_path))
        return "%s: %s" % (status, error)

    def _finish(self, step: plan_lib.Step, command: Sequence[str], outcome: ChildOutcome,
                log_path: str, timeout: float, error: str, group: str,
                rows: list[Check]) -> result.StepRecord:
        record = self._record(step, command, outcome, log_path, timeout, error)
        self.result.steps.append(record)
        self.groups[group] = rows
        if outcome.interrupted is not None:
            self._sync_rows()
            raise outcome.interrupted
        return record

    def _failed_row(self, check: str, error: str, what: str) -> Check:
        return Check(self.host, "host", check, FAIL, "check_failed", error, what)

    def _json_child(self, step: plan_lib.Step, option: str
                    ) -> tuple[ChildOutcome, str, float, str, str]:
        """Runs a child that writes its figures to the file of its `option` (--json=FILE):
        (outcome, log path, timeout, that file, '' or why the child failed)."""
        json_path = next(a.split("=", 1)[1] for a in step.command
                         if a.startswith(option + "="))
        outcome, log_path, timeout = self._child(step, step.command)
        error = ""
        if outcome.timed_out or outcome.exit_code != 0:
            error = self._failure(outcome, log_path, timeout)
        return outcome, log_path, timeout, json_path, error

    def _health(self, step: plan_lib.Step) -> result.StepRecord:
        outcome, log_path, timeout, json_path, error = self._json_child(step, "--json")
        rows: list[Check] = []
        if not error:
            try:
                report = health_step.read_report(json_path)
            except health_step.Unreadable as exc:
                error = "the health child %s" % exc
            else:
                first = self.first_health is None and not self.first_health_rows
                rows, readings = health_step.judge(report, self.host,
                                                   None if first else self.first_health)
                if first:
                    self.first_health, self.first_health_rows = readings, rows
                else:
                    rows = health_step.changed(self.first_health_rows, rows,
                                               step.name.replace("_", " "))
        if error and outcome.interrupted is None:
            rows = [self._failed_row(step.name, error, "the health facts read")]
        return self._finish(step, step.command, outcome, log_path, timeout, error, step.name,
                            rows)

    def _manifest(self, step: plan_lib.Step) -> Optional[dict[str, Any]]:
        found = sorted(glob.glob(os.path.join(self.out_dir, "runs", step.name, "*.json")))
        if not found:
            return None
        try:
            with open(found[-1]) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def _training(self, step: plan_lib.Step, command: Sequence[str], flags: Sequence[str]
                  ) -> tuple[ChildOutcome, str, float, list[dict[str, str]],
                             Optional[dict[str, Any]]]:
        """Runs a training child; (outcome, log, timeout, its rows as saved, its manifest)."""
        csv_path = os.path.join(self.out_dir, "points", step.name + ".csv")
        outcome, log_path, timeout = self._child(step, command)
        rows = rows_lib.child_rows(list(flags), outcome, csv_path, log_path,
                                   shlex.join(command))
        if outcome.timed_out:
            for row in rows:
                row["error"] = "hung: no end after %.0f s; %s" % (timeout, row["error"])
        rows_lib.save_rows(rows, os.path.join(self.out_dir, CHILDREN_CSV),
                           self.options.csv_file, self.say)
        return outcome, log_path, timeout, rows, self._manifest(step)

    def _row_error(self, outcome: ChildOutcome, rows: list[dict[str, str]], log_path: str,
                   timeout: float) -> str:
        if outcome.timed_out:
            return "hung: no end after %.0f s" % timeout
        status = rows_lib.rows_status(rows)
        if status == "ok" and outcome.exit_code == 0:
            return ""
        bad = next((r for r in rows if r["status"] != "ok"), rows[0] if rows else None)
        if bad is None:
            return self._failure(outcome, log_path, timeout)
        return "%s: %s" % (bad["status"], bad["error"])

    def _devices(self, step: plan_lib.Step) -> result.StepRecord:
        outcome, log_path, timeout, rows, manifest = self._training(step, step.command,
                                                                    step.flags)
        error = self._row_error(outcome, rows, log_path, timeout)
        if error and outcome.exit_code == errors.EXIT_USAGE and not self.device_runs:
            record = self._record(step, step.command, outcome, log_path, timeout, error)
            self.result.steps.append(record)
            self._sync_rows()
            self.result.write()
            raise errors.UsageError("the benchmark refused its flags: %s (log: %s)"
                                    % (rows[0]["error"] if rows else error, log_path))
        own: list[Check] = []
        if manifest is not None and manifest.get("status") == "ok" and not error:
            self.manifests.append(manifest)
        extra = (manifest or {}).get("extra") or {}
        if extra.get("device_checks"):
            self.device_runs.append(extra)
        elif not error:
            stopped = next((n for n in (manifest or {}).get("notices") or []
                            if "--validate_devices" in n), "")
            error = stopped or "the run reported no device checks"
        if error and outcome.interrupted is None:
            own.append(self._failed_row(step.name, error, "the training child's run and "
                                        "device checks"))
        self.groups[step.name] = own
        self.groups[DEVICE_ROWS] = devices_step.judge(
            self.device_runs, self.host, self.options.tolerance_pct)
        return self._finish(step, step.command, outcome, log_path, timeout, error, step.name,
                            own)

    def _allreduce(self, step: plan_lib.Step) -> result.StepRecord:
        """Judges the all-reduce probe the first training child timed (its check_failed row
        when that child wrote none)."""
        source, path = plan_lib.allreduce_source(self.plan)
        ran = next((r for r in self.result.steps if r.name == source.name), None)
        probe = together_step.read_probe(path)
        rows: list[Check] = []
        error = "" if probe is not None else "%s wrote no all-reduce figures" % source.name
        if probe is None and (ran is None or ran.status != result.STEP_OK):
            error = "%s ended before its all-reduce probe%s" % (
                source.name, " (%s)" % ran.error if ran is not None and ran.error else "")
        elif probe is not None and probe.get("error"):
            error = "the all-reduce probe in %s: %s" % (source.name, probe["error"])
        elif probe is not None:
            rows = [together_step.busbw_check(probe, self.host, self.plan.host.kind)]
            busbw, _ = together_step.best_busbw(probe)
            if busbw is not None:
                self.busbw.append(busbw)
        if error:
            rows = [self._failed_row(together_step.CHECK, error, "the all-reduce timed")]
        status = result.STEP_SKIPPED if probe is None else \
            result.STEP_FAILED if error else result.STEP_OK
        self.result.steps.append(result.StepRecord(step.name, status, 0.0, "", "", error))
        self.groups[step.name] = rows
        return self.result.steps[-1]

    def _soak(self, step: plan_lib.Step) -> result.StepRecord:
        images = [m["images_per_sec"] for m in self.manifests if m.get("images_per_sec")]
        if not images:
            record = result.StepRecord(step.name, result.STEP_SKIPPED, 0.0, "", "",
                                       "no step time was measured to size the soak")
            self.result.steps.append(record)
            self.groups[step.name] = [self._failed_row(
                "soak", "not run: no training child measured a step time to size it",
                "a soak of %s" % plan_lib.human_seconds((self.plan.soak_minutes or
                                                          plan_lib.DEFAULT_SOAK_MINUTES) * 60))]
            return record
        minutes = self.plan.soak_minutes or plan_lib.DEFAULT_SOAK_MINUTES
        batch = float(self.manifests[0].get("global_batch_size") or 1)
        self.soak_steps = plan_lib.soak_batches(minutes, statistics.median(images), batch)
        extra = ["--num_batches=%d" % self.soak_steps]
        command = list(step.command) + extra
        outcome, log_path, timeout, rows, manifest = self._training(
            step, command, list(step.flags) + extra)
        error = self._row_error(outcome, rows, log_path, timeout)
        own: list[Check] = []
        if error:
            if outcome.interrupted is None:
                own.append(self._failed_row("soak", error, "%d steps of training"
                                            % self.soak_steps))
        elif manifest is not None:
            own.append(soak_check(manifest.get("step_times") or [], self.host,
                                  self.options.tolerance_pct, minutes))
        return self._finish(step, command, outcome, log_path, timeout, error, step.name, own)

    # --- what was measured --------------------------------------------------------------------
    def measured(self) -> figures.Measured:
        key: dict[str, Any] = {}
        values: dict[str, list[float]] = {}
        splits: list[str] = []
        if self.manifests:
            first = self.manifests[0]
            extra = first.get("extra") or {}
            key = {"model": first.get("model"), "mode": first.get("mode"),
                   "precision": first.get("precision"), "batch_size": first.get("batch_size"),
                   "num_devices": first.get("num_devices"),
                   "device_kind": first.get("device_kind"),
                   "device_name": extra.get("device_name"), "xla": first.get("xla"),
                   "variable_update": first.get("variable_update"),
                   "image_size": first.get("image_size")}
            # The children's rows and manifests, read as a baseline reads them.
            values = run_figures.measured_figures(
                (m.get("csv_row") or {}, m) for m in self.manifests)
            explained = [(m.get("extra") or {}).get("scaling_explained") for m in
                         self.manifests]
            explained = [e for e in explained if e and e.get("efficiency_pct") is not None]
            splits = [together_step.efficiency_split(e) for e in explained]
        return figures.Measured(self.host, key, {k: v for k, v in values.items() if v},
                                splits, [dict(m.get("csv_row") or {}) for m in self.manifests])

    # --- the console --------------------------------------------------------------------------
    def _line(self, number: int, step: plan_lib.Step, record: result.StepRecord) -> None:
        if self.stdout is None:
            return
        rows = list(self.groups.get(step.name, []))
        if step.kind == plan_lib.DEVICES:   # the devices judged on the runs so far
            rows += self.groups.get(DEVICE_ROWS, [])
        counts = ", ".join("%d %s" % (n, s) for s in (FAIL, "WARN", PASS, SKIP)
                           if (n := sum(r.status == s for r in rows)))
        failed = [r for r in rows if r.status == FAIL][:4]
        named = "; ".join("%s %s" % (r.subject, r.reason) for r in failed)
        text = "%d/%d %-17s %-7s %7.1f s  %s%s" % (
            number, len(self.plan.steps), step.name, record.status, record.seconds,
            counts or ("no rows" if not record.error else ""), ": " + named if named else "")
        if record.error and not failed:
            text += " (%s)" % record.error
        self.stdout.write(text.rstrip() + "\n")
        self.stdout.flush()


def _clock() -> float:
    import time
    return time.monotonic()


def soak_check(step_times: Sequence[float], host: str, tolerance_pct: float,
               minutes: float) -> Check:
    """The soak's row: the median step time of its last tenth of steps against its first
    tenth's; more than the tolerance slower is `slowed_down`."""
    expectation = "last tenth of the steps at most %.2fx the first tenth's median step" % (
        1.0 + tolerance_pct / 100.0)
    tenth = len(step_times) // 10
    if tenth < 1:
        return Check(host, "host", "soak", SKIP, "no_expectation",
                     "%d steps: too few to compare a first and a last tenth" % len(step_times),
                     expectation)
    first = statistics.median(step_times[:tenth])
    last = statistics.median(step_times[-tenth:])
    ratio = last / first
    limit = 1.0 + tolerance_pct / 100.0
    figure = "%d steps in %s; the last tenth's median step %.2fx the first tenth's " \
             "(%.4g vs %.4g ms)" % (len(step_times), plan_lib.human_seconds(sum(step_times)),
                                    ratio, 1000 * last, 1000 * first)
    slow = ratio > limit
    return Check(host, "host", "soak", FAIL if slow else PASS, "slowed_down" if slow else "ok",
                 figure, expectation, ratio, limit)
