"""What the runner's figures cover: timed steps only, under an injected clock and a fake GPU.

Every step takes a known time at a known power on a fake clock that the runner's timer and the
monitor share; nothing else takes time except explicit sleeps (cooldowns, at idle power). So
every figure has one exact expected value, whatever the machine.
"""

import pytest

from tfbench.output import console, csv_out
from tfbench.output.classic_log import ClassicLog
from tfbench.measure import memory
from tfbench.engine import base, meter as meter_lib, runner, steps
from tfbench.errors import NanLoss
from tfbench.monitors import aggregate
from tfbench.monitors.base import Monitor
from tfbench.config.settings import make_settings
from tfbench.results import FIELD_NAMES, RunResult

pytestmark = pytest.mark.slow

COLD_SEC = 100.0   # the first call of a step: tracing, compilation, autotuning
STEP_SEC = 1.0
STEP_W = 300.0
IDLE_W = 50.0
BATCH = 4


class MeteredGpu:
    """A clock, a power draw and the energy counter that integrates it."""

    def __init__(self):
        self.t = 0.0
        self.energy = 0.0
        self.power = IDLE_W

    def now(self) -> float:
        return self.t

    def run(self, seconds: float, watts: float) -> None:
        self.t += seconds
        self.energy += seconds * watts
        self.power = watts

    def sleep(self, seconds: float) -> None:
        self.run(seconds, IDLE_W)


class FakeNvmlMonitor(Monitor):
    """Boundary readings only (no thread), of the fake GPU."""

    name = "nvml"

    def __init__(self, gpu: MeteredGpu):
        super().__init__(0, clock=gpu.now)
        self.gpu = gpu

    def _read(self):
        return [{"gpu": 0, "power_w": self.gpu.power, "energy_j": self.gpu.energy}]

    def _summarize(self, samples, images, images_per_sec):
        return aggregate.gpu_summary(samples, images, images_per_sec)


CLOCK = base.Clock()   # the runner's clock: the fake GPU's while the `gpu` fixture is on


@pytest.fixture
def gpu(monkeypatch):
    g = MeteredGpu()
    monkeypatch.setitem(globals(), "CLOCK", base.Clock(perf_counter=g.now, sleep=g.sleep))
    monkeypatch.setattr(meter_lib.monitors, "create", lambda *a, **k: [FakeNvmlMonitor(g)])

    def costed(make):
        def builder(self, *args, **kwargs):
            fn = make(self, *args, **kwargs)
            calls = []

            def step(inputs):
                out = fn(inputs)
                g.run(COLD_SEC if not calls else STEP_SEC, STEP_W)
                calls.append(None)
                return out
            return step
        return builder

    monkeypatch.setattr(steps.Steps, "train_step", costed(steps.Steps.train_step))
    monkeypatch.setattr(steps.Steps, "forward_step", costed(steps.Steps.forward_step))
    monkeypatch.setattr(steps.Steps, "eval_step", costed(steps.Steps.eval_step))
    return g


def run(flags, result=None):
    values = {"device": "cpu", "model": "trivial", "image_size": 16, "batch_size": BATCH,
              "csv_file": "", "json_dir": ""}
    values.update(flags)
    lines = []
    res = result or RunResult()
    runner.run(make_settings(values), ClassicLog(lines.append), res,
               clock=CLOCK)
    return res, lines


def test_power_and_energy_cover_the_timed_repeats_not_the_cooldown(gpu, tmp_path):
    res, _ = run({"num_batches": 3, "num_warmup_batches": 1, "num_runs": 2,
                  "cooldown_secs": 30.0, "train_dir": str(tmp_path / "ckpt")})
    assert res.images_per_sec == pytest.approx(BATCH / STEP_SEC)
    assert res.extra["num_runs"] == 2
    timed = 2 * 3
    assert len(res.step_times) == timed
    assert res.extra["energy_j"] == pytest.approx(timed * STEP_SEC * STEP_W)
    assert res.extra["joules_per_image"] == pytest.approx(STEP_SEC * STEP_W / BATCH)
    assert res.extra["power_w_mean"] == pytest.approx(STEP_W)
    assert res.extra["images_per_sec_per_watt"] == pytest.approx(BATCH / STEP_SEC / STEP_W)


def test_evaluations_during_training_fall_between_windows(gpu):
    res, lines = run({"num_batches": 4, "num_warmup_batches": 1, "num_eval_batches": 3,
                      "eval_during_training_every_n_steps": 2})
    assert "Running evaluation at global_step 3" in lines
    assert "Running final evaluation at global_step 5" in lines
    assert res.extra["energy_j"] == pytest.approx(4 * STEP_SEC * STEP_W)
    assert res.wall_time == pytest.approx(4 * STEP_SEC)


