"""The evaluation's configurations and bookkeeping (tfbench.sweep.evaluation): which runs, with
which flags, which mixed precision, which settings identify it, and which runs have finished."""

import json
import os

import pytest

from evaluation_fakes import result, write
from helpers import ROOT
from helpers import FakeNvml, NVMLError
from tfbench import errors
from tfbench.measure import nvml as nvml_lib, tensorrt
from tfbench.sweep import evaluation as ev
from tfbench.config.argv import settings_of_flags
from tfbench.sweep.grid import point_flags


def test_the_plan_is_five_models_three_modes_training_and_inference():
    items = ev.configurations(ev.Method())
    assert len(items) == 30
    assert [i.name for i in items[:6]] == [
        "resnet50_native_training", "resnet50_native_inference", "resnet50_mixed_training",
        "resnet50_mixed_inference", "resnet50_mixed_xla_training", "resnet50_mixed_xla_inference"]
    assert sorted({i.model for i in items}) == sorted(
        ["resnet50", "resnet101", "mobilenet_v3_large", "efficientnet_b0", "vit_tiny"])


def _params(item, method=ev.Method(), mixed="fp16", base=()):
    return settings_of_flags(point_flags(list(base), ev.item_flags(item, method, mixed)))


def test_each_run_gets_the_method_flags():
    train = _params(ev.Item("resnet50", "native", "training"), base=["--num_gpus=4"])
    assert (train.workload.model, train.schedule.batch_size, train.schedule.num_batches,
            train.schedule.num_warmup_batches, train.schedule.num_runs,
            train.workload.tf_random_seed, train.devices.num_gpus, train.mode.forward_only,
            train.numerics.precision, train.runtime.xla) == ("resnet50", 32, 200, 20, 3, 1234, 4,
                                                             False, "fp32", False)
    infer = _params(ev.Item("vit_tiny", "mixed_xla", "inference"), base=["--num_gpus=4"])
    assert (infer.mode.forward_only, infer.schedule.batch_size, infer.schedule.num_batches,
            infer.devices.num_gpus, infer.numerics.precision, infer.runtime.xla,
            infer.numerics.fp16_enable_auto_loss_scale) == (
        True, 1, 1000, 1, "fp16", True, False)
    mixed = _params(ev.Item("resnet50", "mixed", "training"))
    assert (mixed.numerics.precision, mixed.numerics.fp16_enable_auto_loss_scale,
            mixed.runtime.xla) == ("fp16", True, False)
    cpu = _params(ev.Item("resnet50", "mixed", "training"), mixed="bf16")
    assert (cpu.numerics.precision, cpu.numerics.fp16_enable_auto_loss_scale) == ("bf16", False)
    quick = _params(ev.Item("resnet50", "native", "training"), ev.Method(**ev.QUICK))
    assert quick.workload.image_size == 32 and quick.schedule.num_batches == ev.QUICK["train_steps"]
    # Inference at batch 1 runs on the first of the GPUs the user names.
    base = ["--gpu_indices=2,3", "--num_gpus=2"]
    points = {p.name: settings_of_flags(point_flags(base, p.flags))
              for p in ev.points(ev.Method(models=("resnet50",)), "fp16", base)}
    assert (points["resnet50_native_training"].devices.gpu_indices,
            points["resnet50_native_training"].devices.num_gpus) == ("2,3", 2)
    assert (points["resnet50_native_inference"].devices.gpu_indices,
            points["resnet50_native_inference"].devices.num_gpus) == ("2", 1)


def test_the_tftrt_mode_is_inference_only_and_where_tf_trt_runs():
    assert len(ev.configurations(ev.Method(), tftrt=False)) == 30
    items = ev.configurations(ev.Method(models=("resnet50",)), tftrt=True)
    assert [i.name for i in items][-2:] == ["resnet50_mixed_xla_inference",
                                            "resnet50_tftrt_inference"]
    assert len(items) == 7
    for precision in ("FP16", "INT8"):
        method = ev.Method(tftrt_precision=precision)
        infer = _params(ev.Item("resnet50", "tftrt", "inference"), method,
                        base=["--num_gpus=4"])
        assert (infer.mode.forward_only, infer.schedule.batch_size, infer.devices.num_gpus,
                infer.numerics.precision, infer.runtime.xla, infer.mode.trt_mode,
                infer.schedule.num_batches) == (
            True, 1, 1, "fp32", False, precision, 1000)


def test_where_tf_trt_cannot_run_says_why():
    without = tensorrt.TensorRT("2.21.0", True, (0, 0, 0), False, None)
    with_trt = tensorrt.TensorRT("2.17.0", True, (10, 8, 0), True, (10, 8, 0))
    assert ev.tftrt_unavailable(["--device=cpu"], (1, "")) == \
        "--device=cpu, and TensorRT runs on NVIDIA GPUs"
    assert ev.tftrt_unavailable([], (0, "NVML: no driver")) == \
        "no NVIDIA GPU visible (NVML: no driver), and TensorRT runs on NVIDIA GPUs"
    assert ev.tftrt_unavailable([], (2, ""), lambda: without) == \
        "TensorFlow 2.21.0 is built without TensorRT (as every pip TensorFlow from 2.18 on)"
    assert ev.tftrt_unavailable([], (2, ""), lambda: with_trt) == ""


