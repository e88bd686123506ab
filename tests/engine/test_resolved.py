"""The runner's arithmetic, from flags alone (no cluster is started): learning-rate steps,
dataset sizes, evaluation batches and the images a Step line counts, as benchmark_cnn.py has
them."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from helpers import run_inprocess
from tfbench.config import fast_paths
from tfbench.engine import base, runner, train
from tfbench.engine.resolved import resolve
from tfbench.config.settings import make_settings
from tfbench.errors import UsageError
from tfbench.results import RunResult

PS_CLUSTER = {"ps_hosts": "127.0.0.1:7001", "worker_hosts": "127.0.0.1:7002,127.0.0.1:7003",
              "controller_host": "127.0.0.1:7004", "job_name": "controller"}
TWO_WORKERS = {"worker_hosts": "127.0.0.1:7002,127.0.0.1:7003", "job_name": "worker",
               "task_index": 0}


def _learning_rates(values, steps):
    p = make_settings(values)
    opt = train.make_optimizer(p, resolve(p), lambda text: None)
    rates = []
    for step in steps:
        opt.iterations.assign(step)
        rates.append(float(opt.learning_rate))
    return rates


def test_parameter_server_schedule_counts_one_workers_batch_per_step():
    # Every worker's update advances the shared step: legacy examples_per_step is the
    # per-worker batch (benchmark_cnn.py _build_fetches), so resnet50 at 64 per worker warms up
    # over int(1281167 / 64 * 5) = 100091 steps to 0.128 * 64 / 256, whatever the worker count.
    flags = dict(PS_CLUSTER, device="cpu", model="resnet50", batch_size=64)
    got = _learning_rates(flags, [50045, 100090, 100091, int(1281167 / 64 * 30) + 1])
    assert got == pytest.approx([0.032 * 50045 / 100091, 0.032 * 100090 / 100091, 0.032,
                                 0.0032], rel=1e-5)


def test_a_parameter_server_controller_counts_the_workers_replicas_in_its_evaluation_batch():
    """The controller's own 2 devices are not the workers' replicas (1 each)."""
    p = make_settings(dict(PS_CLUSTER, device="cpu", num_gpus=2, model="trivial", batch_size=8,
                         eval_batch_size=8, num_eval_batches=3,
                         eval_during_training_every_n_steps=5))
    own, workers = resolve(p), resolve(p, replicas_per_worker=1)
    assert own.eval_global_batch == 8 * 2 * own.num_workers
    assert (workers.worker_batch, workers.eval_global_batch) == (8, 8 * workers.num_workers)


def test_all_reduce_cluster_schedule_counts_every_workers_batch():
    # One step is one update of every worker's images (legacy collective_all_reduce).
    flags = dict(TWO_WORKERS, device="cpu", model="resnet50", batch_size=64,
                 variable_update="collective_all_reduce")
    assert _learning_rates(flags, [int(1281167 / 128 * 5)]) == pytest.approx([0.064])


def test_global_batch_counts_micro_batches_devices_and_workers():
    # 4 images x 3 micro-batches x 2 devices x 2 workers (config.params.global_batch).
    p = make_settings(dict(TWO_WORKERS, device="cpu", num_gpus=2, model="trivial", batch_size=4,
                         accum_steps=3, num_runs=2))
    r = resolve(p)
    assert (r.global_batch, r.worker_batch, r.accum_steps, r.run_batch_size) == (48, 24, 3, 4)
    assert (r.total_devices, r.num_runs) == (4, 2)


def test_eval_mode_times_the_eval_batch_once_without_micro_batches(tmp_path):
    p = make_settings(dict(TWO_WORKERS, device="cpu", num_gpus=2, model="trivial", batch_size=32,
                         eval_batch_size=8, accum_steps=3, num_runs=3, eval=True,
                         train_dir=str(tmp_path)))
    r = resolve(p)
    assert (r.mode, r.run_batch_size, r.accum_steps, r.num_runs) == ("eval", 8, 1, 1)
    assert r.global_batch == 8 * 2 * 2
    assert "--num_runs applies to training and forward-only runs; evaluating once" in r.notices


def _folder(root, counts):
    """A folder dataset with two classes: `counts` maps a split directory to images per class."""
    for split, per_class in counts.items():
        for cls, value in (("a", 20), ("b", 230)):
            for i in range(per_class):
                path = root / split / cls / ("%d.png" % i)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(tf.io.encode_png(np.full((8, 8, 3), value, np.uint8)).numpy())
    return root


def test_folder_epochs_set_the_learning_rate_steps(tmp_path):
    # 8 training images in batches of 2: an epoch is 4 steps, so one warm-up epoch is 4 steps.
    data_dir = _folder(tmp_path / "data", {"train": 4, "validation": 2})
    flags = {"device": "cpu", "model": "trivial", "batch_size": 2, "data_dir": str(data_dir),
             "init_learning_rate": 1.0, "num_learning_rate_warmup_epochs": 1}
    assert _learning_rates(flags, [2, 4]) == pytest.approx([0.5, 1.0])


@pytest.mark.slow
def test_folder_epochs_set_when_evaluation_runs_and_how_long(tmp_path):
    # 8 training images in batches of 2 (4 steps an epoch), 4 validation images: an
    # evaluation after epochs 1 and 2 of 3, then the final one; --num_eval_epochs=1 is 2
    # batches of 2.
    data_dir = _folder(tmp_path / "data", {"train": 4, "validation": 2})
    code, lines = run_inprocess(
        ["--device=cpu", "--model=trivial", "--image_size=8", "--batch_size=2",
         "--data_dir=%s" % data_dir, "--num_epochs=3", "--num_warmup_batches=0",
         "--eval_during_training_every_n_epochs=1", "--num_eval_epochs=1", "--display_every=100",
         "--csv_file=", "--json_dir="], tmp_path)
    assert code == 0, lines
    assert [l for l in lines if " evaluation at global_step " in l] == [
        "Running evaluation at global_step 4",
        "Running evaluation at global_step 8", "Running final evaluation at global_step 12"]
    accuracy = [l for l in lines if l.startswith("Accuracy @ 1")]
    assert len(accuracy) == 3 and all(l.endswith("[4 examples]") for l in accuracy)


@pytest.mark.slow
def test_evaluation_without_eval_length_flags_covers_trainings_epochs(tmp_path):
    # Legacy: no --num_eval_* flag evaluates --num_epochs of the validation set:
    # int(0.0001 * 50000 + 4 - 1) // 4 = 2 batches of 4.
    code, lines = run_inprocess(
        ["--device=cpu", "--model=trivial", "--image_size=8", "--batch_size=4",
         "--num_epochs=0.0001", "--num_warmup_batches=0",
         "--eval_during_training_every_n_steps=16", "--display_every=1000",
         "--csv_file=", "--json_dir="], tmp_path)
    assert code == 0, lines
    accuracy = [l for l in lines if l.startswith("Accuracy @ 1")]
    assert len(accuracy) == 2 and all(l.endswith("[8 examples]") for l in accuracy), accuracy


@pytest.mark.parametrize("variable_update, batch", [("collective_all_reduce", 4),
                                                     ("distributed_all_reduce", 8)])
def test_step_lines_count_the_workers_images_legacy_counts(variable_update, batch):
    # Legacy Step lines count this worker's batch, except distributed_all_reduce's single
    # session, whose one step is every worker's (batch_size * num_workers).
    plan = resolve(make_settings(dict(TWO_WORKERS, device="cpu", model="trivial", batch_size=4,
                                    variable_update=variable_update)))
    mean, _, _ = base.step_stats(RunResult(), plan.step_line_batch, [0.5, 0.5], None)
    assert mean == pytest.approx(batch / 0.5)


class _Workers:
    """What a controller's ParameterServerStrategy counts: 1 CPU replica per worker."""
    num_replicas_in_sync = 1
    extended = type("Extended", (), {"_num_gpus_per_worker": 0})()


