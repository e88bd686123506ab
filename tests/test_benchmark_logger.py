"""--benchmark_log_dir files: the legacy figures for a run of several workers."""

import types

from tfbench.output import benchmark_logger
from tfbench.results import RunResult


def _two_worker_result():
    return RunResult(model="trivial", dataset="imagenet", mode="training", batch_size=4,
                     global_batch_size=8, num_workers=2, step_times=[0.1] * 5,
                     images_per_sec=160.0)


def test_batch_size_is_the_workers_batch():
    p = types.SimpleNamespace(optimizer="sgd", benchmark_test_id=None)
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
