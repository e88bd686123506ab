"""Runner behaviour in-process: step counts, checkpoints, resume, precision, failures."""

import os

import numpy as np
import pytest

from counted_result import CountedResult
from helpers import install_fake_horovod, only_row, run_inprocess

pytestmark = pytest.mark.slow

BASE = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4", "--csv_file=",
        "--json_dir="]


def step_lines(lines):
    return [l for l in lines if l[:1].isdigit() and "images/sec:" in l]


def test_display_every_one_prints_every_step(tmp_path):
    code, lines = run_inprocess(BASE + ["--num_batches=7", "--display_every=1"], tmp_path)
    assert code == 0
    assert [l.split("\t")[0] for l in step_lines(lines)] == [str(i) for i in range(1, 8)]
    assert lines[-2].startswith("total images/sec: ")


def test_checkpoint_retention_and_resume(tmp_path):
    train_dir = str(tmp_path / "ckpt")
    args = BASE + ["--num_warmup_batches=0", "--train_dir=" + train_dir, "--save_model_steps=2",
                   "--max_ckpts_to_keep=3", "--display_every=1"]
    code, _ = run_inprocess(args + ["--num_batches=10"], tmp_path)
    assert code == 0
    # Resuming: --num_batches is a global-step target, as in the legacy script.
    code, lines = run_inprocess(args + ["--num_batches=20"], tmp_path)
    assert code == 0
    assert len(step_lines(lines)) == 10
    kept = sorted(int(f.split("-")[1].split(".")[0]) for f in os.listdir(train_dir)
                  if f.startswith("model.ckpt-") and f.endswith(".index"))
    assert kept == [16, 18, 20]


def test_resume_counts_warmup_in_global_step(tmp_path):
    train_dir = str(tmp_path / "ckpt")
    args = BASE + ["--num_warmup_batches=2", "--train_dir=" + train_dir, "--display_every=1"]
    assert run_inprocess(args + ["--num_batches=4"], tmp_path)[0] == 0
    code, lines = run_inprocess(args + ["--num_batches=8"], tmp_path)
    # First run ends at global step 6; the second runs 8 - 6 = 2 timed steps (N - warm-up).
    assert code == 0 and len(step_lines(lines)) == 2


@pytest.mark.parametrize("precision_flags", [["--precision=bf16"], ["--use_fp16"],
                                             ["--use_fp16", "--fp16_enable_auto_loss_scale"]])
def test_mixed_precision_runs_with_finite_loss(tmp_path, precision_flags):
    # A batch-normalised model: unnormalised synthetic inputs overflow fp16 in lenet.
    code, lines = run_inprocess(BASE + ["--num_batches=3", "--model=resnet20",
                                        "--data_name=cifar10"] + precision_flags, tmp_path)
    assert code == 0, lines
    loss = float(step_lines(lines)[-1].split("\t")[-1])
    assert np.isfinite(loss)


DIVERGING = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
             "--num_batches=6", "--num_warmup_batches=0", "--display_every=2",
             "--init_learning_rate=1e30", "--json_dir="]


def test_a_nan_loss_on_real_data_stops_the_run_with_status_nan(tmp_path):
    from tfbench.data.fake_imagenet import write_fake_imagenet
    data = tmp_path / "data"
    write_fake_imagenet(str(data), num_train=16, num_validation=8, num_shards=1, seed=1,
                        image_size=24)
    code, lines = run_inprocess(DIVERGING + ["--data_dir=%s" % data, "--csv_file=r.csv"],
                                tmp_path)
    assert code == 4
    row = only_row(tmp_path / "r.csv")
    assert row["status"] == "nan"
    assert row["error"].startswith("Loss became NaN at step 2 of trivial (fp32, batch 4): use "
                                   "loss scaling")