def _ps_controller(p):
    """A parameter-server controller's BuiltStrategy, whose strategy counted _Workers."""
    from tfbench.distribute.strategy import BuiltStrategy
    return BuiltStrategy(_Workers(), "parameter_server", None, False, num_workers=2)


def test_a_parameter_server_controller_reads_a_folder_dataset_and_resolves_once(
        tmp_path, monkeypatch):
    """The controller reads the facts before its strategy exists and does the arithmetic once,
    over the replicas its strategy counted: it walks a folder dataset's tree, lists the GPUs and
    reads the cluster once, and describes the workers' devices, not its own 2."""
    from tfbench.data import folder
    from tfbench.distribute import cluster, devices
    from tfbench.engine import resolved
    data_dir = _folder(tmp_path / "data", {"train": 4, "validation": 2})
    walks, device_plans, clusters, resolves = [], [], [], []
    list_images, select_devices = folder.list_images, devices.select_devices
    read_cluster, resolve_ = cluster.read_cluster, resolved.resolve
    monkeypatch.setattr(folder, "list_images",
                        lambda *a, **k: walks.append(a) or list_images(*a, **k))
    monkeypatch.setattr(devices, "select_devices",
                        lambda *a, **k: device_plans.append(a) or select_devices(*a, **k))
    monkeypatch.setattr(cluster, "read_cluster",
                        lambda *a, **k: clusters.append(a) or read_cluster(*a, **k))
    monkeypatch.setattr(runner, "resolve",
                        lambda *a, **k: resolves.append(k) or resolve_(*a, **k))
    p = make_settings(dict(PS_CLUSTER, device="cpu", num_gpus=2, model="trivial", batch_size=2,
                         data_dir=str(data_dir)))
    facts = resolved.read_facts(p)
    res = RunResult()
    runner.describe(p, facts, res)
    assert runner._plan_before_strategy(p, facts, res) is None
    plan = runner._resolve(p, facts, res, **runner._replicas_counted(_ps_controller(p)))
    assert len(walks) == 1 and len(device_plans) == 1 and len(clusters) == 1
    assert len(resolves) == 1
    # 2 workers x 1 replica x 2 images (not x 2 controller devices), 8 training images.
    assert (plan.global_batch, plan.worker_batch, plan.train_examples) == (4, 2, 8)
    assert (res.global_batch_size, res.num_devices, res.device_kind) == (4, 1, "cpu")
    assert plan.replica_notices == (
        "Parameter-server workers run 1 replica(s) each: a step counts 2 images per worker, "
        "not this controller's 2 device(s)",)


