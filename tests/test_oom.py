"""Out of memory: one message naming model, batch size and precision; status=oom; exit 3."""

import csv

import tensorflow as tf

from helpers import run_inprocess
from tfbench import steps


def test_oom_is_reported_with_remedies(tmp_path, monkeypatch):
    def failing_step(self, from_iterator=False):
        def step(inputs):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
        return step
    monkeypatch.setattr(steps.Steps, "train_step", failing_step)
    code, lines = run_inprocess(["--device=cpu", "--model=trivial", "--image_size=16",
                                 "--batch_size=512", "--num_batches=2", "--precision=bf16",
                                 "--csv_file=r.csv", "--json_dir="], tmp_path)
    assert code == 3
    row = list(csv.DictReader(open(tmp_path / "r.csv")))[0]
    assert row["status"] == "oom"
    message = row["error"]
    assert "trivial" in message and "batch size 512" in message and "bf16" in message
    assert "--accum_steps" in message and "--batch_size" in message
