"""`tfbench launch`: several hosts in one command, one benchmark task per host over ssh.

`tfbench launch --hosts=h1,h2 -- FLAGS` runs, on host i, `<remote_cmd> FLAGS --job_name=worker
--worker_hosts=h1:port,h2:port --task_index=i` (launch/remote.py), i.e. one
MultiWorkerMirroredStrategy cluster whose chief (task 0) prints the classic log on this
terminal, unchanged, while every host's log goes to its own file.

Before anything starts every host answers with its versions; a host that cannot be reached or
runs other versions than the chief is one error line naming it, and nothing runs. During the run,
the first task to fail is named in one line; the others get a few seconds to end by themselves
(TensorFlow finds a dead peer at once and a hung one within its 10 s heartbeat) and are then
stopped, all within --cluster_timeout_secs. SIGINT/SIGTERM stop every task the same way. Every
task's row (its own, or one written for it when it could not) goes to the local CSV.

`--sweep_hosts=1,2,4` runs that on the first N hosts for each N and prints the scaling
efficiency table (report.studies) with the interconnect each point saw (measure/nccl_log.py).
The tasks of one launch are in tasks.py, the chief's console in console.py.
"""

from __future__ import annotations

import datetime
import os
import shlex
from typing import TYPE_CHECKING, Optional, Sequence, TextIO

from tfbench import errors
from tfbench.children import rows as rows_lib
from tfbench.children.outcome import study_end
from tfbench.launch.console import ChiefConsole
from tfbench.launch.remote import task_flags
from tfbench.launch.versions import ask_versions, version_problems
from tfbench.launch.tasks import LaunchConfig, LaunchResult, host_failure_row, run_tasks

if TYPE_CHECKING:
    import pandas as pd

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


def preflight(cfg: LaunchConfig, stderr: TextIO) -> Optional[int]:
    """Every host answers with the chief's versions, or one error line, a row per host at fault,
    and exit code 5 (returned); None when all is well."""
    answers = ask_versions(cfg.rsh, cfg.hosts, cfg.remote_cmd, cfg.cluster_timeout)
    problems = version_problems(answers)
    if not problems:
        print("tfbench launch: %d host(s), each with %s" % (len(cfg.hosts), answers[0].version),
              file=stderr)
        return None
    message = "; ".join("%s: %s" % (host.label, cause) for host, cause in problems)
    index = {h.address: i for i, h in enumerate(cfg.hosts)}
    rows = [host_failure_row(task_flags(cfg.flags, cfg.hosts, index[host.address],
                                        cfg.gpus_per_task), "error",
                             "%s: %s" % (host.label, cause),
                             shlex.join([cfg.remote_cmd, "--version"]), host, len(cfg.hosts))
            for host, cause in problems]
    save_rows(cfg, rows, os.path.join(cfg.out_dir, "rows.csv"), stderr)
    print(errors.error_line(message), file=stderr)
    return errors.EXIT_DISTRIBUTED


def save_rows(cfg: LaunchConfig, rows: list[dict[str, str]], path: str,
               stderr: TextIO, one_run: bool = True) -> None:
    """Appends the rows to `path` and the local CSV, each recording the user's command (a
    task's own is the launcher's, with a --csv_file on its host that no longer exists); the
    history keeps the rows of one run (`one_run`: the tasks of one cluster) as one result, the
    chief's (the first row)."""
    for row in rows:
        row["command"] = cfg.command or row["command"]
    rows_lib.save_rows(rows, path, cfg.csv_file, lambda notice: print(notice, file=stderr),
                       one_run=one_run)