def test_eval_times_warm_steps_and_reports_the_cold_call_apart(gpu, tmp_path, monkeypatch):
    train_dir = str(tmp_path / "ckpt")
    run({"num_batches": 1, "num_warmup_batches": 0, "train_dir": train_dir})
    events = []

    def reset(names):
        events.append("reset")

    def peaks(names):
        events.append("read")
        return dict.fromkeys(names, 1 << 30), None

    monkeypatch.setattr(memory, "reset_peak", reset)
    monkeypatch.setattr(memory, "peak_device_bytes", peaks)
    res, lines = run({"eval": True, "train_dir": train_dir, "num_batches": 5})
    assert res.first_step_sec == pytest.approx(COLD_SEC)
    assert res.warmup_times == [pytest.approx(COLD_SEC)]
    assert res.num_warmup_batches == 1
    assert res.step_times == [pytest.approx(STEP_SEC)] * 5
    assert res.images_per_sec == pytest.approx(BATCH / STEP_SEC)
    assert res.extra["latency_ms_max"] == pytest.approx(STEP_SEC * 1000)
    assert res.extra["energy_j"] == pytest.approx(5 * STEP_SEC * STEP_W)
    # The peak is reset after the cold call, as after training's warm-up; its peak is kept.
    assert events == ["reset", "read", "reset", "read"]
    assert res.extra["warmup_peak_mem_gb"] == 1.0
    # The log keeps the legacy eval lines: no warm-up lines are added.
    assert not any("warm up" in line for line in lines)
    assert not set(res.extra) & FIELD_NAMES


def test_a_nan_at_a_display_step_leaves_images_per_sec_over_the_steps_timed(gpu, monkeypatch):
    """The NaN step was timed and is in step_times: the wall time must cover it too."""
    checked = []

    def check_finite(self, out, where, res):
        checked.append(where)
        if where == "step 10":
            raise NanLoss("Loss became NaN at step 10")

    monkeypatch.setattr(base.ModeRunner, "_check_finite", check_finite)
    res = RunResult()
    with pytest.raises(NanLoss):
        run({"num_batches": 20, "num_warmup_batches": 0, "display_every": 10}, res)
    assert len(res.step_times) == 10
    # 10 steps: the cold one and 9 more.
    assert res.wall_time == pytest.approx(COLD_SEC + 9 * STEP_SEC)
    assert res.images_per_sec == pytest.approx(10 * BATCH / (COLD_SEC + 9 * STEP_SEC))


def test_a_nan_in_the_second_repeat_keeps_the_first_repeats_figure(gpu, monkeypatch):
    """A completed repeat is a full measurement: a later failure does not replace its figure
    with a partial one (the fallback is for a run that completed no repeat)."""
    def check_finite(self, out, where, res):
        if len(checked) == 1 and where == "step 1":
            raise NanLoss("Loss became NaN at step 1")
        if where == "step 3":
            checked.append(where)

    checked = []
    monkeypatch.setattr(base.ModeRunner, "_check_finite", check_finite)
    res = RunResult()
    with pytest.raises(NanLoss):
        run({"num_batches": 3, "num_warmup_batches": 0, "num_runs": 2}, res)
    assert len(res.step_times) == 4   # 3 of the first repeat, 1 of the second
    assert res.images_per_sec == pytest.approx(3 * BATCH / (COLD_SEC + 2 * STEP_SEC))
    assert res.extra["num_runs"] == 1    # --num_runs=2 asked; the figure is one repeat's
    assert res.wall_time == pytest.approx(STEP_SEC)   # the second repeat's, so far


@pytest.mark.parametrize("flags", [
    {"num_batches": 2, "num_warmup_batches": 1, "num_runs": 2},
    {"num_batches": 2, "num_warmup_batches": 1, "forward_only": True},
    {"num_batches": 4, "num_warmup_batches": 1, "num_eval_batches": 1,
     "eval_during_training_every_n_steps": 2},
], ids=["repeats", "forward_only", "train_and_eval"])
def test_extra_never_redefines_a_result_field(gpu, flags):
    res, _ = run(flags)
    assert not set(res.extra) & FIELD_NAMES


