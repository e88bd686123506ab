"""A stand-in for the children of `tfbench validate` (tests/validate/test_run_plan.py,
tests/cli/test_validate.py), without TensorFlow:

    python validate_fake_child.py SCRIPT health --json=FILE ...
    python validate_fake_child.py SCRIPT BENCHMARK FLAGS... --csv_file=F --json_dir=D

SCRIPT is a JSON file: {"health": [what each health child does, in turn], "train": [what each
training child does, in turn], "allreduce": what the all-reduce probe of a training child given
--validate_allreduce_json does}. What a child does:
  {"sleep": seconds first, "exit": code, "stdout": "last line", "write": false (write nothing)}
  health: "report": the JSON it writes (tfbench.measure.health_read.report's shape)
  train: "images_per_sec", "device_checks": [entries], "numeric": {...}, "explained": {...},
         "step_times": [...], "notices": [...], "status": "ok"
  allreduce: "probe": the JSON it writes (tfbench.engine.allreduce_run.AllReduceProbe.to_json's
             shape); "write": false writes none
Each child appends its argv to SCRIPT + ".calls" (one JSON line), so a test sees what ran.
"""

from __future__ import annotations

import json
import os
import sys
import time

import paths  # noqa: F401 - the checkout's root first on sys.path

from tfbench.children import rows as rows_lib  # noqa: E402
from tfbench.output import csv_out  # noqa: E402


def _option(args, name):
    prefix = "--%s=" % name
    return next((a[len(prefix):] for a in args if a.startswith(prefix)), None)


def _take(script_path, kind):
    """This kind's next behaviour (the last one repeats)."""
    with open(script_path) as handle:
        script = json.load(handle)
    calls_path = script_path + ".calls"
    calls = []
    if os.path.exists(calls_path):
        with open(calls_path) as handle:
            calls = [json.loads(line) for line in handle]
    n = sum(c["kind"] == kind for c in calls)
    with open(calls_path, "a") as handle:
        handle.write(json.dumps({"kind": kind, "argv": sys.argv[2:]}) + "\n")
    todo = script.get(kind)
    if isinstance(todo, list):
        return todo[min(n, len(todo) - 1)] if todo else {}
    return todo or {}


def main():
    script_path, args = sys.argv[1], sys.argv[2:]
    kind = "health" if args[:1] == ["health"] else "train"
    todo = _take(script_path, kind)
    time.sleep(todo.get("sleep", 0))
    if todo.get("stdout"):
        print(todo["stdout"])
    if todo.get("write", True):
        if kind == "health":
            with open(_option(args, "json"), "w") as handle:
                json.dump(todo.get("report", {"readings": None, "why": "no NVIDIA driver"}),
                          handle)
        else:
            _train(args, todo, script_path)
    sys.stdout.flush()
    return int(todo.get("exit", 0))


def _probe(script_path, path):
    with open(script_path) as handle:
        todo = json.load(handle).get("allreduce") or {}
    if todo.get("write", True):
        with open(path, "w") as handle:
            json.dump(todo.get("probe", {"ranks": 2, "timings": []}), handle)


def _train(args, todo, script_path):
    if todo.get("exit", 0) == 0 and _option(args, "validate_allreduce_json"):
        _probe(script_path, _option(args, "validate_allreduce_json"))
    flags = [a for a in args if not a.startswith(("--csv_file=", "--json_dir="))]
    row = rows_lib.failure_row(flags, todo.get("status", "ok"), "", " ".join(sys.argv))
    row["images_per_sec"] = str(todo.get("images_per_sec", 100.0))
    csv_out.append_rows(_option(args, "csv_file"), [row])
    checks = todo.get("device_checks")
    chosen = _option(args, "validate_device_checks")
    if chosen and checks:   # as the real child: the figures of the checks it ran only
        names = chosen.split(",")
        drop = {"step": ("alone_ms", "together_ms"), "kernels": ("matmul_tflops",
                                                                 "conv_tflops")}
        checks = [dict(e, **{k: None for c, keys in drop.items() if c not in names
                             for k in keys}) for e in checks]
    extra = {"device_name": todo.get("device_name"),
             "device_checks": checks,
             "device_checks_run": chosen.split(",") if chosen else None,
             "device_checks_numeric": todo.get("numeric", {"reference": "/cpu:0",
                                                           "deterministic": True,
                                                           "bound": 1e-5})}
    if todo.get("explained"):
        extra["scaling_explained"] = todo["explained"]
    manifest = {"run_id": row["run_id"], "status": todo.get("status", "ok"),
                "model": row["model"], "mode": "training", "precision": row["precision"],
                "batch_size": int(row["batch_size"] or 0) or None,
                "num_devices": int(row["num_devices"] or 1),
                "global_batch_size": todo.get("global_batch_size", 8),
                "device_kind": "cpu", "xla": False, "variable_update": "replicated",
                "images_per_sec": todo.get("images_per_sec", 100.0),
                "step_times": todo.get("step_times", [0.01] * 10),
                "notices": todo.get("notices", []), "extra": extra,
                "csv_row": row}   # as tfbench.output.files writes a manifest
    json_dir = _option(args, "json_dir")
    os.makedirs(json_dir, exist_ok=True)
    with open(os.path.join(json_dir, row["run_id"] + ".json"), "w") as handle:
        json.dump(manifest, handle)


if __name__ == "__main__":
    sys.exit(main())