def test_what_resolving_read_is_kept_once_in_the_facts():
    """The model, devices, precision, image size, mode, evaluations, data kind and data sizes
    of a Resolved are its Facts': changed there, they change; the arithmetic stays."""
    from tfbench.engine.resolved import FORWARD_ONLY, Resolved
    r = resolve(make_settings({"device": "cpu", "model": "trivial", "batch_size": 4}))
    changed = {"spec": dataclasses.replace(r.spec, name="other", image_size=17),
               "device": dataclasses.replace(r.device, names=("/cpu:9",)),
               "precision": "fp16", "image_size": 99, "mode": FORWARD_ONLY,
               "train_and_eval": True, "real_data": True, "train_examples": 7,
               "eval_examples": 3}
    moved = r.with_facts(**changed)
    assert {name: getattr(moved, name) for name in changed} == changed
    assert (moved.train_batch_size, moved.global_batch, moved.notices) == (4, 4, r.notices)
    assert not set(changed) & {f.name for f in dataclasses.fields(Resolved)}


@pytest.mark.parametrize("data_name", ["", "imagenet", "cifar10", "folder"])
def test_a_missing_data_dir_is_refused_with_or_without_data_name(tmp_path, data_name):
    # Without --data_name it was refused at once; with one, only once the pipeline was built,
    # after the header: it is refused here, before the header, in the same line.
    missing = tmp_path / "imagenet"
    with pytest.raises(UsageError) as err:
        resolve(make_settings({"device": "cpu", "model": "trivial", "data_dir": str(missing),
                             "data_name": data_name}))
    # ImageNet's says what it expects there and how to make a small one, as its reader does.
    hint = (" (expected ImageNet TFRecords in the legacy layout; create a small one with "
            "`tfbench make_fake_imagenet --out DIR`)") if data_name == "imagenet" else ""
    assert str(err.value) == "--data_dir=%s does not exist or is not a directory%s" % (
        missing, hint)


def _empty_images(root, counts):
    """A folder dataset of empty *.png files (resolving counts names, reads no pixels):
    `counts` maps a class directory (under a split directory or not) to its images."""
    for class_dir, n in counts.items():
        for i in range(n):
            path = root / class_dir / ("%d.png" % i)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
    return root


def test_folder_data_says_what_it_found(tmp_path):
    plots = _empty_images(tmp_path / "report", {"plots": 9})
    flags = {"device": "cpu", "model": "trivial", "data_dir": str(plots)}
    plan = resolve(make_settings(dict(flags, batch_size=4)))
    found = "Found 9 images in 1 class (plots) in %s" % plots
    assert [n for n in plan.notices if n.startswith("Found")] == [found]
    assert (plan.train_examples, plan.num_epochs) == (9, 100 * 4 / 9)
    many = _empty_images(tmp_path / "many", {"c%d" % i: 1 for i in range(7)})
    plan = resolve(make_settings(dict(flags, batch_size=1, data_dir=str(many))))
    assert "Found 7 images in 7 classes (c0, c1, c2, c3, c4, ...) in %s" % many in plan.notices


