"""Params: construction from the flag table and legacy validation rules."""

import dataclasses
import os

import pytest

from tfbench.config import flagdefs
from tfbench.config import params as params_lib
from tfbench.errors import UsageError
from tfbench.config.params import make_params, num_batches_and_epochs, parse_piecewise


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


def test_num_batches_and_epochs_legacy_cases():
    # From the legacy tests: defaults, explicit batches, and epochs rounding up.
    assert num_batches_and_epochs(make_params({}), 25, 50) == (100, 50.0)
    assert num_batches_and_epochs(make_params({"num_batches": 21}), 25, 50) == (21, 10.5)
    batches, epochs = num_batches_and_epochs(make_params({"num_epochs": 3.0}), 2, 3)
    assert (batches, epochs) == (5, pytest.approx(10 / 3))
    assert num_batches_and_epochs(make_params({"num_epochs": 4.0}), 2, 3) == (6, 4.0)


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
    p = make_params({"autotune_threshold": 3})
    assert flagdefs.graph_only_overrides(p) == []   # no "has no effect" notice
    monkeypatch.setattr(os, "environ", dict(os.environ))   # the GPU variables stay here
    monkeypatch.delenv("TF_AUTOTUNE_THRESHOLD", raising=False)
    devices.set_environment(p, "gpu")
    # TensorFlow's cuDNN autotuner (kernels/gpu_utils.h AutotuneMap) reads it, as in legacy.
    assert os.environ["TF_AUTOTUNE_THRESHOLD"] == "3"


def test_flags_defaults_and_bounds():
    p = make_params({})
    assert (p.estimate_dataset_size, p.estimate_epochs, p.estimate_utilization) == (0, 1.0, 0.7)
    assert flagdefs.BY_NAME["estimate_utilization"].role == "T"
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
