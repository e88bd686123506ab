"""Input-only timing and the input-bound verdict."""

import pytest
import tensorflow as tf

from tfbench.data.diagnose import arrival_intervals, input_bound_verdict


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def now(self) -> float:
        return self.t


class SlowBatches:
    """A pipeline whose every batch takes `seconds` of the fake clock to arrive."""

    def __init__(self, clock, seconds=1.0):
        self.clock, self.seconds, self.taken = clock, seconds, 0

    def __iter__(self):
        return self

    def __next__(self):
        self.clock.t += self.seconds
        self.taken += 1
        return self.taken


def test_an_interval_runs_from_one_arrival_to_the_next():
    """next() takes 1 s, the caller then works 0.5 s: the batches after the first arrive 1.5 s
    apart (the first 1 s after it is asked for), and the intervals add up to the loop's time."""
    clock = FakeClock()
    batches = SlowBatches(clock)
    times = []
    for interval in arrival_intervals(batches, 3, clock.now):
        times.append(interval)
        clock.t += 0.5
    assert times == [1.0, 1.5, 1.5] and batches.taken == 3
    assert clock.t - 100.0 == sum(times) + 0.5    # the caller's time after the last batch


def test_data_only_step_times_are_the_arrival_intervals():
    """--data_only's steps: the caller's work between batches (here the Step lines) counts."""
    from tfbench.config.settings import make_settings
    from tfbench.engine import base, data_only, meter as meter_lib
    from tfbench.engine.resolved import DATA_ONLY, resolve
    from tfbench.engine.runlog import SilentLog
    from tfbench.results import RunResult
    clock = FakeClock()

    class SlowLog(SilentLog):
        def step(self, report):
            clock.t += 0.5
    p = make_settings({"device": "cpu", "model": "trivial", "batch_size": 4, "num_batches": 3,
                     "num_warmup_batches": 1, "display_every": 1})
    plan = resolve(p).with_facts(mode=DATA_ONLY)
    runner = data_only.DataOnlyRunner(p=p, plan=plan, strategy=tf.distribute.get_strategy(),
                                      log=SlowLog(), clock=base.Clock(perf_counter=clock.now))
    runner.dataset = lambda batch, train: SlowBatches(clock)
    res = RunResult()
    runner.run(res)
    assert res.warmup_times == [1.0]
    assert res.step_times == [1.0, 1.5, 1.5]
    # The loop's repeat, whose images/sec meter.finish computes.
    assert runner.meter.repeats == [meter_lib.Repeat(3, 4.0, complete=True)]
    meter_lib.total_images_per_sec(res, p, plan, runner.meter.repeats)
    assert res.wall_time == 4.0 and res.images_per_sec == pytest.approx(3 * 4 / 4.0)


def test_the_explain_input_probe_times_arrivals_on_the_runners_clock():
    from tfbench.config.settings import make_settings
    from tfbench.engine import base, explain
    from tfbench.engine.resolved import resolve
    from tfbench.results import RunResult
    clock = FakeClock()
    p = make_settings({"device": "cpu", "model": "trivial", "batch_size": 4, "accum_steps": 2})
    runner = base.ModeRunner(p=p, plan=resolve(p), strategy=tf.distribute.get_strategy(),
                             clock=base.Clock(perf_counter=clock.now))
    asked, batches = [], SlowBatches(clock, seconds=0.25)
    runner.inputs = lambda batch, train: (asked.append(batch), (batches, True))[1]
    found, res = {}, RunResult()
    explain._input(runner, found, res)
    assert asked == [4 * 2]                      # a step's batch: both micro-batches
    assert batches.taken == explain.INPUT_WARMUP + explain.INPUT_BATCHES
    assert found["input"]["times"] == [0.25] * explain.INPUT_BATCHES
    assert res.extra["input_step_ms"] == 250.0


def test_input_bound():
    bound, line = input_bound_verdict(1000.0, 600.0, 620.0)
    assert bound
    assert "INPUT-BOUND" in line and "1000.0" in line and "600.0" in line and "620.0" in line
    assert "60%" in line and "/dev/shm" in line and "--datasets_use_caching" in line
    assert "\n" not in line


def test_not_input_bound_when_real_is_close_to_synthetic():
    bound, line = input_bound_verdict(1000.0, 950.0, 5000.0)
    assert not bound and "not input-bound" in line and "95%" in line


def test_slow_real_but_fast_pipeline_is_not_input_bound():
    bound, line = input_bound_verdict(1000.0, 500.0, 2000.0)
    assert not bound and "4.0x" in line and "compete" in line


def test_threshold_and_degenerate_values():
    assert input_bound_verdict(1000.0, 850.0, 860.0, threshold=0.8)[0] is False
    assert input_bound_verdict(1000.0, 850.0, 860.0)[0] is True
    bound, line = input_bound_verdict(0.0, 10.0, 10.0)
    assert not bound and "cannot judge" in line


def test_input_settings_line_names_the_pool_and_the_buffers():
    from tfbench.data.diagnose import input_settings_line
    assert input_settings_line(6, "the legacy default on GPUs: 16 CPUs - 4 GPU threads - 4 for "
                               "monitoring and transfers", True) == (
        "Input settings: a private tf.data thread pool of 6 threads (the legacy default on "
        "GPUs: 16 CPUs - 4 GPU threads - 4 for monitoring and transfers); host buffers pinned "
        "(--force_gpu_compatible)")
    assert input_settings_line(None, "--datasets_num_private_threads=0", False) == (
        "Input settings: TensorFlow's shared threads for tf.data "
        "(--datasets_num_private_threads=0); host buffers pageable (--noforce_gpu_compatible)")
