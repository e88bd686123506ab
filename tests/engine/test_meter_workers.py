"""Figures of a multi-worker run (tfbench.engine.meter.finish): which are the whole run's
and which this host's, on stand-ins whose per-host and global counts differ (2 workers of 4
images a step each: 8 a step in all)."""

import pytest

from tfbench.config.settings import make_settings
from tfbench.engine import meter as meter_lib
from tfbench.engine.resolved import resolve
from tfbench.engine.runlog import SilentLog
from tfbench.results import RunResult

DATASET = 1_280_000
WHOLE_RUN_IPS = 800.0       # images/sec of both workers together, the run's figure


class _HostMonitor:
    """A monitor of this host: says which images and images/sec it was handed."""
    name = "stand_in"

    def stop(self):
        pass

    def samples(self):
        return []

    def summary(self, images=None, images_per_sec=None):
        return {"monitor_images": images, "monitor_images_per_sec": images_per_sec}


def _finish_two_workers() -> RunResult:
    p = make_settings({"device": "cpu", "model": "trivial", "batch_size": 4,
                     "job_name": "worker", "worker_hosts": "127.0.0.1:1,127.0.0.1:2",
                     "task_index": 0, "variable_update": "collective_all_reduce",
                     "estimate_dataset_size": DATASET})
    plan = resolve(p)
    assert (plan.num_workers, plan.worker_batch, plan.global_batch) == (2, 4, 8)
    res = RunResult(images_per_sec=WHOLE_RUN_IPS, step_times=[0.01] * 10)
    meter = meter_lib.Meter(("/cpu:0",), [_HostMonitor()])
    meter_lib.finish(res, p, plan, meter, None, None, SilentLog())
    return res


def test_the_training_time_estimate_is_the_whole_runs_not_one_workers():
    """Both workers train one model: the dataset goes through at the run's 800 images/sec
    (one worker's 400 would double the estimate)."""
    extra = _finish_two_workers().extra
    assert extra["estimate_images_per_sec"] == WHOLE_RUN_IPS
    assert extra["estimated_train_hours"] == pytest.approx(
        DATASET / (WHOLE_RUN_IPS * extra["estimate_utilization"]) / 3600)


def test_this_hosts_monitors_see_this_workers_images():
    """While the host's own monitors (power per image) get this worker's share: 10 steps of 4
    images at half the run's rate."""
    extra = _finish_two_workers().extra
    assert (extra["monitor_images"], extra["monitor_images_per_sec"]) == (
        40, WHOLE_RUN_IPS / 2)


PS_CONTROLLER = {"ps_hosts": "127.0.0.1:7001", "worker_hosts": "127.0.0.1:7002,127.0.0.1:7003",
                 "controller_host": "127.0.0.1:7004", "job_name": "controller"}


@pytest.mark.parametrize("flags, named", [({}, True), (PS_CONTROLLER, False)],
                         ids=["one_host", "parameter_server_controller"])
def test_the_device_name_is_written_once_where_the_run_is_described(flags, named, monkeypatch):
    """runner.describe names the devices that run the steps (none on a parameter-server
    controller, whose own devices are not the workers'); finish only reads the name (MFU's
    peak is looked up by it, or not judged at all), it never blanks or rewrites it."""
    from counted_result import CountedResult
    from tfbench.engine import runner
    from tfbench.engine.resolved import read_facts
    from tfbench.measure import peak
    p = make_settings(dict(flags, device="cpu", model="trivial", batch_size=4))
    facts = read_facts(p)
    res = CountedResult(gflops_per_image=1.0)
    runner.describe(p, facts, res)
    plan = resolve(p, facts=facts)
    looked_up = []
    monkeypatch.setattr(peak, "cached_peak", lambda name, precision: looked_up.append(name))
    meter = meter_lib.Meter.start(plan, 10.0)
    meter.start_repeat()
    meter.end_repeat(10, 1.0)
    meter_lib.finish(res, p, plan, meter, None, None, SilentLog())
    assert res.writes["extra.device_name"] == 1
    assert bool(res.extra["device_name"]) == named
    assert looked_up == ([res.extra["device_name"]] if named else [])
