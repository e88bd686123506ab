"""`tfbench launch --hosts=h1,h2,... -- validate [validate options] [benchmark flags]`: every
host validated alone, then the hosts together, then, when together fails and every host passes
alone, the host (or link) that drags the ring.

1. Alone: every host runs `<remote_cmd> validate ...` at once, with no cluster flags; its
   validate.json and its children's CSV rows come back over its connection (remote.py's
   markers), its rows carry the host's name. A host that does not answer, runs other versions
   than the first, crashes, or has not ended after --host_timeout_secs (then it is stopped:
   its validate writes what it ran) is a FAIL row of its own; the others go on.
2. Together: one cluster (tfbench launch's tasks.run_tasks) of the hosts that measured images/sec
   alone, the same benchmark flags, with --explain_scaling and the alone runs' device and step
   counts. Scaling efficiency = the chief's total images/sec / the sum of those hosts' images/sec
   alone (each host's training rows, the median when it ran several), against the baseline's
   hosts-together efficiency x (100 - tolerance)% when the baseline holds one, else
   --min_efficiency_pct.
3. Halving: halving.next_step names the groups to run, each a cluster of its own like step 2,
   until it names a host, a link, or no one.
Every step rewrites validate.json and validate.csv in --out_dir (the combined rows) and appends
its benchmark rows to rows.csv and --csv_file, so an interrupted or failed validation keeps what
it measured.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import json
import os
import shlex
import time
from typing import Any, Optional, Sequence, TextIO

from tfbench import errors
from tfbench.launch import alone as alone_lib, halving
from tfbench.launch.alone import Alone, file_part
from tfbench.launch.hosts_verdicts import (HALVING, SCHEMA, TOGETHER, efficiency_check,
                                           expectation, finding_rows, group_subject,
                                           host_names, number, together_flags)
from tfbench.launch.remote import RemoteTask
from tfbench.launch.run import save_rows
from tfbench.launch.tasks import LaunchConfig, LaunchResult, host_failure_row, run_tasks
from tfbench.launch.versions import ask_versions, version_problems
from tfbench.validate import console as validate_console, verdicts
from tfbench.validate.verdicts import FAIL, PASS, Check

SCHEMA_VERSION = 1
# The time each level promises to end within on one host (an 8-GPU host's quick level in 2
# minutes, standard in 15); a host gets 3x its level's (long: with the soak) by default.
LEVEL_LIMIT_S = {"quick": 120.0, "standard": 900.0, "long": 900.0}


def default_host_timeout(level: str, soak_minutes: Optional[float]) -> float:
    soak = 60.0 * (soak_minutes or 0.0) if level == "long" else 0.0
    return 3.0 * (LEVEL_LIMIT_S[level] + soak)


@dataclasses.dataclass
class ValidateOptions:
    level: str
    host_args: list[str]               # validate's options as every host's validate gets them
    host_timeout: float
    tolerance_pct: float = 5.0
    min_efficiency_pct: float = 80.0
    baseline: Optional[str] = None      # the local file, sent to every host
    baseline_text: Optional[str] = None


class Validation:
    """The validation of cfg.hosts: its steps in order (run), then its table and files
    (finish); every step rewrites validate.json."""

    def __init__(self, cfg: LaunchConfig, opts: ValidateOptions, stdout: TextIO,
                 stderr: TextIO):
        self.cfg, self.opts, self.stdout, self.stderr = cfg, opts, stdout, stderr
        self.names = host_names(cfg.hosts)
        self.started = _utc()
        self.host_rows: dict[str, list[Check]] = {n: [] for n in self.names}
        self.together: list[Check] = []           # the hosts together
        self.drags: list[Check] = []              # what the halving found
        self.evidence: list[Check] = []           # each group the halving ran
        self.steps: list[dict[str, Any]] = []
        self.alone: dict[str, Alone] = {}
        self.excluded: dict[str, str] = {}        # host -> why it is not in the rings
        self.halving: Optional[dict[str, Any]] = None
        self.interrupted: Optional[errors.Interrupted] = None
        self.usage_error = ""
        self.exp = expectation(opts.baseline_text, opts.tolerance_pct, opts.min_efficiency_pct,
                               len(cfg.hosts))
        os.makedirs(cfg.out_dir, exist_ok=True)

    # -- output
    @property
    def rows(self) -> list[Check]:
        return ([r for n in self.names for r in self.host_rows[n]] + self.together
                + self.drags + self.evidence)

    def say(self, line: str) -> None:
        self.stdout.write(line + "\n")
        self.stdout.flush()

    def _save(self, rows: list[dict[str, str]]) -> None:
        save_rows(self.cfg, rows, os.path.join(self.cfg.out_dir, "rows.csv"), self.stderr,
                  one_run=False)   # each host's own validation runs

    def plan(self) -> list[dict[str, Any]]:
        own = shlex.join(["validate"] + self.opts.host_args)
        return [
            {"name": "alone", "what": "every host alone, at once: %s %s ... (stopped after %.0f s)"
             % (self.cfg.remote_cmd, own, self.opts.host_timeout),
             "estimate_s": None},
            {"name": "together", "what": "the hosts measured alone, as one cluster with "
             "--explain_scaling: efficiency = together images/sec / the sum of theirs alone, "
             "%s" % self.exp.text, "estimate_s": None},
            {"name": "halving", "what": "when together fails and every host passes alone: "
             "halves, pairs, until the host or link that drags the ring", "estimate_s": None},
        ]

    def document(self) -> dict[str, Any]:
        rows = self.rows
        code = self.interrupted.exit_code if self.interrupted else verdicts.exit_code(rows)
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "level": self.opts.level,
                "tolerance_pct": self.opts.tolerance_pct,
                "min_efficiency_pct": self.opts.min_efficiency_pct,
                "baseline": self.opts.baseline, "host": None, "hosts": self.names,
                "started": self.started, "finished": _utc(), "plan": self.plan(),
                "steps": self.steps, "halving": self.halving,
                "rows": [r.to_json() for r in rows], "status": verdicts.overall(rows),
                "exit_code": code}

    def write(self) -> None:
        """validate.json and validate.csv, whole, each replaced at once (a reader never sees a
        half-written file)."""
        path = os.path.join(self.cfg.out_dir, "validate.json")
        with open(path + ".tmp", "w") as handle:
            json.dump(self.document(), handle, indent=1)
            handle.write("\n")
        os.replace(path + ".tmp", path)
        path = os.path.join(self.cfg.out_dir, "validate.csv")
        fields = [f.name for f in dataclasses.fields(Check)]
        with open(path + ".tmp", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for row in self.rows:
                writer.writerow({k: "" if v is None else v for k, v in row.to_json().items()})
        os.replace(path + ".tmp", path)

    # -- the steps
    def run(self) -> None:
        self.say("tfbench launch -- validate: %d host(s) (%s), --level=%s"
                 % (len(self.names), ", ".join(self.names), self.opts.level))
        for n, step in enumerate(self.plan(), 1):
            self.say("  %d. %s" % (n, step["what"]))
        answered = self.preflight()
        self.write()
        self.run_alone(answered)
        self.write()
        # Every host that ran refused the options: the one line of a bad input, exit code 2.
        refused = [self.alone[n] for n in self.names
                   if n in self.alone and self.alone[n].step["exit_code"] == errors.EXIT_USAGE]
        if refused and len(refused) == len(self.alone):
            self.usage_error = "%s: %s" % (refused[0].name, refused[0].step["error"])
            return
        if len(self.names) > 1:
            self.run_together()
            self.write()

    def preflight(self) -> list[int]:
        """Every host answers with its versions: the indices of those that do; a row for each
        that does not, or whose versions differ from the first answering host's."""
        answers = ask_versions(self.cfg.rsh, self.cfg.hosts, self.cfg.remote_cmd,
                               self.cfg.cluster_timeout)
        index = {h.address: i for i, h in enumerate(self.cfg.hosts)}
        answered = [index[a.host.address] for a in answers if a.version is not None]
        command = shlex.join([self.cfg.remote_cmd, "--version"])
        failures = []
        for a in answers:
            if a.version is None:
                name = self.names[index[a.host.address]]
                self.host_rows[name].append(Check(
                    name, "host", "reachable", FAIL, "check_failed", a.cause,
                    "answers `%s` over --rsh" % command))
                self.excluded[name] = "it did not answer"
                failures.append(host_failure_row(self.cfg.flags, "error", "%s: %s" % (
                    a.host.label, a.cause), command, a.host, 1))
                self.say("[reachable] %s: FAIL check_failed: %s" % (name, a.cause))
        for host, cause in version_problems([a for a in answers if a.version is not None]):
            name = self.names[index[host.address]]
            self.host_rows[name].append(Check(
                name, "host", "versions", FAIL, "versions_differ", cause,
                "the first host's tfbench, TensorFlow and Keras"))
            self.excluded[name] = "its versions differ"
            self.say("[versions] %s: FAIL versions_differ: %s" % (name, cause))
        if failures:
            self._save(failures)
        return answered

    def run_alone(self, indices: Sequence[int]) -> None:
        """Every answering host's validate at once (alone.py); each host's rows as it ends."""
        tasks = [alone_lib.alone_task(self.cfg, i, self.names[i], self.opts.host_args,
                                      self.opts.baseline, self.opts.baseline_text)
                 for i in indices]
        try:
            alone_lib.run_alone(tasks, self.opts.host_timeout, self.cfg.local_kill_after,
                                self._alone_ended)
        except errors.Interrupted as exc:
            self.interrupted = exc
            raise

    def _alone_ended(self, task: RemoteTask, hung: bool, interrupted: bool) -> None:
        name = self.names[task.index]
        result, text = alone_lib.outcome(self.cfg, task, name, self.opts.host_timeout, hung,
                                         interrupted)
        if text is not None:
            path = os.path.join(self.cfg.out_dir, "hosts", file_part(name), "validate.json")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(text)
            result.step["validate_json"] = path
        self.host_rows[name].extend(result.rows)
        self._save(result.csv_rows)
        self.steps.append(result.step)
        self.alone[name] = result
        figure = result.images_per_sec
        self.say("[alone] %s: %s; %s images/sec alone, %.1f s; log %s" % (
            name, verdicts.summary(result.rows),
            "%.1f" % figure if figure is not None else "no", result.step["seconds"],
            task.log_path))
        if figure is None:
            self.excluded.setdefault(name, "it measured no images/sec alone")

    # -- together and halving
    def _run_group(self, label: str, names: Sequence[str], flags: list[str],
                   log_dir: str) -> LaunchResult:
        hosts = [self.cfg.hosts[self.names.index(n)] for n in names]
        cfg = dataclasses.replace(self.cfg, flags=flags)
        started = time.monotonic()
        try:
            result = run_tasks(cfg, hosts, log_dir)
        except errors.Interrupted as exc:
            self.interrupted = exc
            result = exc.launch_result    # type: ignore[attr-defined]
            self._save(result.rows)
            self.steps.append({"name": label, "status": "interrupted",
                               "seconds": round(time.monotonic() - started, 1),
                               "command": shlex.join([cfg.remote_cmd] + flags), "log": log_dir,
                               "error": result.error})
            raise
        self._save(result.rows)
        self.steps.append({"name": label, "status": "ok" if not result.exit_code else "failed",
                           "seconds": round(result.seconds, 1),
                           "command": shlex.join([cfg.remote_cmd] + flags), "log": log_dir,
                           "error": result.error,
                           "images_per_sec": number(result.rows[0]["images_per_sec"])
                           if result.rows else None})
        return result

    def run_together(self) -> None:
        group = [n for n in self.names if n not in self.excluded]
        if len(group) < 2:
            why = "; ".join("%s: %s" % kv for kv in self.excluded.items())
            self.steps.append({"name": "together", "status": "skipped", "seconds": 0.0,
                               "command": None, "log": None,
                               "error": "fewer than 2 hosts to run together (%s)" % why})
            self.say("[together] not run: fewer than 2 hosts to run together (%s)" % why)
            return
        counts = {n: self.alone[n].training_row["num_devices"] for n in group}
        if len(set(counts.values())) > 1:
            figure = "not run: the hosts ran different device counts alone (%s)" % ", ".join(
                "%s %s" % kv for kv in counts.items())
            self.together.append(Check(group[0], group_subject(group), TOGETHER, FAIL,
                                       "check_failed", figure, "the same devices on every host"))
            self.say("[together] %s" % figure)
            return
        flags = together_flags(self.cfg.flags, self.alone[group[0]].training_row)
        alone = {n: self.alone[n].images_per_sec for n in group}
        result = self._run_group("together", group, flags,
                                 os.path.join(self.cfg.out_dir, "together"))
        row, efficiency = efficiency_check(TOGETHER, group, result, [alone[n] for n in group],
                                           self.exp)
        self.together.append(row)
        self.say("[together] %s: %s %s: %s" % (row.subject, row.status, row.reason, row.figure))
        if efficiency is None or row.status == PASS:
            return
        unfit = [n for n in self.names if n not in self.alone or not self.alone[n].passes
                 or n in self.excluded]
        if unfit:
            why = "not every host passes alone (%s): look at those first" % ", ".join(unfit)
            self.halving = {"finding": None, "hosts": [], "why": why}
            self.say("[halving] not run: %s" % why)
            return
        self.write()
        self.run_halving(group, flags, alone, efficiency)

    def run_halving(self, group: list[str], flags: list[str], alone: dict[str, float],
                    efficiency: float) -> None:
        measured: dict[halving.Group, float] = {tuple(group): efficiency}
        n = 0
        while True:
            step = halving.next_step(group, measured, self.exp.pct)
            if isinstance(step, halving.Finding):
                break
            for names in step:
                n += 1
                log_dir = os.path.join(self.cfg.out_dir, "halving", "%02d_%s" % (
                    n, file_part("_".join(names))))
                result = self._run_group("halving %s" % ",".join(names), names, flags,
                                         log_dir)
                row, figure = efficiency_check(HALVING, names, result,
                                               [alone[h] for h in names], self.exp)
                self.evidence.append(row)
                self.write()
                self.say("[halving] %s: %s %s: %s" % (row.subject, row.status, row.reason,
                                                      row.figure))
                if figure is None:
                    self.halving = {"finding": None, "hosts": list(names),
                                    "why": "the run of %s failed: %s" % (",".join(names),
                                                                         result.error)}
                    return
                measured[names] = figure
        finding = step
        self.halving = {"finding": finding.kind, "hosts": list(finding.hosts),
                        "why": finding.why}
        self.drags = finding_rows(finding, measured, self.exp)
        if self.drags:
            for row in self.drags:
                self.say("[halving] %s drags the ring: %s" % (
                    row.host if row.subject == "host" else row.subject, row.figure))
        else:
            self.say("[halving] no one host or link: %s (%s)" % (
                finding.why, group_subject(finding.hosts)))

    def finish(self) -> int:
        """The table, the files, the overall line; the exit code."""
        self.write()
        rows = self.rows
        self.say("")
        self.stdout.write("\n".join(validate_console.table_lines(rows, with_host=True)) + "\n")
        where = self.cfg.csv_file or os.path.join(self.cfg.out_dir, "rows.csv")
        self.say("Results: %s, %s; benchmark rows appended to %s; host logs in %s" % (
            os.path.join(self.cfg.out_dir, "validate.json"),
            os.path.join(self.cfg.out_dir, "validate.csv"), where, self.cfg.out_dir))
        if self.usage_error:
            print(errors.error_line(self.usage_error), file=self.stderr)
            return errors.EXIT_USAGE
        self.say("validate: %s" % verdicts.summary(rows))
        if self.interrupted is not None:
            print(errors.error_line("%s; every check that ended is in %s" % (
                self.interrupted, os.path.join(self.cfg.out_dir, "validate.json"))),
                file=self.stderr)
            return self.interrupted.exit_code
        return verdicts.exit_code(rows)


def _utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def validate_hosts(cfg: LaunchConfig, opts: ValidateOptions, stdout: TextIO,
                   stderr: TextIO) -> int:
    """The whole validation (see the module); its exit code: 0 every row passes, 7 a WARN and
    no FAIL, 8 a FAIL, 2 every host refused the options, 130/143 interrupted."""
    validation = Validation(cfg, opts, stdout, stderr)
    try:
        validation.run()
    except errors.Interrupted as exc:
        validation.interrupted = exc
    return validation.finish()