@pytest.mark.parametrize("base", [["--num_gpus=4"], ["--gpu_indices=2,3"]])
def test_training_on_several_gpus_uses_one_strategy_in_every_mode(base):
    """XLA cannot run with the default parameter_server on several devices (the engine switches
    it to replicated): every mode trains replicated, so the XLA speed-up measures XLA alone."""
    runs = {p.name: settings_of_flags(point_flags(base, p.flags))
            for p in ev.points(ev.Method(models=("resnet50",)), "fp16", base)}
    assert {n: r.devices.variable_update for n, r in runs.items() if n.endswith("_training")} == {
        "resnet50_native_training": "replicated", "resnet50_mixed_training": "replicated",
        "resnet50_mixed_xla_training": "replicated"}
    assert runs["resnet50_native_inference"].devices.variable_update == "parameter_server"   # 1 GPU


@pytest.mark.parametrize("base", [[], ["--num_gpus=1"], ["--num_gpus=4",
                                                         "--variable_update=parameter_server"]])
def test_one_gpu_or_the_users_own_choice_is_left_alone(base):
    runs = [settings_of_flags(point_flags(base, p.flags))
            for p in ev.points(ev.Method(models=("resnet50",)), "fp16", base)]
    assert {r.devices.variable_update for r in runs} == {"parameter_server"}


@pytest.mark.parametrize("flag, hint", [("--batch_size=64", "--train_batch_size"),
                                        ("--num_runs=5", "--repeats"),
                                        ("--use_fp16", "--mixed_precision"),
                                        ("--noxla", "--modes"),
                                        ("--trt_mode=FP16", "--modes (tftrt)"),
                                        ("--saved_model", "--modes (tftrt"),
                                        ("--model=vgg16", "--models")])
def test_flags_the_method_sets_are_refused_with_what_to_use(flag, hint):
    with pytest.raises(errors.UsageError) as exc:
        ev.check_flags([flag])
    assert "is set by the evaluation method; use %s" % hint in str(exc.value)
    with pytest.raises(errors.UsageError, match="unknown flag --bogus"):
        ev.check_flags(["--bogus=1"])
    ev.check_flags(["--num_gpus=8", "--data_dir=/data", "--device=gpu"])


def _gpus(n):
    return FakeNvml([{"uuid": "GPU-%d8f6c-0000" % i, "bus": i} for i in range(n)])


def test_mixed_precision_is_fp16_on_a_gpu_and_bf16_on_a_cpu():
    order = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert nvml_lib.cuda_gpus(order, _gpus(2)) == (2, "")
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "1", **order}, _gpus(2)) == (1, "")
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": ""}, _gpus(2))[0] == 0
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, _gpus(2))[0] == 0
    # CUDA stops at the first entry it cannot match; UUIDs (and their prefixes) are GPUs.
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,1", **order}, _gpus(2)) == (1, "")
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "GPU-18f6c,GPU-2", **order}, _gpus(4)) == (
        2, "")
    # Entries written are not GPUs: a typo, an index past the last GPU.
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "GPU-typo", **order}, _gpus(2)) == (
        0, "CUDA_VISIBLE_DEVICES='GPU-typo' leaves CUDA none of the GPUs NVML lists (its first "
           "entry matches none, or one repeats)")
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "1", **order}, _gpus(1))[0] == 0
    # Counting needs no order (CUDA_DEVICE_ORDER unset, several GPUs).
    assert nvml_lib.cuda_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}, _gpus(4)) == (2, "")


@pytest.mark.parametrize("spec, count", [
    ("0,0", 0), ("0,1,0", 0),                     # a repeated device leaves CUDA none
    ("GPU-08f6c,GPU-08f6c-0000", 0),              # the same GPU by two prefixes
    ("0,GPU-18f6c", 1), ("GPU-18f6c,0", 1),       # the first entry sets the form
    ("1gpu,0", 2), ("+1", 1),                     # ordinals are read like strtoul
    ("2,x,3", 1), ("3,0", 0),                     # the list ends at the first it cannot read
])
def test_cuda_visible_devices_is_read_as_the_cuda_driver_reads_it(spec, count):
    assert nvml_lib.cuda_device_count(_gpus(3), {"CUDA_VISIBLE_DEVICES": spec}) == count


def test_unset_counts_the_gpus_this_process_may_open():
    """NVML's count includes GPUs a cgroup or container denies this process."""
    class Denied(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, i):
            if i == 1:
                raise NVMLError(4)   # NVML_ERROR_NO_PERMISSION
            return super().nvmlDeviceGetHandleByIndex(i)
    assert nvml_lib.cuda_device_count(Denied([{"uuid": "GPU-a"}, {"uuid": "GPU-b"}]), {}) == 1
    assert ev.resolve_mixed_precision("auto", [], (2, "")) == ("fp16", "2 NVIDIA GPUs visible")
    assert ev.resolve_mixed_precision("auto", [], (0, "no driver")) == (
        "bf16", "no NVIDIA GPU visible: no driver")
    assert ev.resolve_mixed_precision("auto", ["--device=cpu"], (2, ""))[0] == "bf16"
    assert ev.resolve_mixed_precision("fp16", ["--device=cpu"], (0, "")) == (
        "fp16", "--mixed_precision=fp16")