def test_a_nan_loss_on_synthetic_data_is_said_once_and_the_run_is_timed(tmp_path):
    """As the legacy script: AlexNet diverges on synthetic images at any batch size, and its
    throughput is still what the run measures."""
    code, lines = run_inprocess(DIVERGING + ["--csv_file=r.csv"], tmp_path)
    assert code == 0, lines
    said = [line for line in lines if "Loss became" in line]
    assert len(said) == 1 and "on synthetic images" in said[0], said
    row = only_row(tmp_path / "r.csv")
    assert row["status"] == "ok" and float(row["images_per_sec"]) > 0
    assert "Loss became NaN at step 2 of trivial" in row["notices"]
    losses = [float(line.split("\t")[-1]) for line in step_lines(lines)]   # steps 1, 2, 4, 6
    assert np.isfinite(losses[0]) and np.isnan(losses[1:]).all() and len(losses) == 4
    assert lines[-2].startswith("total images/sec: ")


def test_optimizers_train(tmp_path):
    for opt in ("momentum", "rmsprop", "adam"):
        code, lines = run_inprocess(BASE + ["--num_batches=2", "--optimizer=" + opt,
                                            "--gradient_clip=1.0"], tmp_path)
        assert code == 0, (opt, lines)
        assert "Optimizer:   %s" % opt in lines


def test_cifar_model_implies_dataset_with_notice(tmp_path):
    code, lines = run_inprocess(BASE + ["--model=resnet20", "--num_batches=1",
                                        "--num_warmup_batches=0"], tmp_path)
    assert code == 0, lines
    assert "Model resnet20 exists only for cifar10: using --data_name=cifar10" in lines
    assert "Dataset:     cifar10 (synthetic)" in lines


def test_expected_range_line_for_a_known_gpu():
    import json

    from tfbench.engine import meter as meter_lib
    from tfbench.output import console
    from tfbench.results import RunResult
    res = RunResult(model="resnet50_v1.5", mode="training", precision="fp16", num_devices=1,
                    batch_size=256, images_per_sec=2200.0)
    res.extra["device_name"] = "NVIDIA A100-SXM4-40GB"
    meter_lib.expected_range_figures(res, "gpu")
    assert res.extra["expected_range"] == "within"
    # The JSON keeps the band and its sources; the line is rendered from them.
    reference = res.extra["expected_range_reference"]
    assert reference["low"] < 2200.0 < reference["high"] and reference["references"]
    (line,) = console.summary_lines(res)
    assert line.startswith("Expected range for resnet50_v1.5 training fp16, 1x A100 40GB SXM, "
                           "batch 256 per GPU")
    assert res.extra["expected_range_source"] == (
        "NVIDIA DeepLearningExamples TF1 ResNet-50 v1.5 README (20.06-tf1) (TF1): "
        "resnet50_v1.5 bs256 2,375 images/sec")
    # tfbench's resnet50 is v1: not judged against NVIDIA's v1.5 figures, and the row says so.
    v1 = RunResult(model="resnet50", mode="training", precision="fp16", num_devices=1,
                   batch_size=256, images_per_sec=2200.0)
    v1.extra["device_name"] = "NVIDIA A100-SXM4-40GB"
    meter_lib.expected_range_figures(v1, "gpu")
    assert (v1.extra["expected_range"], v1.extra["expected_range_source"]) == ("", "")
    assert console.summary_lines(v1) == [
        "Expected range: no published figure for resnet50 training fp16, 1x A100 40GB SXM, "
        "batch 256 per GPU (published: resnet50_v1.5 at batch 256)"]
    assert line.endswith("; +/-10%]") and ", measured 2,200: within [published " in line
    res.extra = json.loads(json.dumps(res.extra))   # as a JSON manifest keeps them
    assert console.summary_lines(res) == [line]


