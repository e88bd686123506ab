"""--benchmark_log_dir files: the legacy figures for a run of several workers."""

import types

from tfbench.config.settings import make_settings
from tfbench.output import benchmark_logger
from tfbench.results import RunResult


def _two_worker_result():
    return RunResult(model="trivial", dataset="imagenet", mode="training", batch_size=4,
                     global_batch_size=8, num_workers=2, step_times=[0.1] * 5,
                     images_per_sec=160.0)


def test_batch_size_is_the_workers_batch():
    p = make_settings({"optimizer": "sgd"})
    info = benchmark_logger.run_info(p, _two_worker_result(), ["/cpu:0"], 0.0)
    params = {e["name"]: e for e in info["run_parameters"]}
    # Legacy run_param batch_size is self.batch_size: per device x devices of one worker.
    assert params["batch_size"] == {"name": "batch_size", "long_value": 4}
    assert params["batch_size_per_device"] == {"name": "batch_size_per_device", "long_value": 4}


def test_average_rate_global_step_counts_every_workers_steps():
    # Legacy: num_steps = local_step * num_workers.
    (last,) = [m for m in benchmark_logger.metrics_for(_two_worker_result())
               if m["name"] == "average_examples_per_sec"]
    assert last["global_step"] == 10 and last["value"] == 160.0


def test_the_files_written_line_by_line(tmp_path, monkeypatch):
    """benchmark_run.log and metric.log as tensorflow/models' BenchmarkFileLogger wrote them
    (official/utils/logs/logger.py): one JSON object per line, timestamps in UTC with
    microseconds and a Z."""
    import json
    import psutil
    monkeypatch.setattr(psutil, "virtual_memory",
                        lambda: types.SimpleNamespace(total=1000, available=400))
    monkeypatch.setattr(benchmark_logger, "_cpu_info",
                        lambda: {"num_cores": 2, "cpu_info": "AMD EPYC"})
    for name in [k for k in benchmark_logger.os.environ if k.startswith("TF_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    res = RunResult(model="resnet50", dataset="imagenet", data_source="synthetic",
                    mode="forward_only", batch_size=32, global_batch_size=64, num_devices=2,
                    num_batches=20, data_format="NCHW", precision="fp16", tf_version="2.21.0",
                    step_times=[0.1] * 20, images_per_sec=640.5)
    res.extra.update(tf_git_hash="v2.21.0-0-gabc", devices=["/gpu:0", "/gpu:1"],
                     num_epochs=0.25, display_events=[
                         {"step": 1, "images_per_sec": 600.25, "time": 0.5,
                          "top_1_accuracy": 0.125, "top_5_accuracy": 0.5},
                         {"step": 10, "images_per_sec": 620, "time": 86400.25,
                          "top_1_accuracy": None, "top_5_accuracy": None}])
    p = make_settings({"optimizer": "momentum", "benchmark_test_id": "t7"})
    benchmark_logger.write(str(tmp_path / "logs"), p, res)
    first = json.loads((tmp_path / "logs" / "benchmark_run.log").read_text())
    # A second run replaces the run log and appends its metrics (none: no step ran).
    benchmark_logger.write(str(tmp_path / "logs"), p, RunResult(
        model="m2", dataset="cifar10", data_source="folder", tf_version="2.21.0"))
    info = json.loads((tmp_path / "logs" / "benchmark_run.log").read_text())
    assert info.pop("run_date")[-1] == "Z"
    assert info == {
        "model_name": "m2", "dataset": {"name": "cifar10"},
        "machine_config": {"cpu_info": {"num_cores": 2, "cpu_info": "AMD EPYC"},
                           "memory_total": 1000, "memory_available": 400},
        "test_id": "t7", "tensorflow_version": {"version": "2.21.0", "git_hash": ""},
        "tensorflow_environment_variables": [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}],
        "run_parameters": info["run_parameters"]}
    assert first["model_name"] == "resnet50" and first["dataset"] == {
        "name": "imagenet (synthetic)"}
    assert first["tensorflow_version"] == {"version": "2.21.0", "git_hash": "v2.21.0-0-gabc"}
    assert first["run_parameters"] == [
        {"name": "batch_size", "long_value": 64},
        {"name": "batch_size_per_device", "long_value": 32},
        {"name": "data_format", "string_value": "NCHW"},
        {"name": "dataset", "string_value": "imagenet (synthetic)"},
        {"name": "devices", "string_value": "['/gpu:0', '/gpu:1']"},
        {"name": "mode", "string_value": "forward only"},
        {"name": "model", "string_value": "resnet50"},
        {"name": "num_batches", "long_value": 20},
        {"name": "num_epochs", "float_value": 0.25},
        {"name": "optimizer", "string_value": "momentum"},
        {"name": "precision", "string_value": "fp16"},
        {"name": "rewrite_config", "string_value": "None"},
        {"name": "single_sess", "bool_value": "False"}]
    metrics = (tmp_path / "logs" / "metric.log").read_text().splitlines()
    assert [json.loads(line) for line in metrics] == [
        {"name": "current_examples_per_sec", "value": 600.25, "unit": None, "global_step": 1,
         "timestamp": "1970-01-01T00:00:00.500000Z", "extras": []},
        {"name": "top_1_accuracy", "value": 0.125, "unit": None, "global_step": 1,
         "timestamp": "1970-01-01T00:00:00.500000Z", "extras": []},
        {"name": "top_5_accuracy", "value": 0.5, "unit": None, "global_step": 1,
         "timestamp": "1970-01-01T00:00:00.500000Z", "extras": []},
        {"name": "current_examples_per_sec", "value": 620.0, "unit": None, "global_step": 10,
         "timestamp": "1970-01-02T00:00:00.250000Z", "extras": []},
        {"name": "average_examples_per_sec", "value": 640.5, "unit": None, "global_step": 20,
         "timestamp": metrics and json.loads(metrics[-1])["timestamp"], "extras": []}]
    assert benchmark_logger.metric("x", "not a number", 1) is None
    modes = {m: benchmark_logger.run_info(p, RunResult(mode=m, data_source="folder",
                                                       dataset="cifar10"), [], 0.0)
             for m in ("training", "eval", "data_only")}
    assert [{e["name"]: e for e in i["run_parameters"]}["mode"]["string_value"]
            for i in modes.values()] == ["training", "evaluation", "data_only"]
    assert modes["eval"]["dataset"] == {"name": "cifar10"}


def test_parameters_cpu_and_timestamps_whatever_the_local_zone(monkeypatch):
    import datetime
    import os
    import time
    assert benchmark_logger._param_entry("x", ["a"]) == {"name": "x", "string_value": "['a']"}
    assert benchmark_logger._param_entry("x", None) == {"name": "x", "string_value": "None"}
    assert benchmark_logger._cpu_info()["num_cores"] == os.cpu_count()
    assert set(benchmark_logger._cpu_info()) == {"num_cores", "cpu_info"}
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert benchmark_logger._utc(0.5) == "1970-01-01T00:00:00.500000Z"
        stamp = datetime.datetime.strptime(benchmark_logger._utc(), "%Y-%m-%dT%H:%M:%S.%fZ")
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        assert abs((now - stamp).total_seconds()) < 60
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
