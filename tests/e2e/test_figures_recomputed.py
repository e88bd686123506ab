"""Every figure a CPU run prints, recomputed from what its JSON manifest records
(tests/support/figure_checks.py), over the run shapes that change the arithmetic: one device,
several logical devices, gradient accumulation, forward-only, repeats with odd and even counts (two
localhost workers: e2e/test_clusters.py); and --num_runs on a fake clock, where every repeat's
figure is known exactly."""

import pytest

from figure_checks import check_run, read_run
from helpers import run_cli

pytestmark = pytest.mark.slow

TINY = ["--device=cpu", "--model=trivial", "--image_size=16", "--num_warmup_batches=2",
        "--monitor_interval_ms=20"]


@pytest.mark.parametrize("flags, global_batch, num_batches, display_every, num_runs, ewma", [
    (["--batch_size=5", "--forward_only", "--num_runs=3"], 5, 6, 4, 3, None),
    (["--batch_size=3", "--num_gpus=2", "--num_runs=2"], 6, 5, 2, 2, None),
    (["--batch_size=2", "--accum_steps=3", "--display_perf_ewma=0.5"], 6, 7, 3, 1, 0.5),
], ids=["forward_only_one_device_3_runs", "two_devices_2_runs", "accumulation_ewma"])
def test_every_printed_figure_is_recomputed_from_the_manifest(
        tmp_path, flags, global_batch, num_batches, display_every, num_runs, ewma):
    code, out = run_cli(TINY + flags + ["--num_batches=%d" % num_batches,
                                        "--display_every=%d" % display_every], tmp_path)
    assert code == 0, out
    check_run(read_run(tmp_path, out), global_batch=global_batch, num_batches=num_batches,
              display_every=display_every, num_runs=num_runs, ewma=ewma)


# --- --num_runs on a fake clock: every repeat's images/sec is known exactly -------------------
BATCH, STEPS, WARMUP = 4, 3, 2


@pytest.fixture
def timed_repeats(monkeypatch):
    """Runs the command in this process on a fake clock: a warm-up step takes 1 s, every step of
    repeat r takes seconds[r]; nothing else takes time. Returns run(seconds) -> (lines, row,
    manifest)."""
    from tfbench.engine import base, runner, steps

    def run(seconds, tmp_path):
        clock = {"t": 0.0, "calls": 0}

        def costed(make):
            def builder(self, *args, **kwargs):
                fn = make(self, *args, **kwargs)

                def step(inputs):
                    out = fn(inputs)
                    i = clock["calls"] - WARMUP
                    clock["t"] += 1.0 if i < 0 else seconds[i // STEPS]
                    clock["calls"] += 1
                    return out
                return step
            return builder
        monkeypatch.setattr(steps.Steps, "train_step", costed(steps.Steps.train_step))
        monkeypatch.setitem(runner.run.__kwdefaults__, "clock",
                            base.Clock(perf_counter=lambda: clock["t"], sleep=lambda s: None))
        from helpers import run_inprocess
        code, lines = run_inprocess(
            ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=%d" % BATCH,
             "--num_batches=%d" % STEPS, "--num_warmup_batches=%d" % WARMUP,
             "--display_every=1", "--monitor_interval_ms=0", "--num_runs=%d" % len(seconds)],
            tmp_path)
        assert code == 0, lines
        return read_run(tmp_path, "\n".join(lines))
    return run


# (seconds per step of each repeat; the footer; the Repeats line). The last repeat is never the
# median here, and for an even count the median is the mean of the middle two.
REPEATS = [
    ([1.0, 4.0], "2.50", "Repeats: 2 runs, median 2.50 images/sec, min 1.00, max 4.00, "
                         "spread 120.0% UNSTABLE (spread > 10%)"),
    ([2.0, 1.0, 4.0], "2.00", "Repeats: 3 runs, median 2.00 images/sec, min 1.00, max 4.00, "
                              "spread 150.0% UNSTABLE (spread > 10%)"),
    ([1.0, 2.0, 4.0, 8.0], "1.50", "Repeats: 4 runs, median 1.50 images/sec, min 0.50, max "
                                   "4.00, spread 233.3% UNSTABLE (spread > 10%)"),
]


