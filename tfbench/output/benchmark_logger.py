"""--benchmark_log_dir: `benchmark_run.log` and `metric.log` in the legacy JSON format.

The legacy script needed tensorflow/models' BenchmarkFileLogger; this writes the same files
without it: one JSON object of run information, and one JSON object per metric line.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import numbers
import os
from typing import Any, Optional

from tfbench.config.settings import Settings
from tfbench.results import RunResult

RUN_LOG = "benchmark_run.log"
METRIC_LOG = "metric.log"
_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _utc(ts: Optional[float] = None) -> str:
    moment = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc) if ts is not None \
        else datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime(_DATE_FORMAT)


def _param_entry(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"name": name, "bool_value": str(value)}
    if isinstance(value, int):
        return {"name": name, "long_value": value}
    if isinstance(value, float):
        return {"name": name, "float_value": value}
    return {"name": name, "string_value": value if isinstance(value, str) else str(value)}


def _cpu_info() -> dict[str, Any]:
    from tfbench.distribute.devices import cpu_model_name
    return {"num_cores": multiprocessing.cpu_count(), "cpu_info": cpu_model_name()}


def run_info(p: Settings, result: RunResult, devices: list[str],
             num_epochs: float) -> dict[str, Any]:
    import psutil
    memory = psutil.virtual_memory()
    dataset = "%s (synthetic)" % result.dataset if result.data_source == "synthetic" \
        else result.dataset
    run_params = {
        # Legacy self.batch_size: one worker's images per step (every device of it).
        "batch_size": result.global_batch_size // max(result.num_workers, 1),
        "batch_size_per_device": result.batch_size,
        "data_format": result.data_format,
        "dataset": dataset,
        "devices": str(devices),
        "mode": {"forward_only": "forward only", "eval": "evaluation"}.get(result.mode,
                                                                          result.mode),
        "model": result.model,
        "num_batches": result.num_batches,
        "num_epochs": num_epochs,
        "optimizer": p.learning.optimizer,
        "rewrite_config": "None",
        "single_sess": False,
        "precision": result.precision,
    }
    return {
        "model_name": result.model,
        "dataset": {"name": dataset},
        "machine_config": {"cpu_info": _cpu_info(), "memory_total": memory.total,
                           "memory_available": memory.available},
        "test_id": p.outputs.benchmark_test_id,
        "run_date": _utc(),
        "tensorflow_version": {"version": result.tf_version,
                               "git_hash": result.extra.get("tf_git_hash", "")},
        "tensorflow_environment_variables": [
            {"name": k, "value": v} for k, v in sorted(os.environ.items())
            if k.startswith("TF_")],
        "run_parameters": [_param_entry(k, v) for k, v in sorted(run_params.items())],
    }


def metric(name: str, value: float, global_step: Optional[int],
           timestamp: Optional[float] = None) -> Optional[dict[str, Any]]:
    if not isinstance(value, numbers.Number):
        return None
    return {"name": name, "value": float(value), "unit": None, "global_step": global_step,
            "timestamp": _utc(timestamp), "extras": []}


def metrics_for(result: RunResult) -> list[dict[str, Any]]:
    """Step-line means as current_examples_per_sec, accuracies when shown, then the total.

    Step-line figures carry the Step line's (this worker's) step number; the total carries
    every worker's steps (legacy num_steps = local_step * num_workers)."""
    rows = []
    for event in result.extra.get("display_events", []):
        rows.append(metric("current_examples_per_sec", event["images_per_sec"], event["step"],
                           event["time"]))
        for key in ("top_1_accuracy", "top_5_accuracy"):
            if event.get(key) is not None:
                rows.append(metric(key, event[key], event["step"], event["time"]))
    if result.steps_run:
        rows.append(metric("average_examples_per_sec", result.images_per_sec,
                           result.steps_run * result.num_workers))
    return [r for r in rows if r is not None]


def write(log_dir: str, p: Settings, result: RunResult) -> None:
    os.makedirs(log_dir, exist_ok=True)
    info = run_info(p, result, result.extra.get("devices", []),
                    result.extra.get("num_epochs", 0.0))
    with open(os.path.join(log_dir, RUN_LOG), "w") as handle:
        json.dump(info, handle)
        handle.write("\n")
    with open(os.path.join(log_dir, METRIC_LOG), "a") as handle:
        for row in metrics_for(result):
            json.dump(row, handle)
            handle.write("\n")