def test_warmup_sec_is_one_figure_in_the_json_csv_and_console(gpu, monkeypatch):
    """The wall time of warm-up, host work between its steps included."""
    check_finite = base.ModeRunner._check_finite

    def slow_check(self, out, where, res):
        gpu.sleep(0.5)
        check_finite(self, out, where, res)

    monkeypatch.setattr(base.ModeRunner, "_check_finite", slow_check)
    res, _ = run({"num_batches": 2, "num_warmup_batches": 3})
    assert res.warmup_times == [pytest.approx(COLD_SEC), pytest.approx(STEP_SEC),
                                pytest.approx(STEP_SEC)]
    assert res.warmup_sec == pytest.approx(COLD_SEC + 2 * STEP_SEC + 3 * 0.5)
    assert csv_out.row_for(res)["warmup_sec"] == "103.5"
    (line,) = [l for l in console.summary_lines(res) if l.startswith("Cold start:")]
    assert line.startswith("Cold start: first step 100.000 s, warm-up 103.500 s (3 steps)")


def test_step_images_per_sec_covers_every_timed_step_of_the_last_repeat(gpu):
    res, lines = run({"num_batches": 15, "num_warmup_batches": 0, "display_every": 10})
    assert [l.split("\t")[0] for l in lines if "images/sec:" in l] == ["1", "10"]
    # Not the last Step line's figure (step 10): all 15 timed steps, the cold first one included.
    assert res.step_images_per_sec == pytest.approx(BATCH / ((COLD_SEC + 14 * STEP_SEC) / 15))
    meaning = dict(csv_out.COLUMNS)["step_images_per_sec"]
    assert "every timed step of the last repeat" in meaning and "last Step line" not in meaning


def test_the_training_time_estimate_is_for_training_runs_only(gpu):
    flags = {"num_batches": 2, "num_warmup_batches": 1, "estimate_dataset_size": 1008}
    res, _ = run(flags)
    assert res.extra["estimated_train_hours"] == pytest.approx(1008 / (BATCH * 0.7) / 3600)
    res, lines = run(dict(flags, forward_only=True))
    assert "estimated_train_hours" not in res.extra
    assert console.estimate_lines(res.extra) == []
    notice = ("--estimate_dataset_size estimates training time: no estimate for a forward-only "
              "run")
    assert notice in lines and notice in res.notices


def test_the_console_summary_is_rendered_from_figures_the_manifest_keeps(gpu):
    import dataclasses
    import json

    from tfbench.output import files
    flags = {"num_batches": 3, "num_warmup_batches": 1, "num_runs": 2,
             "estimate_dataset_size": 1008}
    res, _ = run(flags)
    lines = console.summary_lines(res)
    assert [l.split(":")[0] for l in lines] == [
        "Model stats", "Cold start", "Host time between steps", "Memory", "GPU power", "Repeats",
        "Training-time estimate"]
    # No figure is a rendered line.
    assert not [v for v in res.extra.values() if isinstance(v, str) and v in lines]
    p = make_settings({"device": "cpu", "model": "trivial", "json_dir": ""})
    saved = json.loads(json.dumps(files.manifest(p, res, csv_out.row_for(res)), default=str))
    loaded = RunResult(**{f.name: saved[f.name] for f in dataclasses.fields(RunResult)})
    assert console.summary_lines(loaded) == lines


def test_host_time_between_steps_is_what_separates_the_footer_from_the_steady_state(gpu):
    """Each Step line costs the host 0.5 s here (display_every=1): total images/sec counts it,
    the step times do not, and the console says how large it was, before the footer."""
    class SlowLog(ClassicLog):
        def step(self, report):
            super().step(report)
            gpu.run(0.5, IDLE_W)

    lines = []
    res = runner.run(make_settings({"device": "cpu", "model": "trivial", "image_size": 16,
                                  "batch_size": BATCH, "num_batches": 4,
                                  "num_warmup_batches": 1, "display_every": 1, "csv_file": "",
                                  "json_dir": "", "forward_only": True}),
                     SlowLog(lines.append), RunResult(), clock=CLOCK)
    assert res.extra["steady_step_sec_mean"] == pytest.approx(STEP_SEC)
    assert res.extra["host_ms_between_steps"] == pytest.approx(500.0)
    assert 1000.0 * BATCH / res.images_per_sec == pytest.approx(
        1000.0 * STEP_SEC + res.extra["host_ms_between_steps"])
    summary = console.summary_lines(res)
    assert "Host time between steps: 500.00 ms/step (in total images/sec, not in latency or " \
        "steady state)" in summary


# --- total images/sec: measured once, by meter.finish from the Meter's repeats ---------------

def _nan_at(step):
    def check_finite(self, out, where, res):
        if where == "step %d" % step:
            raise NanLoss("Loss became NaN at %s" % where)
    return check_finite


