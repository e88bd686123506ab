"""`tfbench history import FILES_OR_DIRS`: results tfbench wrote before (or without) the history.

What it reads (tfbench.history.readers): results CSVs of every schema version, JSON run
manifests (<run_id>.json: its csv_row, extra and environment), validate.json (a validation's
verdicts), and directories, searched through: tfbench_results.csv with tfbench_runs/, and the
directories of sweep (sweep.csv), evaluate (evaluation.csv), validate (validate.json,
children.csv) and launch (rows.csv), whose results are recorded under that source ('import'
otherwise). A manifest beside a CSV row (runs/, tfbench_runs/, the CSV's own directory, or
anywhere in a directory imported) gives that row its environment. A result is its run id and a
validation its host and start, so importing again adds nothing.

One line per file: results added, already there, refused and why. The files of a directory whose
results were all read from another file of the same import (a sweep's points/ beside its
sweep.csv) share one line; what holds no results in a directory (logs, report tables, a health
reading) is passed over, and refused when named. Exit: 0 when everything given was read; 2 when a
path is missing, a file is refused or nothing could be read; 1 when the store refused a write
(each after importing everything else).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, TextIO

from tfbench.errors import EXIT_OK, TfbenchError, UsageError
from tfbench.history import record
from tfbench.history.readers import (NotResults, Refused, is_csv, json_files, manifest,
                                     read_csv, read_json, runs, source_of)
from tfbench.history.store import Recorded, Store

NOT_CHIEF = "a worker's own row of a multi-worker run (the run is its chief's result)"


@dataclass
class Report:
    """What one file (or a folder of manifests) gave the history."""
    shown: str                              # the path as the user named it
    what: str = "result"
    added: int = 0
    grown: int = 0                          # results already there that gained a worker
    already: int = 0
    copies: int = 0                         # read from another file of this import before
    refused: list[str] = field(default_factory=list)   # one reason per row refused
    error: Optional[str] = None             # the whole file refused
    environments: int = 0                   # rows given their environment by a manifest
    store_error: bool = False
    copy_files: list[str] = field(default_factory=list)   # files folded into this line
    folder: str = ""                        # a folder of manifests: its path
    not_results: bool = False               # refused as a file that holds no results

    def count(self, outcomes: Iterable[str]) -> None:
        for outcome in outcomes:
            if outcome == "added":
                self.added += 1
            elif outcome == "updated":
                self.grown += 1
            elif outcome == "copy":
                self.copies += 1
            else:
                self.already += 1

    @property
    def only_copies(self) -> bool:
        return (self.error is None and not self.refused and self.copies > 0
                and not (self.added or self.grown or self.already))

    def line(self) -> str:
        if self.error is not None:
            return "%s: refused: %s" % (self.shown, self.error)
        if self.copy_files:
            names = self.copy_files
            return "%s: %d more %s only results read above (%s%s)" % (
                self.shown, len(names), "file holds" if len(names) == 1 else "files hold",
                ", ".join(names[:3]), ", ..." if len(names) > 3 else "")
        parts = ["%s added" % _n(self.added, self.what), "%d already there" % self.already]
        if self.grown:
            parts.append("%d gained a worker's row" % self.grown)
        if self.copies:
            parts.append("%d read above from another file" % self.copies)
        text = "%s: %s" % (self.shown, ", ".join(parts))
        if self.environments:
            text += " (environment from %s)" % _n(self.environments, "manifest")
        if self.refused:
            reasons: dict[str, int] = {}
            for reason in self.refused:
                reasons[reason] = reasons.get(reason, 0) + 1
            text += "; refused %d: %s" % (len(self.refused), "; ".join(
                "%s (%d)" % (r, n) if n > 1 else r for r, n in reasons.items()))
        return text


def _n(count: int, word: str) -> str:
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


# --- the import ---------------------------------------------------------------------------
class Importer:
    """Adds files to one store, remembering which run ids this import has read."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: set[str] = set()

    def _add(self, report: Report, results: Sequence[Recorded]) -> None:
        try:
            outcomes = self.store.add_many(results)
        except Exception as exc:  # noqa: BLE001 - one line, the driver's words translated
            from tfbench.history.errors import why
            report.error = "not added: the history at %s could not be written (%s)" % (
                self.store.where(), why(exc))
            report.store_error = True
            return
        report.count("copy" if o.outcome == "already" and o.run_id in self.seen else o.outcome
                     for o in outcomes)
        self.seen.update(r.run_id for r in results)

    def csv_file(self, path: str, shown: str, manifests: Optional[dict[str, str]] = None,
                 used: Optional[set[str]] = None) -> Report:
        report = Report(shown)
        try:
            rows, report.refused = read_csv(path)
        except Refused as exc:
            report.error = str(exc)
            report.not_results = isinstance(exc, NotResults)
            return report
        if manifests is None:
            from tfbench.report.load import json_dirs_for
            manifests = json_files(json_dirs_for([path]))
        found = {}
        for run_id in dict.fromkeys(r["run_id"] for r in rows):
            data = manifest(manifests, run_id)
            if data is not None:
                found[run_id] = data
        if used is not None:
            used.update(found)
        source = source_of(path)
        # A launch of validate keeps each host's runs apart, as it does when it runs.
        together = not os.path.isfile(os.path.join(os.path.dirname(path), "validate.json"))
        singles, results = [], []
        for run in (runs(rows) if together else [[r] for r in rows]):
            if len(run) > 1:
                results += record.from_rows(run, source, found, one_run=True)
            elif found.get(run[0]["run_id"], {}).get("chief") is False:
                report.refused.append(NOT_CHIEF)
            else:
                singles.append(run[0])
        results = record.from_rows(singles, source, found) + results
        report.environments = sum(r.run_id in found for r in results)
        self._add(report, results)
        return report

    def manifests(self, found: Sequence[tuple[str, dict[str, Any]]], shown: str) -> Report:
        """Manifests (path, content) added on their own (no CSV row of theirs was read)."""
        report = Report(shown, folder=os.path.dirname(found[0][0]) if len(found) > 1 else "")
        results = []
        for path, data in found:
            if data.get("chief") is False:
                report.refused.append(NOT_CHIEF)
                continue
            try:
                results.append(record.from_run(
                    data["csv_row"], data.get("extra") or {}, data.get("environment") or {},
                    str(data["run_id"]), source_of(path)))
            except (AttributeError, TypeError, ValueError):
                report.refused.append("%s: a manifest of an unexpected shape"
                                      % os.path.basename(path))
        self._add(report, results)
        return report

    def validation(self, data: dict[str, Any], shown: str) -> Report:
        report = Report(shown, what="verdict")
        checks = [r for r in data["rows"] if isinstance(r, dict)]
        try:
            added = self.store.add_validation(record.validation_id(data),
                                              str(data.get("started") or ""),
                                              str(data.get("level") or ""), checks)
        except Exception as exc:  # noqa: BLE001
            from tfbench.history.errors import why
            report.error = "not added: the history at %s could not be written (%s)" % (
                self.store.where(), why(exc))
            report.store_error = True
            return report
        report.count([added.outcome] * len(checks))
        return report

    def file(self, path: str) -> Report:
        """A file named on the command line."""
        if is_csv(path):
            return self.csv_file(path, path)
        if path.lower().endswith(".json"):
            try:
                kind, data = read_json(path)
            except Refused as exc:
                return Report(path, error=str(exc))
            if kind == "validation":
                return self.validation(data, path)
            return self.manifests([(path, data)], path)
        return Report(path, error="not a results CSV or a JSON manifest tfbench writes")

    def directory(self, top: str) -> list[Report]:
        """Every tfbench file under `top`: CSVs first (shallow ones first: a study's own file
        before its points'), then manifests no CSV row named, then validations."""
        csvs, jsons = [], []
        for folder, subdirs, names in os.walk(top):
            subdirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                if is_csv(name):
                    csvs.append(path)
                elif name.endswith(".json"):
                    jsons.append(path)
        depth = lambda p: os.path.relpath(p, top).count(os.sep)  # noqa: E731
        csvs.sort(key=lambda p: (depth(p), p))
        manifests = {os.path.basename(p)[:-len(".json")]: p for p in reversed(jsons)}
        reports, used, copies = [], set(), []
        for path in csvs:
            report = self.csv_file(path, path, manifests, used)
            if report.not_results:
                continue   # a report table, a sweep's points.csv, validate.csv: not results
            (copies if report.only_copies else reports).append(report)
        alone: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        validations = []
        for path in jsons:
            run_id = os.path.basename(path)[:-len(".json")]
            if run_id in used or run_id in self.seen:
                continue
            try:
                kind, data = read_json(path)
            except NotResults:
                continue   # a health reading, evaluation.json, a browser check: not results
            except Refused as exc:
                reports.append(Report(path, error=str(exc)))
                continue
            if kind == "validation":
                validations.append((path, data))
            else:
                alone.setdefault(os.path.dirname(path), []).append((path, data))
        for folder, found in alone.items():
            shown = found[0][0] if len(found) == 1 else "%s (%d run manifests)" % (
                os.path.join(folder, ""), len(found))
            report = self.manifests(found, shown)
            (copies if report.only_copies else reports).append(report)
        if copies:
            reports.append(Report(top, copies=sum(r.copies for r in copies),
                                  copy_files=[os.path.join(os.path.relpath(r.folder, top), "")
                                              if r.folder else os.path.relpath(r.shown, top)
                                              for r in copies]))
        reports += [self.validation(data, path) for path, data in validations]
        if not reports:
            reports.append(Report(top, error="no tfbench results CSV, run manifest or "
                                              "validate.json in it"))
        return reports

    def path(self, path: str) -> list[Report]:
        if os.path.isdir(path):
            return self.directory(path)
        if not os.path.exists(path):
            return [Report(path, error="no such file or directory")]
        return [self.file(path)]


