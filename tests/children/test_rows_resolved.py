"""A study's row for a child that wrote none says what the child's own run would have said: the
same Settings into the run's resolve (tfbench.engine.resolved) and into the sweep's failure row
or tfbench launch's host row give one answer, checked against hand-computed values. Both sides
read the owners in tfbench.config.settings (run mode, micro-batches, the batch timed, devices,
global batch) and tfbench.config.data_source."""

import pytest
import tensorflow as tf

from helpers import FakeGpu
from tfbench.children import rows
from tfbench.children.process import ChildOutcome
from tfbench.config.argv import settings_of_flags
from tfbench.distribute import devices
from tfbench.engine.resolved import resolve
from tfbench.launch import remote, tasks
from tfbench.sweep import grid

HOSTS = remote.parse_hosts("127.0.0.1:7002,127.0.0.1:7003")


def _sweep_row(flags, tmp_path):
    """The row the sweep writes for a point whose child crashed before writing one."""
    log = tmp_path / "point.log"
    log.write_text("Segmentation fault\n")
    (row,) = rows.child_rows(flags, ChildOutcome(-11, 1.0), str(tmp_path / "no.csv"),
                             str(log), "cmd")
    assert row["status"] == "error"
    return row


def _host_row(flags):
    """The row tfbench launch writes for task 0 of a two-host launch that wrote none."""
    return tasks.host_failure_row(remote.task_flags(flags, HOSTS, 0), "error", "lost",
                                  "cmd", HOSTS[0], len(HOSTS))


def _run(row_flags):
    r = resolve(settings_of_flags(row_flags))
    return {"mode": r.mode, "batch_size": str(r.run_batch_size),
            "global_batch_size": str(r.global_batch), "num_devices": str(r.device.num_devices),
            "num_workers": str(r.num_workers), "accum_steps": str(r.accum_steps)}


def _same(row, run):
    return {k: row[k] for k in run}


TRAINING = ["--model=trivial", "--device=cpu", "--num_gpus=2", "--batch_size=4",
            "--accum_steps=3"]


def test_a_launch_host_row_counts_micro_batches_devices_and_workers():
    # 4 images x 3 micro-batches x 2 devices x 2 workers = 48 (not 4 x 2 GPUs = 8).
    want = {"mode": "training", "batch_size": "4", "global_batch_size": "48",
            "num_devices": "2", "num_workers": "2", "accum_steps": "3"}
    assert _same(_host_row(TRAINING), want) == want
    assert _run(remote.task_flags(TRAINING, HOSTS, 0)) == want


def test_a_sweep_failure_row_counts_micro_batches_and_devices(tmp_path):
    want = {"mode": "training", "batch_size": "4", "global_batch_size": "24",
            "num_devices": "2", "num_workers": "1", "accum_steps": "3"}   # 4 x 3 x 2
    assert _same(_sweep_row(TRAINING, tmp_path), want) == want
    assert _run(TRAINING) == want


def test_an_eval_row_times_the_eval_batch_without_micro_batches(tmp_path):
    flags = ["--model=trivial", "--device=cpu", "--num_gpus=2", "--batch_size=32",
             "--eval_batch_size=8", "--accum_steps=3", "--eval", "--train_dir=%s" % tmp_path]
    want = {"mode": "eval", "batch_size": "8", "global_batch_size": "32",   # 8 x 2 x 2
            "num_devices": "2", "num_workers": "2", "accum_steps": "1"}
    assert _same(_host_row(flags), want) == want
    assert _run(remote.task_flags(flags, HOSTS, 0)) == want


def test_gpu_indices_count_the_devices_without_num_gpus(tmp_path, monkeypatch):
    fakes = [FakeGpu(i, "NVIDIA L4") for i in range(4)]
    monkeypatch.setattr(devices, "visible_gpus", lambda: fakes)
    monkeypatch.setattr(tf.config.experimental, "get_device_details",
                        lambda gpu: {"device_name": gpu.model})
    flags = ["--model=trivial", "--gpu_indices=0,1,2", "--batch_size=4", "--forward_only"]
    want = {"mode": "forward_only", "batch_size": "4", "global_batch_size": "12",
            "num_devices": "3", "num_workers": "1", "accum_steps": "1"}   # 4 x 3 GPUs
    assert _same(_sweep_row(flags, tmp_path), want) == want
    assert _run(flags) == want


def test_a_real_data_row_names_the_data_as_the_run_does(tmp_path):
    data = tmp_path / "imagenet_shards"
    data.mkdir()
    (data / "train-00000-of-00001").write_bytes(b"")
    flags = ["--model=trivial", "--device=cpu", "--data_only", "--data_dir=%s" % data]
    row = _sweep_row(flags, tmp_path)
    assert (row["data_source"], row["mode"]) == ("imagenet_tfrecord", "data_only")
    assert resolve(settings_of_flags(flags)).mode == "data_only"
    # A --data_dir this host cannot read: the child names the error, the row no dataset.
    assert _sweep_row(["--data_dir=%s" % (tmp_path / "gone")], tmp_path)["data_source"] == ""


def test_strong_scaling_keeps_the_global_batch_the_run_computes():
    # --batch_size=96 is the global batch: 2 micro-batches on 1 and 3 devices -> 48 and 16
    # per device, each of whose runs is again 96 images a step.
    base = ["--model=trivial", "--device=cpu", "--batch_size=96", "--accum_steps=2"]
    points = grid.expand_grid([grid.parse_axis("num_gpus=1,3")], scaling="strong",
                              base_flags=base)
    assert [p.flags["batch_size"] for p in points] == ["48", "16"]
    for point in points:
        flags = grid.point_flags(base, point.flags)
        assert resolve(settings_of_flags(flags)).global_batch == 96


def test_strong_scaling_refuses_a_global_batch_it_cannot_split():
    from tfbench import errors
    with pytest.raises(errors.UsageError, match=r"^--scaling=strong: global batch 96 is not "
                       r"divisible by 18 \(2 micro-batch\(es\) x 9 device\(s\) x 1 worker"):
        grid.expand_grid([grid.parse_axis("num_gpus=9")], scaling="strong",
                         base_flags=["--device=cpu", "--batch_size=96", "--accum_steps=2"])