# Every place that used to set or recompute images_per_sec: training's timed loop and its
# repeats' median (train.py), --eval's evaluations (checkpoint_eval.py), --data_only's loop,
# and the fallback of a run stopped in its timed steps (meter.finish).
IMAGES_PER_SEC_CASES = {
    "training": ({"num_batches": 3, "num_warmup_batches": 1}, BATCH / STEP_SEC),
    "repeats": ({"num_batches": 3, "num_warmup_batches": 1, "num_runs": 3}, BATCH / STEP_SEC),
    "forward_only": ({"num_batches": 3, "num_warmup_batches": 1, "forward_only": True},
                     BATCH / STEP_SEC),
    "train_and_eval": ({"num_batches": 4, "num_warmup_batches": 1, "num_eval_batches": 2,
                        "eval_during_training_every_n_steps": 2}, BATCH / STEP_SEC),
    "stopped_by_a_nan": ({"num_batches": 20, "num_warmup_batches": 1, "display_every": 5},
                         BATCH / STEP_SEC),
    "eval": ({"eval": True, "num_batches": 4}, BATCH / STEP_SEC),
}


@pytest.mark.parametrize("case", sorted(IMAGES_PER_SEC_CASES))
def test_images_per_sec_is_written_once_from_the_steps_the_meter_recorded(
        case, gpu, tmp_path, monkeypatch):
    from counted_result import CountedResult
    flags, expected = IMAGES_PER_SEC_CASES[case]
    if case == "eval":
        run({"num_batches": 1, "num_warmup_batches": 0, "train_dir": str(tmp_path)})
        flags = dict(flags, train_dir=str(tmp_path))
    res = CountedResult()
    if case == "stopped_by_a_nan":
        monkeypatch.setattr(base.ModeRunner, "_check_finite", _nan_at(10))
        with pytest.raises(NanLoss):
            run(flags, res)
        assert len(res.step_times) == 10
    else:
        run(flags, res)
    assert (res.writes["images_per_sec"], res.writes["wall_time"]) == (1, 1)
    assert res.images_per_sec == pytest.approx(expected)
    if case == "repeats":
        assert res.extra["images_per_sec_runs"] == [pytest.approx(expected)] * 3
    else:
        assert res.images_per_sec == pytest.approx(
            len(res.step_times) * BATCH / res.wall_time)


def test_data_only_images_per_sec_is_written_once(tmp_path):
    """--data_only times its own loop (arrival intervals), on the real clock."""
    from counted_result import CountedResult
    from tfbench.data.fake_imagenet import write_fake_imagenet
    write_fake_imagenet(str(tmp_path), num_train=16, num_validation=8, num_shards=1, seed=1,
                        image_size=24)
    res = CountedResult()
    run({"data_only": True, "data_dir": str(tmp_path), "num_batches": 3,
         "num_warmup_batches": 1}, res)
    assert (res.writes["images_per_sec"], res.writes["wall_time"]) == (1, 1)
    assert res.images_per_sec == pytest.approx(3 * BATCH / res.wall_time)
    assert res.wall_time == pytest.approx(sum(res.step_times))


def test_finish_takes_the_repeats_that_ran_to_their_end_else_the_steps_timed():
    """Two complete repeats of 3 steps (1 s and 3 s a step) and a third stopped after one: the
    median of the two; none complete: the steps the last repeat timed."""
    from tfbench.engine.resolved import resolve
    p = make_settings({"device": "cpu", "model": "trivial", "batch_size": BATCH})
    plan = resolve(p)
    meter = meter_lib.Meter(())
    for steps_run, wall in ((3, 3.0), (3, 9.0)):
        meter.start_repeat()
        meter.timed(1, wall / 3)
        meter.end_repeat(steps_run, wall)
    meter.start_repeat()
    meter.timed(1, 2.0)
    res = RunResult()
    meter_lib.total_images_per_sec(res, p, plan, meter.repeats)
    assert res.images_per_sec == pytest.approx((3 * BATCH / 3.0 + 3 * BATCH / 9.0) / 2)
    assert res.extra["images_per_sec_runs"] == [3 * BATCH / 3.0, 3 * BATCH / 9.0]
    assert res.wall_time == 2.0   # the last repeat's, as far as it went
    meter.start_repeat(replace=True)   # as each evaluation of --eval replaces the last
    meter.timed(2, 4.0)
    res = RunResult()
    meter_lib.total_images_per_sec(res, p, plan, meter.repeats)
    assert (res.images_per_sec, res.wall_time) == (2 * BATCH / 4.0, 4.0)
    assert "images_per_sec_runs" not in res.extra
