"""Evaluation during training: legacy line order, schedule and early stop."""

import pytest

from helpers import run_inprocess

pytestmark = pytest.mark.slow

BASE = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
        "--display_every=1", "--csv_file=", "--json_dir="]


def test_legacy_order_of_lines(tmp_path):
    code, lines = run_inprocess(BASE + ["--num_batches=4", "--num_warmup_batches=1",
                                        "--eval_during_training_every_n_steps=2",
                                        "--num_eval_batches=2"], tmp_path)
    assert code == 0, lines
    assert "Mode:        training + evaluation" in lines
    body = lines[lines.index("=========="):]
    assert body[1:4] == ["Generating training model", "Generating evaluation model",
                         "Initializing graph"]
    start = body.index("Running evaluation at global_step 3")
    assert body[start - 1].startswith("2\timages/sec:")
    assert body[start + 1].startswith("1\t") and body[start + 1].endswith("examples/sec")
    assert body[start + 2].startswith("2\t") and body[start + 2].endswith("examples/sec")
    assert body[start + 3].startswith("Accuracy @ 1 = ") and body[start + 3].endswith(
        "[8 examples]")
    assert body[start + 4] == "Resuming training"
    done = body.index("Done with training")
    assert body[done + 1] == "Running final evaluation at global_step 5"
    # Legacy prints no total block in this mode.
    assert not any(l.startswith("total images/sec") for l in lines)


def test_every_two_steps_over_seven_gives_four_evaluations(tmp_path):
    code, lines = run_inprocess(BASE + ["--num_batches=7", "--num_warmup_batches=0",
                                        "--eval_during_training_every_n_steps=2",
                                        "--num_eval_batches=1"], tmp_path)
    assert code == 0
    assert sum(l.startswith("Accuracy @ 1 = ") for l in lines) == 4


def test_specified_steps_past_the_end_are_skipped(tmp_path):
    code, lines = run_inprocess(BASE + ["--num_batches=4", "--num_warmup_batches=0",
                                        "--eval_during_training_at_specified_steps=2,9",
                                        "--num_eval_batches=1"], tmp_path)
    assert code == 0
    assert [l for l in lines if l.startswith("Running evaluation")] == \
        ["Running evaluation at global_step 2"]


def test_stop_at_top_1_accuracy(tmp_path, monkeypatch):
    # As the legacy test: evaluations return 0.1 then 0.5; the threshold 0.4 stops after the
    # second, so 4 Step lines and 2 evaluations, and no final evaluation.
    from tfbench.engine import base
    scripted = iter([0.1, 0.5, 0.9])

    def fake_evaluate(self, step_fn, inputs, num_batches, res):
        top_1 = next(scripted)
        self.log.accuracy(top_1, 1.0, 4)
        return top_1
    monkeypatch.setattr(base.ModeRunner, "_run_eval_batches", fake_evaluate)
    code, lines = run_inprocess(BASE + ["--num_batches=8", "--num_warmup_batches=0",
                                        "--eval_during_training_every_n_steps=2",
                                        "--num_eval_batches=1",
                                        "--stop_at_top_1_accuracy=0.4"], tmp_path)
    assert code == 0
    assert "Stopping, as eval accuracy at least 0.4 was reached" in lines
    assert sum("images/sec:" in l for l in lines) == 4
    assert sum(l.startswith("Accuracy @ 1") for l in lines) == 2
    assert not any(l.startswith("Running final evaluation") for l in lines)


def test_peak_memory_covers_the_timed_steps_and_an_evaluation_has_its_own(tmp_path,
                                                                          monkeypatch):
    """peak_mem_gb is read before the final evaluation and checkpoint. A stand-in
    allocator (TensorFlow keeps no statistics for CPU devices) holds 4 GiB while training and
    9 GiB while evaluating; the timed steps' peak is 4 GiB, the evaluations' 9 GiB."""
    import json

    from tfbench.engine.base import ModeRunner
    from tfbench.measure import memory
    gib = 1 << 30
    allocator = {"in_use": 4 * gib, "peak": 4 * gib}

    def reset_peak(names):
        allocator["peak"] = allocator["in_use"]

    def peak_device_bytes(names):
        return {name: allocator["peak"] for name in names}, None

    evaluate = ModeRunner._run_eval_batches

    def evaluating(self, *args, **kwargs):
        allocator["peak"] = max(allocator["peak"], 9 * gib)   # the evaluation's batch
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(memory, "reset_peak", reset_peak)
    monkeypatch.setattr(memory, "peak_device_bytes", peak_device_bytes)
    monkeypatch.setattr(ModeRunner, "_run_eval_batches", evaluating)
    code, lines = run_inprocess(
        [a for a in BASE if a != "--json_dir="] + [
            "--num_batches=4", "--num_warmup_batches=1", "--eval_during_training_every_n_steps=2",
            "--num_eval_batches=1", "--json_dir=%s" % (tmp_path / "json"),
            "--train_dir=%s" % (tmp_path / "ckpt")], tmp_path)
    assert code == 0, lines
    (name,) = list((tmp_path / "json").iterdir())
    run = json.loads(name.read_text())
    assert run["csv_row"]["peak_mem_gb"] == "4"
    assert run["extra"]["eval_peak_mem_gb"] == 9.0


def test_the_timed_loop_and_the_summaries_report_what_the_plan_says(tmp_path, monkeypatch):
    """The reported loss (Facts.loss_index) and accuracy on or off (Resolved.step_accuracy) are
    decided once: the Step lines and RunResult.losses, and the summaries, read the plan. Here
    the plan contradicts the flags (base_loss reported under --loss_type_to_report=total_loss,
    accuracy on without --print_training_accuracy)."""
    import dataclasses

    import tensorflow as tf

    from tfbench.config.settings import make_settings
    from tfbench.engine import actions, resolved, runner, steps
    from tfbench.engine.runlog import SilentLog
    from tfbench.results import RunResult
    read_facts = resolved.read_facts
    monkeypatch.setattr(actions, "read_facts", lambda p: dataclasses.replace(
        read_facts(p), loss_index=0, training_accuracy=True))
    outputs, scalars = [], []
    train_step = steps.Steps.train_step

    def recorded(self, *args, **kwargs):
        fn = train_step(self, *args, **kwargs)
        return lambda inputs: outputs.append(fn(inputs).numpy()) or tf.constant(outputs[-1])
    monkeypatch.setattr(steps.Steps, "train_step", recorded)
    monkeypatch.setattr(tf.summary, "scalar",
                        lambda name, value, **k: scalars.append((name, float(value))))
    p = make_settings({"device": "cpu", "model": "trivial", "image_size": 16, "batch_size": 4,
                     "num_batches": 3, "num_warmup_batches": 1, "train_dir": str(tmp_path),
                     "summary_verbosity": 1, "save_summaries_steps": 1,
                     "loss_type_to_report": "total_loss"})
    res = runner.run(p, SilentLog(), RunResult())
    timed = outputs[1:]
    assert len(timed) == 3 and all(out[0] != out[1] for out in timed)
    assert res.losses == [float(out[0]) for out in timed]
    assert [v for name, v in scalars if name == "total_loss"] == res.losses
    assert res.top_1_accuracy == float(timed[-1][2])
    assert [v for name, v in scalars if name == "top_1_accuracy"] == \
        [float(out[2]) for out in timed]