def test_counted_data_smaller_than_one_global_batch_is_refused(tmp_path):
    plots = _empty_images(tmp_path / "report", {"plots": 9})
    flags = {"device": "cpu", "model": "trivial", "data_dir": str(plots)}
    for more, batch in [({"batch_size": 32}, 32), ({"batch_size": 5, "num_gpus": 2}, 10),
                        ({"batch_size": 3, "accum_steps": 4}, 12)]:
        with pytest.raises(UsageError) as err:
            resolve(make_settings(dict(flags, **more)))
        assert str(err.value) == (
            "--data_dir holds too few images for one global batch of %d: found 9 images in 1 "
            "class (plots) in %s (is it the dataset you meant? a smaller --batch_size runs it)"
            % (batch, plots))
    assert resolve(make_settings(dict(flags, batch_size=9))).global_batch == 9
    # An evaluation reads the validation split, in batches of every device's eval batch.
    split = _empty_images(tmp_path / "split", {"train/a": 4, "train/b": 4, "validation/a": 1,
                                               "validation/b": 1})
    evaluating = dict(flags, data_dir=str(split), batch_size=2,
                      eval_during_training_every_n_steps=2)
    plan = resolve(make_settings(evaluating))
    assert [n for n in plan.notices if n.startswith("Found")] == [
        "Found 8 images in 2 classes (a, b) in %s" % (split / "train"),
        "Found 2 images in 2 classes (a, b) in %s" % (split / "validation")]
    with pytest.raises(UsageError, match="too few images for one global evaluation batch of 4: "
                                         "found 2 images in 2 classes"):
        resolve(make_settings(dict(evaluating, eval_batch_size=4)))
    # The legacy sizes of ImageNet and CIFAR-10 are not counted: nothing said, nothing refused.
    (tmp_path / "tfrecords" / "train-00000-of-00001").parent.mkdir()
    (tmp_path / "tfrecords" / "train-00000-of-00001").write_bytes(b"x")
    plan = resolve(make_settings(dict(flags, batch_size=4096,
                                    data_dir=str(tmp_path / "tfrecords"))))
    assert not [n for n in plan.notices if n.startswith("Found")]


# --- "is this a parameter-server run?": Facts.parameter_server, asked by every reader -------

def _oom_advice_reads_this_cpu(p, plan, monkeypatch):
    """The OOM error's bf16 advice reads this host's CPU unless the workers run the steps."""
    from tfbench.measure import cpu_units
    read = []
    monkeypatch.setattr(cpu_units, "cpu_flags", lambda: read.append(1) or frozenset())
    oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    assert runner._failure(oom, p, plan, _ps_controller(p), RunResult()) is not None
    return not read


def _fp16_notice_reads_this_cpu(p, plan, monkeypatch):
    """An fp16 run on CPUs: this host's CPU units are read unless the workers run the steps."""
    from tfbench.measure import cpu_units
    read = []
    monkeypatch.setattr(cpu_units, "cpu_flags", lambda: read.append(1) or frozenset())
    fp16 = dataclasses.replace(plan.facts, precision="fp16")
    resolve(p, facts=fp16)
    return not read


def _meter_measures_elsewhere(p, plan, monkeypatch):
    from tfbench.engine.meter import Meter
    meter = Meter.start(plan, 10.0)
    meter.stop()
    return meter.elsewhere is not None


def _explain_does_not_apply(p, plan, monkeypatch):
    from tfbench.distribute.strategy import BuiltStrategy
    from tfbench.engine import explain
    sp = BuiltStrategy(object(), "replicated", None, False)
    return not explain.applies(p.with_flags(explain_scaling=True), plan, sp)


def _optimizer_counts_every_workers_update(p, plan, monkeypatch):
    opt = train.make_optimizer(p, plan, lambda text: None)
    return "assign_add" in vars(opt.iterations)   # train._count_every_update