def test_nhwc_only_model_says_so_under_nchw():
    from tfbench.config.settings import make_settings
    from tfbench.engine.resolved import resolve
    r = resolve(make_settings({"device": "cpu", "model": "convnext_tiny", "mkl": True,
                             "data_format": "NCHW"}))
    assert r.device.data_format == "NHWC"
    assert any("cannot run channels-first" in n for n in r.notices)


def test_tf_random_seed_makes_the_losses_repeatable(tmp_path):
    def losses(seed):
        code, lines = run_inprocess(BASE + ["--num_batches=3", "--num_warmup_batches=1",
                                            "--display_every=1", "--tf_random_seed=%d" % seed],
                                    tmp_path)
        assert code == 0
        return [l.split("\t")[2] for l in step_lines(lines)]
    first = losses(7)
    assert len(first) == 3
    assert losses(7) == first
    assert losses(8) != first
    # Seeds outside numpy's range work, as TensorFlow's seeds always did.
    assert losses(-1) == losses(-1)
    assert len(losses(2**40)) == 3


def test_memory_peak_is_reset_after_warm_up_and_the_warm_up_peak_kept(tmp_path, monkeypatch):
    """cuDNN's autotuning scratch during warm-up must not count toward the memory figure."""
    import json

    from tfbench.measure import memory
    gib = 1 << 30
    events = []

    def reset(names):
        events.append("reset")

    def peaks(names):
        # Autotuning happens during warm-up: a high peak until the second reset.
        resets = events.count("reset")
        events.append("read")
        return {name: (9 if resets < 2 else 4) * gib for name in names}, None

    monkeypatch.setattr(memory, "reset_peak", reset)
    monkeypatch.setattr(memory, "peak_device_bytes", peaks)
    code, lines = run_inprocess(
        ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4", "--csv_file=",
         "--json_dir=" + str(tmp_path), "--num_batches=3", "--num_warmup_batches=2"], tmp_path)
    assert code == 0
    # Reset before warm-up; after warm-up read the warm-up peak, then reset; read at the end.
    assert events == ["reset", "read", "reset", "read"]
    (name,) = os.listdir(tmp_path)
    with open(os.path.join(tmp_path, name)) as handle:
        extra = json.load(handle)["extra"]
    assert extra["peak_mem_gb"] == 4.0 and extra["warmup_peak_mem_gb"] == 9.0
    assert "Memory: peak 4.00 GiB per device (steady state; warm-up 9.00 GiB)" in "\n".join(lines)


def _horovod(monkeypatch, rank):
    return install_fake_horovod(monkeypatch, rank=rank, size=2, local_rank=0)


HOROVOD_TRAIN_DIR = BASE + ["--variable_update=horovod", "--num_warmup_batches=1",
                            "--save_model_steps=1", "--summary_verbosity=1",
                            "--save_summaries_steps=1000", "--display_every=1"]


def test_horovod_rank_0_resumes_then_broadcasts_its_restored_state(tmp_path, monkeypatch):
    """Rank 0 restores the checkpoint before it broadcasts its variables to the other ranks."""
    train_dir = tmp_path / "ckpt"
    args = HOROVOD_TRAIN_DIR + ["--train_dir=%s" % train_dir]
    _horovod(monkeypatch, rank=0)
    assert run_inprocess(args + ["--num_batches=2"], tmp_path)[0] == 0
    files = os.listdir(train_dir)
    assert "model.ckpt-3.index" in files and any(f.startswith("events.") for f in files)
    hvd = _horovod(monkeypatch, rank=0)
    code, lines = run_inprocess(args + ["--num_batches=5"], tmp_path)
    assert code == 0 and len(step_lines(lines)) == 2
    # The initial state when the steps are built, then the state restored at step 3.
    assert hvd.broadcast_steps == [[0], [3]]
    assert "model.ckpt-6.index" in os.listdir(train_dir)