def main(store: Store, paths: Sequence[str], out: TextIO) -> int:
    """`tfbench history import PATHS` on an open store; prints a line per file and the total.
    Raises UsageError (exit 2) when a path given could not be read, TfbenchError (exit 1) when
    the store refused a write: each after importing everything else."""
    importer = Importer(store)
    reports = []
    for path in paths:
        for report in importer.path(path):
            out.write(report.line() + "\n")
            out.flush()
            reports.append(report)
    results = [r for r in reports if r.what == "result"]
    verdicts = sum(r.added for r in reports if r.what == "verdict")
    if any(r.added or r.grown for r in results):
        # The series' levels, as the first listing would find them: the listing after an
        # import of many results reads them (about 2 s for 1,000 series, once).
        from tfbench.history import views
        try:
            views.keep_levels(store)
        except Exception:  # noqa: BLE001 - derived data: the listing finds them itself
            pass
    out.write("History: %s added to %s, %d already there%s\n" % (
        _n(sum(r.added + r.grown for r in results), "result"), store.where(),
        sum(r.already for r in results), ", %s added" % _n(verdicts, "verdict") if verdicts
        else ""))
    failed = [r for r in reports if r.store_error]
    if failed:
        raise TfbenchError("history import: %s not added: the history could not be written "
                           "(above)" % _n(len(failed), "file"))
    refused = [r for r in reports if r.error is not None]
    if refused:
        raise UsageError("history import: %s could not be read (above): %s%s" % (
            _n(len(refused), "file"), ", ".join(r.shown for r in refused[:3]),
            ", ..." if len(refused) > 3 else ""))
    return EXIT_OK