# Every reader of the answer, by where it used to ask the flags (resolved.py) or the strategy
# (strategies.is_parameter_server): each returns whether it treated the run as one.
PARAMETER_SERVER_READERS = {
    "resolve: each worker's update counts in the global step":
        lambda p, plan, mp: resolve(p, facts=plan.facts).iterations_per_step == 2,
    "resolve: the fp16 notice of the workers' CPUs": _fp16_notice_reads_this_cpu,
    "base.step_fast_paths: the standard step": lambda p, plan, mp:
        base.step_fast_paths(plan) == fast_paths.STANDARD and plan.device.kind == "cpu",
    "train.make_optimizer": _optimizer_counts_every_workers_update,
    "runner: resolved once the strategy counted the replicas": lambda p, plan, mp:
        runner._plan_before_strategy(p, plan.facts, RunResult()) is None,
    "runner: the OOM advice": _oom_advice_reads_this_cpu,
    "meter.Meter: measured elsewhere": _meter_measures_elsewhere,
    "explain.applies": _explain_does_not_apply,
}


@pytest.mark.parametrize("reader", sorted(PARAMETER_SERVER_READERS))
@pytest.mark.parametrize("flags", [PS_CLUSTER, TWO_WORKERS], ids=["ps_flags", "worker_flags"])
def test_every_reader_asks_the_plan_whether_it_is_a_parameter_server_run(
        reader, flags, monkeypatch):
    """The cluster is read once, into Facts.parameter_server: every reader follows the plan's
    answer, not the flags' cluster (read again) nor the strategy's type. Each plan here says
    the opposite of its flags."""
    p = make_settings(dict(flags, device="cpu", model="trivial", batch_size=4))
    plan = resolve(p)
    assert plan.parameter_server == (flags is PS_CLUSTER) and plan.num_workers == 2
    flipped = plan.with_facts(parameter_server=not plan.parameter_server)
    assert PARAMETER_SERVER_READERS[reader](p, flipped, monkeypatch) == \
        flipped.parameter_server


# --- loss scaling, accuracy on/off, the reported loss: each decided once, in the facts -------

def _runner(p, plan):
    return base.ModeRunner(p=p, plan=plan, strategy=tf.distribute.get_strategy())


@pytest.mark.parametrize("flags, planned", [
    ({"use_fp16": True, "fp16_enable_auto_loss_scale": True}, ("none", 1.0)),
    ({}, ("dynamic", 8.0)),
    ({"use_fp16": True}, ("dynamic", 8.0)),
], ids=["fp16_dynamic_flags_plan_none", "fp32_flags_plan_dynamic", "static_flags_plan_dynamic"])
def test_the_optimizer_and_the_steps_scale_the_loss_as_the_plan_says(flags, planned):
    """Loss scaling is decided once (config.settings.loss_scaling, into Facts): the optimizer's
    LossScaleOptimizer (train.make_optimizer) and the steps' scaling (ModeRunner.step_config)
    follow a plan that contradicts the flags."""
    from tfbench.engine import optimizers
    p = make_settings(dict(flags, device="cpu", model="trivial", batch_size=4))
    plan = resolve(p).with_facts(loss_scaling=planned[0], loss_scale=planned[1])
    opt = train.make_optimizer(p, plan, lambda text: None)
    config = _runner(p, plan).step_config("training")
    assert (config.loss_scaling, config.loss_scale) == planned
    assert isinstance(opt, optimizers.LossScaleOptimizer) == (planned[0] == "dynamic")
    if planned[0] == "dynamic":
        assert opt.initial_scale == planned[1]


def test_loss_scaling_follows_the_flags_and_precision():
    def scaling(**flags):
        return resolve(make_settings(dict(flags, device="cpu", model="trivial"))).loss_scaling, \
            resolve(make_settings(dict(flags, device="cpu", model="trivial"))).loss_scale
    assert scaling() == ("none", 1.0)
    assert scaling(precision="bf16") == ("none", 1.0)
    assert scaling(use_fp16=True) == ("static", 128.0)
    assert scaling(use_fp16=True, fp16_loss_scale=64.0) == ("static", 64.0)
    assert scaling(use_fp16=True, fp16_enable_auto_loss_scale=True) == ("dynamic", 2.0 ** 15)


@pytest.mark.parametrize("flag", [False, True])
def test_every_step_asks_the_plan_whether_it_computes_accuracy(flag):
    """Training steps compute top-1/top-5 as the plan says (Facts.training_accuracy, from
    --print_training_accuracy); evaluation and forward-only steps always do."""
    p = make_settings({"device": "cpu", "model": "trivial", "print_training_accuracy": flag})
    plan = resolve(p)
    assert plan.facts.training_accuracy == flag
    flipped = plan.with_facts(training_accuracy=not flag)
    runner_ = _runner(p, flipped)
    assert runner_.step_config("training").compute_accuracy == (not flag)
    assert runner_.step_config("eval").compute_accuracy
    assert runner_.step_config("forward_only").compute_accuracy