def test_horovod_rank_1_writes_nothing_into_train_dir_and_takes_rank_0s_state(
        tmp_path, monkeypatch):
    """Only rank 0 saves into --train_dir (every rank saving the same step into one directory
    collides); the others start from the state rank 0 broadcasts."""
    train_dir = tmp_path / "ckpt"
    args = HOROVOD_TRAIN_DIR + ["--train_dir=%s" % train_dir]
    _horovod(monkeypatch, rank=0)
    assert run_inprocess(args + ["--num_batches=2"], tmp_path)[0] == 0
    written = {f: os.path.getmtime(train_dir / f) for f in os.listdir(train_dir)}
    hvd = _horovod(monkeypatch, rank=1)
    code, lines = run_inprocess(args + ["--num_batches=5"], tmp_path)
    assert code == 0
    assert {f: os.path.getmtime(train_dir / f) for f in os.listdir(train_dir)} == written
    assert ("--train_dir: horovod rank 0 writes the checkpoints and summaries; this process "
            "writes none there and resumes from its state") in lines
    # Rank 1 reads no checkpoint itself: it resumes from what rank 0 broadcasts.
    assert hvd.broadcast_steps == [[0], [0]]


# What a run describes of itself, each written once (runner.describe, then describe_steps).
DESCRIBED = ("model", "dataset", "mode", "train_and_eval", "precision", "xla", "batch_size",
             "global_batch_size", "num_devices", "device_kind", "data_format", "image_size",
             "num_batches", "num_warmup_batches", "step_line_batch", "accum_steps",
             "data_source", "extra.device_name", "extra.devices", "extra.num_epochs")


def test_a_run_reads_its_facts_and_cluster_once_resolves_once_and_describes_once(monkeypatch):
    import sys
    from tfbench.config.settings import make_settings
    from tfbench.distribute import cluster
    from tfbench.engine import actions, runner
    from tfbench.engine.runlog import SilentLog
    calls = {"read_facts": 0, "resolve": 0, "read_cluster": 0}
    read_facts, resolve, read_cluster = actions.read_facts, runner.resolve, cluster.read_cluster

    def counted(name, fn):
        def call(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        return call

    def cluster_read_by_resolving(*a, **k):
        if sys._getframe(1).f_code.co_filename.endswith("resolved.py"):
            calls["read_cluster"] += 1
        return read_cluster(*a, **k)
    monkeypatch.setattr(actions, "read_facts", counted("read_facts", read_facts))
    monkeypatch.setattr(runner, "resolve", counted("resolve", resolve))
    monkeypatch.setattr(cluster, "read_cluster", cluster_read_by_resolving)
    res = CountedResult()
    p = make_settings({"device": "cpu", "model": "trivial", "image_size": 16, "batch_size": 4,
                     "num_batches": 2, "num_warmup_batches": 1})
    runner.run(p, SilentLog(), res)
    assert calls == {"read_facts": 1, "resolve": 1, "read_cluster": 1}
    assert {name: res.writes[name] for name in DESCRIBED} == dict.fromkeys(DESCRIBED, 1)


def test_a_failed_step_names_the_batch_the_run_times(tmp_path):
    """In eval mode the steps run --eval_batch_size, not the training batch: an out-of-memory
    or runtime failure names the batch that ran (Facts.run_batch_size)."""
    import tensorflow as tf
    from tfbench.config.settings import make_settings
    from tfbench.engine import runner
    from tfbench.engine.resolved import resolve
    from tfbench.results import RunResult
    p = make_settings({"device": "cpu", "model": "trivial", "eval": True, "batch_size": 32,
                       "eval_batch_size": 8, "train_dir": str(tmp_path)})
    plan = resolve(p)
    oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    assert "at batch size 8 per device in fp32: reduce --eval_batch_size" in str(
        runner._failure(oom, p, plan, None, RunResult()))
    failed = tf.errors.InternalError(None, None, "cuDNN launch failure")
    assert "(fp32, batch size 8 per device): cuDNN launch failure" in str(
        runner._runtime_failure(failed, p, plan, RunResult()))
