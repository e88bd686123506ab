"""Everything a finished (or failed) run writes: CSV row, JSON manifest, benchmark logs.

Formatters only: they read RunResult and the Settings, never TensorFlow state. What is printed is
tfbench.output.console's and tfbench.output.classic_log's.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Optional

from tfbench.config.settings import Settings
from tfbench.output import csv_out
from tfbench.results import RunResult


# The JSON manifest's own version. 1 (tfbench 0.1.0 before it had one): the flags' values
# under "params" and those typed under "params_explicit", a name the CSV row gives the model's
# trainable parameters (there "params_count"). 2: "flags" and "flags_given"; "params" is the
# trainable-parameter count, as in the CSV row and on the console.
MANIFEST_VERSION = 2

_RESULTS = re.compile(r"Results: (\S+) row appended to (.+) \(run (\S+)\)")


def results_line(status: str, csv_path: str, run_id: str) -> str:
    """`Results: ok row appended to tfbench_results.csv (run ...)`: where the row went."""
    return "Results: %s row appended to %s (run %s)" % (status, csv_path, run_id)


def results_line_to(line: str, csv_path: str) -> Optional[str]:
    """The Results line `line` naming `csv_path` instead (a launch task's row travels on to
    the launcher's CSV); None when `line` is no Results line."""
    match = _RESULTS.fullmatch(line)
    return results_line(match.group(1), csv_path, match.group(3)) if match else None


def manifest(p: Settings, result: RunResult, row: dict[str, str]) -> dict[str, Any]:
    """The JSON manifest: every field of the result, the flags' values and which were given,
    and `row`, the run's CSV row (csv_out.row_for(result), built once per run by write_all)."""
    data = result.to_dict()
    data["manifest_version"] = MANIFEST_VERSION
    data["flags"] = p.flag_values()
    data["flags_given"] = sorted(p.explicit)
    data["csv_row"] = row
    return data


def manifest_path(p: Settings, result: RunResult) -> Optional[str]:
    """Where the run's JSON manifest goes (--json_dir/<run_id>.json), or None without one."""
    return os.path.join(p.outputs.json_dir, "%s.json" % result.run_id) \
        if p.outputs.json_dir else None


@dataclasses.dataclass(frozen=True)
class Written:
    """What write_all wrote: the lines to print about it, and the run's CSV row (None for a
    parameter-server task that served: it has none), which the results history records too."""
    lines: list[str]
    row: Optional[dict[str, str]]


def write_all(p: Settings, result: RunResult) -> Written:
    """Writes every enabled output."""
    lines: list[str] = []
    if result.server_task and result.status == "ok":
        # ps / worker tasks of a parameter-server cluster measure nothing themselves.
        return Written(["%s: done serving the cluster; the controller reports the results"
                        % result.server_task], None)
    # The row, built once: the manifest, the CSV file and the history get the same one.
    row = csv_out.row_for(result)
    path = manifest_path(p, result)
    if path:
        result.json_file = path
        csv_out.write_json_atomic(path, manifest(p, result, row))
    if p.outputs.benchmark_log_dir:
        from tfbench.output import benchmark_logger
        benchmark_logger.write(p.outputs.benchmark_log_dir, p, result)
    if p.outputs.csv_file:
        notice = csv_out.append_rows(p.outputs.csv_file, [row])
        if notice:
            lines.append(notice)
        lines.append(results_line(result.status, p.outputs.csv_file, result.run_id))
    return Written(lines, row)