def test_other_settings_in_the_same_directory_are_refused_and_named(tmp_path):
    out = str(tmp_path)
    first = ev.settings_record(ev.Method(models=("resnet50",)), False, ["--num_gpus=2"])
    assert ev.check_settings(out, first) is None
    ev.save_settings(out, first, "fp16", "1 NVIDIA GPU visible", "tfbench evaluate ...")
    assert ev.check_settings(out, first)["mixed_precision"] == "fp16"
    other = ev.settings_record(ev.Method(models=("vit_tiny",), repeats=5), True,
                               ["--num_gpus=4"])
    # Before any run has succeeded, other settings start the evaluation over.
    write(os.path.join(out, "evaluation.csv"), os.path.join(out, "runs"),
          result("resnet50", "native", "training", status="error"))
    assert ev.check_settings(out, other) is None
    write(os.path.join(out, "evaluation.csv"), os.path.join(out, "runs"),
          result("resnet50", "native", "inference"))
    with pytest.raises(errors.UsageError) as exc:
        ev.check_settings(out, other)
    text = str(exc.value)
    for part in ("--models vit_tiny here, resnet50 there", "--quick true here, false there",
                 "--repeats 5 here, 3 there",
                 "flags for every run: --num_gpus=4 here, --num_gpus=2 there",
                 "run its own command again to continue it (tfbench evaluate ...)"):
        assert part in text
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "evaluation.csv").write_text("x\n")
    with pytest.raises(errors.UsageError, match="not an evaluation directory"):
        ev.check_settings(str(tmp_path / "rows"), first)


def test_finished_runs_are_read_from_the_csv(tmp_path):
    out = str(tmp_path)
    rows, runs = os.path.join(out, "evaluation.csv"), os.path.join(out, "runs")
    write(rows, runs, result("resnet50", "native", "training"))
    write(rows, runs, result("resnet50", "native", "inference", unstable=True))
    write(rows, runs, result("resnet50", "mixed", "training", status="oom"))
    r = result("resnet50", "mixed", "inference", status="interrupted")
    write(rows, runs, r)
    assert ev.finished(out) == {"resnet50_native_training", "resnet50_native_inference",
                                "resnet50_mixed_training"}
    assert ev.finished(out, rerun_failed=True) == {"resnet50_native_training",
                                                   "resnet50_native_inference"}
    assert ev.finished(out, rerun_unstable=True) == {"resnet50_native_training",
                                                     "resnet50_mixed_training"}
    assert ev.finished(str(tmp_path / "none")) == set()


def test_the_preset_spells_out_the_method():
    from tfbench.cli import evaluate as cli
    path = os.path.join(ROOT, "flags", "evaluate", "gpu_evaluation.flags")
    args, evaluation, _ = cli.build(["--flagfile=" + path, "--out_dir=%s" % "unused"],
                                    gpus=(1, ""))
    assert evaluation.method == ev.Method()
    assert evaluation.sweep.config.base_flags == []
    with open(path) as handle:
        assert "tfbench evaluate --flagfile=flags/evaluate/gpu_evaluation.flags" in handle.read()
    assert json.dumps(ev.settings_record(evaluation.method, False, []))   # JSON-ready


def test_evaluate_gives_explain_scaling_to_training_runs_only():
    from tfbench.sweep import evaluation
    from tfbench.sweep.grid import point_flags
    base = ["--num_gpus=4", "--explain_scaling"]
    runs = {p.name: settings_of_flags(point_flags(base, p.flags))
            for p in evaluation.points(evaluation.Method(models=("resnet50",)), "fp16", base)}
    assert {n: r.measurement.explain_scaling for n, r in runs.items()} == {
        "resnet50_%s_%s" % (mode, kind): kind == "training"
        for mode in ("native", "mixed", "mixed_xla") for kind in ("training", "inference")}


def test_on_a_cpu_gpu_indices_do_not_make_training_several_devices():
    """The devices a training run uses are the ones its run resolves (config.params.
    requested_devices for both): on --device=cpu, --gpu_indices has no effect, one device
    trains, and the method leaves its strategy alone."""
    from tfbench.engine.resolved import resolve
    base = ["--device=cpu", "--gpu_indices=0,1", "--model=trivial"]
    points = {p.name: p for p in ev.points(ev.Method(models=("trivial",)), "bf16", base)}
    training = settings_of_flags(point_flags(base, points["trivial_native_training"].flags))
    assert resolve(training).device.num_devices == training.asks.devices == 1
    assert training.devices.variable_update == "parameter_server"   # not made replicated