@pytest.mark.parametrize("seconds, footer, repeats", REPEATS, ids=["2", "3", "4"])
def test_repeats_report_the_median_for_odd_and_even_counts(timed_repeats, tmp_path, seconds,
                                                           footer, repeats):
    run = timed_repeats(seconds, tmp_path)
    assert run["lines"][-2] == "total images/sec: " + footer
    assert repeats in run["lines"]
    row = run["row"]
    assert float(row["images_per_sec"]) == float(row["images_per_sec_median"]) == float(footer)
    assert run["manifest"]["extra"]["images_per_sec_runs"] == [BATCH / s for s in seconds]
    check_run(run, global_batch=BATCH, num_batches=STEPS, display_every=1,
              num_runs=len(seconds))


def test_ewma_step_lines_and_evaluations_outside_the_timed_wall(monkeypatch, tmp_path):
    """On a fake clock: timed steps of 1, 3, 1, 3 s and evaluation steps of 50 s. The Step lines
    weight recent steps (--display_perf_ewma), the evaluation after step 2 is not in the timed
    wall time, and the legacy metric log carries each Step line's figure at its step."""
    import json

    from figure_checks import step_figures
    from helpers import run_inprocess
    from tfbench.engine import base, runner, steps
    timed = [1.0, 3.0, 1.0, 3.0]
    clock = {"t": 0.0, "train": 0}

    def costed(make, cost):
        def builder(self, *args, **kwargs):
            fn = make(self, *args, **kwargs)

            def step(inputs):
                out = fn(inputs)
                clock["t"] += cost()
                return out
            return step
        return builder

    def train_cost():
        i, clock["train"] = clock["train"] - 1, clock["train"] + 1
        return 1.0 if i < 0 else timed[i]      # one warm-up step
    monkeypatch.setattr(steps.Steps, "train_step", costed(steps.Steps.train_step, train_cost))
    monkeypatch.setattr(steps.Steps, "eval_step", costed(steps.Steps.eval_step, lambda: 50.0))
    monkeypatch.setitem(runner.run.__kwdefaults__, "clock",
                        base.Clock(perf_counter=lambda: clock["t"], sleep=lambda s: None))
    code, lines = run_inprocess(
        ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=%d" % BATCH,
         "--num_batches=4", "--num_warmup_batches=1", "--display_every=1",
         "--display_perf_ewma=0.5", "--eval_during_training_every_n_steps=2",
         "--num_eval_batches=1", "--monitor_interval_ms=0", "--print_training_accuracy",
         "--benchmark_log_dir=logs"], tmp_path)
    assert code == 0, lines
    shown = [STEP for STEP in lines if STEP[:1].isdigit() and "\timages/sec: " in STEP]
    assert [s.split("\t")[0] for s in shown] == ["1", "2", "3", "4"]
    for k, line in enumerate(shown, 1):
        mean, plusminus, jitter = step_figures(BATCH, timed[:k], ewma=0.5)
        assert line.split("\t")[1] == "images/sec: %.1f +/- %.1f (jitter = %.1f)" % (
            mean, plusminus, jitter)
        assert len(line.split("\t")) == 5                     # loss, top-1, top-5
    assert "Running evaluation at global_step 3" in lines and "Resuming training" in lines
    run = read_run(tmp_path, "\n".join(lines))
    # 4 steps x 4 images in 8 s of timed steps: the 50 s evaluation is not in the wall time.
    assert run["manifest"]["wall_time"] == 8.0 and run["row"]["images_per_sec"] == "2"
    metrics = [json.loads(l) for l in open(tmp_path / "logs" / "metric.log")]
    rates = [(m["global_step"], round(m["value"], 1)) for m in metrics
             if m["name"] == "current_examples_per_sec"]
    assert rates == [(k, float(s.split(" ")[1])) for k, s in
                     enumerate((l.split("\t")[1] for l in shown), 1)]
    assert [m["global_step"] for m in metrics if m["name"] == "top_5_accuracy"] == [1, 2, 3, 4]
