"""Every key of RunResult.extra is a declared figure (tfbench/figures/table.py or manifest.py),
and what a run writes reads as its declaration says: on a real tiny run's manifest and CSV row,
on every key the package writes into `extra` by name, and on each summary function's keys.

Control state (a parameter-server task, training with evaluations, an early stop, the host time
between steps, the manifest's path) is a typed RunResult field, never an `extra` key."""

import ast
import json
import os

import pytest

from helpers import ROOT, read_rows, run_inprocess
from tfbench import figures
from tfbench.measure import estimate, memory, stats
from tfbench.monitors import aggregate
from tfbench.results import RunResult

CONTROL = ("server_task", "train_and_eval", "stopped_early", "between_steps_sec", "json_file")


def _undeclared(keys):
    return sorted(k for k in keys if k not in figures.BY_NAME)


def _literal_extra_keys():
    """(key, file:line) for every key the package names on a RunResult's extra: extra["k"],
    extra.get/pop/setdefault("k"), extra.update(k=...)."""
    def is_extra(node):
        return (isinstance(node, ast.Attribute) and node.attr == "extra") or (
            isinstance(node, ast.Name) and node.id == "extra")

    found = []
    for folder, _, names in os.walk(os.path.join(ROOT, "tfbench")):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path) as handle:
                tree = ast.parse(handle.read())
            where = os.path.relpath(path, ROOT)
            for node in ast.walk(tree):
                if isinstance(node, ast.Subscript) and is_extra(node.value) and isinstance(
                        node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    found.append((node.slice.value, "%s:%d" % (where, node.lineno)))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        is_extra(node.func.value):
                    if node.func.attr in ("get", "pop", "setdefault") and node.args and \
                            isinstance(node.args[0], ast.Constant):
                        found.append((node.args[0].value, "%s:%d" % (where, node.lineno)))
                    elif node.func.attr == "update":
                        found += [(k.arg, "%s:%d" % (where, node.lineno))
                                  for k in node.keywords if k.arg]
    return found


def test_every_key_the_package_names_on_extra_is_declared():
    found = _literal_extra_keys()
    assert len(found) > 60 and "batch_norm_folded_convolutions" in dict(found)
    assert [(k, w) for k, w in found if k not in figures.BY_NAME] == []
    assert [(k, w) for k, w in found if k in CONTROL] == []


def test_control_state_is_a_typed_field_of_the_result():
    res = RunResult()
    assert (res.server_task, res.train_and_eval, res.stopped_early, res.between_steps_sec,
            res.json_file) == ("", False, False, None, "")
    assert not any(name in figures.BY_NAME for name in CONTROL)


def _gpu_samples():
    """Two GPUs' readings: a start sample, then the timed window."""
    out = []
    for gpu in (0, 1):
        for t, phase in ((0.0, "start"), (1.0, "steady_start"), (2.0, "steady"), (3.0, "end")):
            out.append({"t": t, "phase": phase, "gpu": gpu, "power_w": 200.0 + gpu,
                        "energy_j": 100.0 * t, "gpu_util_pct": 90, "mem_util_pct": 40,
                        "temp_c": 60, "sm_clock_mhz": 1400, "throttle_mask": 0,
                        "mem_used_bytes": 1 << 30})
    return out


def _host_samples():
    return [{"t": t, "phase": phase, "cpu_util_pct": 50.0, "proc_cpu_pct": 120.0,
             "rss_bytes": 1 << 30}
            for t, phase in ((0.0, "start"), (1.0, "steady_start"), (2.0, "end"))]


def _summaries():
    """Each summary function that is merged into extra, on small real inputs."""
    from helpers import FakeNvml, a100, run_without_thread, ticking_clock
    from tfbench.monitors.host import HostMonitor
    from tfbench.monitors.nvml import NvmlMonitor
    gpu = NvmlMonitor([0], interval_sec=0, nvml=FakeNvml([a100()]), clock=ticking_clock(),
                      environ={})
    run_without_thread(gpu)
    host = HostMonitor(interval_sec=0)
    run_without_thread(host)
    peaks = {"/GPU:0": 2 << 30, "/GPU:1": 3 << 30}
    return {
        "latency": stats.latency_summary([0.1, 0.2, 0.3]),
        "cold_start": stats.cold_start_summary([1.0, 0.2], [0.1, 0.1]),
        "between_steps": stats.between_steps_summary(0.5, 10),
        "repeats": stats.repeat_summary([100.0, 110.0, 90.0], 10.0),
        "memory_gpu": memory.memory_summary("gpu", peaks, 4 << 30, 100.0, None, peaks, peaks),
        "memory_cpu": memory.memory_summary("cpu", {}, 4 << 30, 100.0),
        "memory_none": memory.memory_summary("gpu", {"/GPU:0": None}, None, 100.0, "why"),
        "estimate": estimate.estimate_summary(100.0, 1000, 2.0, 0.7),
        "gpu_aggregate": aggregate.gpu_summary(_gpu_samples(), 1000, 250.0),
        "host_aggregate": aggregate.host_summary(_host_samples()),
        "nvml_monitor": gpu.summary(images=1000, images_per_sec=250.0),
        "host_monitor": host.summary(images=1000, images_per_sec=250.0),
        "nvml_absent": NvmlMonitor([0], interval_sec=0, nvml=None, environ={
            "CUDA_VISIBLE_DEVICES": "-1"}).summary(),
    }


def test_each_summary_functions_keys_are_declared():
    summaries = _summaries()
    assert summaries["nvml_monitor"]["nvml_monitor"] == "ok" and "gpus" in summaries[
        "nvml_monitor"]
    assert {name: _undeclared(s) for name, s in summaries.items()} == {
        name: [] for name in summaries}


@pytest.mark.slow
def test_a_real_runs_manifest_holds_declared_figures_only_and_its_row_reads_as_declared(
        tmp_path):
    """Repeats, the training-time estimate, the monitors and memory on a CPU run; forward-only
    folds batch norm."""
    base = ["--device=cpu", "--model=resnet20", "--data_name=cifar10", "--batch_size=4",
            "--num_batches=2", "--num_warmup_batches=1", "--json_dir=runs",
            "--csv_file=results.csv"]
    for extra in (["--num_runs=2", "--estimate_dataset_size=1000"], ["--forward_only"]):
        code, lines = run_inprocess(base + extra, tmp_path)
        assert code == 0, lines
    manifests = [json.loads((tmp_path / "runs" / name).read_text())
                 for name in sorted(os.listdir(tmp_path / "runs"))]
    assert len(manifests) == 2
    keys = set().union(*(m["extra"] for m in manifests))
    assert {"images_per_sec_runs", "estimated_train_hours", "samples", "host_monitor",
            "batch_norm_folded_convolutions", "peak_mem_source"} <= keys
    assert _undeclared(keys) == [] and not keys & set(CONTROL)
    assert all(m["json_file"].endswith(m["run_id"] + ".json") for m in manifests)
    rows = read_rows(tmp_path / "results.csv")
    assert len(rows) == 2
    read = {"int": int, "bool": lambda v: {"0": 0, "1": 1}[v], "float": float, "text": str}
    for row in rows:
        for figure in figures.CSV_FIGURES:
            value = row[figure.name]
            if value:
                read[figure.type](value)   # a cell that does not read as declared raises