def launch(cfg: LaunchConfig, stdout: TextIO, stderr: TextIO) -> int:
    """One task per host, the chief's classic log on stdout (see ChiefConsole); the exit code."""
    failed = preflight(cfg, stderr)
    if failed is not None:
        return failed
    where = cfg.csv_file or os.path.join(cfg.out_dir, "rows.csv")
    console = ChiefConsole(stdout, stderr, where)
    try:
        result = run_tasks(cfg, cfg.hosts, cfg.out_dir, console)
    except errors.Interrupted as exc:
        result = exc.launch_result    # type: ignore[attr-defined]
    save_rows(cfg, result.rows, os.path.join(cfg.out_dir, "rows.csv"), stderr)
    ok = sum(r["status"] == "ok" for r in result.rows)
    own = ["Launch: %d row(s) of %d task(s) (%d ok) appended to %s; host logs in %s"
           % (len(result.rows), len(result.hosts), ok, where, cfg.out_dir),
           "Interconnect: %s" % result.interconnect]
    console.finish(own, result.error)
    return result.exit_code


def chief_row(result: LaunchResult) -> dict[str, str]:
    """The chief's row: what its classic log reports (images/sec of every worker)."""
    return result.rows[0]


def launch_series(cfg: LaunchConfig, counts: Sequence[int], stdout: TextIO,
                  stderr: TextIO) -> int:
    """The scaling series: the first N hosts for each N in `counts`, then the efficiency table
    (devices x workers) with the interconnect each point saw; the exit code, a study's
    (children.outcome.study_end): 0 when every point's launch ended well, 6 when some did not,
    1 when none did, 130/143 when interrupted."""
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
                save_rows(cfg, result.rows, sweep_csv, stderr)
                raise
            results.append(result)
            save_rows(cfg, result.rows, sweep_csv, stderr)
            row = chief_row(result)
            print("      %s, %s images/sec, %.1f s; %s" % (
                row["status"], row["images_per_sec"] or "-", result.seconds,
                result.error or "logs in %s" % log_dir), file=stderr)
    except errors.Interrupted as exc:
        exit_code = exc.exit_code
        print("tfbench launch: %s; writing the tables for the %d finished point(s)"
              % (exc, len(results)), file=stderr)
    if results:
        stdout.write(series_tables(cfg, counts, results))
        stdout.write("\nrows: %s\ntables: %s\n" % (sweep_csv,
                                                   os.path.join(cfg.out_dir, "summary.md")))
        stdout.flush()
    if exit_code == errors.EXIT_OK:
        failed = [r for r in results if r.exit_code]
        where = "rows in %s, logs in %s" % (sweep_csv, os.path.join(cfg.out_dir, "logs"))
        if failed:   # the first failure's own line, then where everything is
            where = "first: %d host(s): %s; %s" % (len(failed[0].hosts), failed[0].error, where)
        exit_code, line = study_end([r.status for r in results], "points", where)
        if line:
            print(errors.error_line(line), file=stderr)
    return exit_code


def run_row(result: LaunchResult) -> "pd.Series":
    """A point's row for its tables: every host's row combined as each figure declares
    (report.load.combine_workers) when all are ok, else the chief's."""
    from tfbench.report import load
    rows = load.rows_frame(result.rows)
    return load.combine_workers(rows) if (rows["status"] == "ok").all() else rows.iloc[0]


def series_tables(cfg: LaunchConfig, counts: Sequence[int],
                  results: Sequence[LaunchResult]) -> str:
    """Scaling efficiency (report.studies, weak scaling over devices x workers) from each point's
    rows combined, each point with the interconnect it saw, and every point's status."""
    import pandas as pd

    from tfbench.report import load, studies, tables
    chiefs = [chief_row(r) for r in results]
    df = load.normalize(pd.DataFrame([run_row(r) for r in results]))
    sections = studies.study_sections(df, ["scaling"], "weak")
    seen = {len(r.hosts): r.interconnect for r in results}
    for section in sections:
        section.frame["interconnect"] = [seen.get(int(w), "") for w in
                                         section.frame["num_workers"]]
        section.columns.append("interconnect")
        section.note += ("; images/sec is the chief's `total images/sec` (every worker's "
                         "images), the other figures every host's row combined (docs/csv.md); "
                         "interconnect: what carried the all-reduce between hosts")
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
