"""Params: construction from the flag table and legacy validation rules."""

import dataclasses
import os

import pytest

from tfbench.config import flagdefs
from tfbench.config import params as params_lib
from tfbench.errors import UsageError
from tfbench.config.params import make_params, parse_piecewise
from tfbench.config.settings import make_settings


def test_every_flag_is_a_field_with_its_default():
    p = make_params({})
    for spec in flagdefs.ALL_FLAGS:
        default = tuple(spec.default) if isinstance(spec.default, list) else spec.default
        assert getattr(p, spec.name) == default, spec.name
    assert p.explicit == frozenset()


def test_params_are_frozen_and_replace_works():
    p = make_params({"model": "resnet50"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.model = "vgg16"
    assert p.replace(model="vgg16").model == "vgg16"
    assert p.is_explicit("model") and not p.is_explicit("batch_size")


@pytest.mark.parametrize("values, message", [
    ({"num_batches": 10, "num_epochs": 1.0}, "At most one of --num_batches and --num_epochs"),
    ({"forward_only": True, "eval": True}, "--forward_only and --eval"),
    ({"eval": True}, "Trained model directory not specified"),
    ({"batch_size": 0}, "--batch_size must be a positive integer"),
    ({"batch_size": -4}, "--batch_size must be a positive integer"),
    ({"num_batches": 0}, "--num_batches must be a positive integer"),
    ({"num_gpus": 0}, "--num_gpus must be a positive integer"),
    ({"piecewise_learning_rate_schedule": "1;3"}, "odd number of parts"),
    ({"piecewise_learning_rate_schedule": "1;x;0.1"}, "whole numbers"),
    ({"piecewise_learning_rate_schedule": "1;3;0.1", "init_learning_rate": 0.1},
     "cannot be combined with --init_learning_rate"),
    ({"num_epochs_per_decay": 2.0}, "--init_learning_rate, --num_epochs_per_decay"),
    ({"minimum_learning_rate": 0.1, "init_learning_rate": 1.0}, "must all be set"),
    ({"eval_during_training_every_n_steps": 2, "eval_during_training_every_n_epochs": 1.0},
     "At most one of"),
    ({"eval_during_training_every_n_steps": 2, "forward_only": True},
     "cannot be used with --eval or --forward_only"),
    ({"stop_at_top_1_accuracy": 0.5}, "needs one of the --eval_during_training_*"),
    ({"display_perf_ewma": 1.5}, "must be <= 1"),
    ({"use_fp16": True, "precision": "bf16"}, "give only one"),
    ({"device": "cpu", "data_format": "NCHW"}, "NCHW is not supported on CPU"),
    ({"resize_method": "crop"}, "--resize_method=crop is not one of"),
    ({"save_model_steps": 2, "save_model_secs": 5}, "--save_model_steps and --save_model_secs"),
])
def test_rejected_combinations(values, message):
    with pytest.raises(UsageError, match=message.replace("*", r"\*").replace("(", r"\(")):
        make_params(values)


def test_unknown_parameter():
    with pytest.raises(UsageError, match="unknown parameter"):
        make_params({"no_such_flag": 1})


def test_parse_piecewise():
    assert parse_piecewise("1;3;.1;5;.01") == ([1.0, 0.1, 0.01], [3, 5])
    with pytest.raises(UsageError, match="epochs must increase"):
        parse_piecewise("1;5;.1;3;.01")


@pytest.mark.parametrize("threshold, warmup", [(None, 10), (1, 10), (2, 20), (3, 45)])
def test_autotune_threshold_raises_the_default_warm_up_as_legacy(threshold, warmup):
    # benchmark_cnn.py: max(10, 5 * t^2), t = --autotune_threshold or 1.
    assert params_lib.num_warmup_batches(make_params({"autotune_threshold": threshold})) == warmup
    assert params_lib.num_warmup_batches(
        make_params({"autotune_threshold": threshold, "num_warmup_batches": 2})) == 2


def test_autotune_threshold_is_a_working_flag(monkeypatch):
    from tfbench.distribute import devices
    p = make_settings({"autotune_threshold": 3})
    assert flagdefs.graph_only_overrides(p.flag_values()) == []   # no "has no effect" notice
    monkeypatch.setattr(os, "environ", dict(os.environ))   # the GPU variables stay here
    monkeypatch.delenv("TF_AUTOTUNE_THRESHOLD", raising=False)
    devices.set_environment(p, "gpu")
    # TensorFlow's cuDNN autotuner (kernels/gpu_utils.h AutotuneMap) reads it, as in legacy.
    assert os.environ["TF_AUTOTUNE_THRESHOLD"] == "3"


def test_flags_defaults_and_bounds():
    p = make_params({})
    assert (p.estimate_dataset_size, p.estimate_epochs, p.estimate_utilization) == (0, 1.0, 0.7)
    assert flagdefs.BY_NAME["estimate_utilization"].role == flagdefs.TFBENCH
    with pytest.raises(UsageError, match="estimate_utilization"):
        make_params({"estimate_utilization": 1.2})
    with pytest.raises(UsageError, match="estimate_dataset_size"):
        make_params({"estimate_dataset_size": -5})


def test_repeat_and_monitor_flags():
    p = make_params({})
    assert (p.num_runs, p.cooldown_secs, p.unstable_threshold_pct) == (1, 0.0, 10.0)
    assert p.monitor_interval_ms == 250
    with pytest.raises(UsageError, match="num_runs"):
        make_params({"num_runs": 0})
    with pytest.raises(UsageError, match="cooldown_secs"):
        make_params({"cooldown_secs": -1.0})


# --- what a run asks for: the rules engine.resolved.resolve and a study's failure row share ---

@pytest.mark.parametrize("values, mode", [
    ({}, "training"),
    ({"forward_only": True}, "forward_only"),
    ({"eval": True, "train_dir": "/ckpt"}, "eval"),
    ({"data_only": True, "data_dir": "/data"}, "data_only"),
    ({"data_only": True, "forward_only": True, "data_dir": "/data"}, "data_only"),
])
def test_run_mode(values, mode):
    assert params_lib.run_mode(make_params(values)) == mode


@pytest.mark.parametrize("values, micro", [
    ({"accum_steps": 3}, 3),
    ({"accum_steps": 3, "forward_only": True}, 1),
    ({"accum_steps": 3, "eval": True, "train_dir": "/ckpt"}, 1),
    ({"accum_steps": 3, "data_only": True, "data_dir": "/data"}, 1),
    ({}, 1),
])
def test_micro_batches_are_accumulated_in_training_only(values, micro):
    assert params_lib.accum_steps(make_params(values)) == micro


@pytest.mark.parametrize("values, devices", [
    ({}, 1),
    ({"num_gpus": 4}, 4),
    ({"gpu_indices": "0,1,2"}, 3),                      # --num_gpus left at its default
    ({"gpu_indices": "5, 7", "num_gpus": 2}, 2),
    ({"device": "cpu", "num_gpus": 2, "gpu_indices": "1"}, 2),   # ignored on the CPU
    ({"device": "CPU", "gpu_indices": "x"}, 1),
])
def test_requested_devices(values, devices):
    assert params_lib.requested_devices(make_params(values)) == devices


@pytest.mark.parametrize("values, message", [
    ({"gpu_indices": "0,1", "num_gpus": 3}, "--gpu_indices names 2 GPUs but --num_gpus=3"),
    ({"gpu_indices": "0,a"}, "--gpu_indices='0,a' must be comma-separated integers"),
    ({"gpu_indices": "1,1"}, "--gpu_indices='1,1' must name distinct GPUs by index (0, 1, ...)"),
    ({"gpu_indices": ","}, "--gpu_indices=',' must name distinct GPUs by index (0, 1, ...)"),
    ({"gpu_indices": "-1"}, "--gpu_indices='-1' must name distinct GPUs by index (0, 1, ...)"),
])
def test_requested_devices_refuses_indices_it_cannot_count(values, message):
    with pytest.raises(UsageError) as exc:
        params_lib.requested_devices(make_params(values))
    assert str(exc.value) == message


def test_gpu_indices():
    assert params_lib.gpu_indices(make_params({})) == []
    assert params_lib.gpu_indices(make_params({"gpu_indices": "3, 1,"})) == [3, 1]


def test_cpu_requested():
    assert params_lib.cpu_requested(make_params({"device": "CPU"}))
    assert not params_lib.cpu_requested(make_params({}))


def test_global_batch_and_its_inverse():
    # --batch_size=4 --accum_steps=3 --num_gpus=2 on 2 workers: 4 x 3 x 2 x 2.
    assert params_lib.global_batch(4, 3, 2, 2) == 48
    assert params_lib.per_device_for_global(48, 3, 2, 2) == 4
    assert params_lib.per_device_for_global(256, 1, 2, 1) == 128
    with pytest.raises(UsageError) as exc:
        params_lib.per_device_for_global(50, 3, 2, 2)
    assert str(exc.value) == ("global batch 50 is not divisible by 12 (3 micro-batch(es) x 2 "
                              "device(s) x 2 worker(s))")
