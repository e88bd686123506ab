"""Settings: the flags grouped by concern, and what a run asks for decided once from them."""

import dataclasses

import pytest

from tfbench.config import flagdefs, settings, settings_groups
from tfbench.config.settings import make_settings
from tfbench.errors import UsageError


def test_every_flag_has_one_concern_and_every_concern_a_group():
    named = [n for _, names in flagdefs.CONCERNS.values() for n in names]
    assert sorted(named) == sorted(f.name for f in flagdefs.ALL_FLAGS)
    assert list(settings_groups.GROUPS) == list(flagdefs.CONCERNS)
    for concern, cls in settings_groups.GROUPS.items():
        assert [f.name for f in dataclasses.fields(cls)] == list(flagdefs.CONCERNS[concern][1])


def test_each_flag_is_read_from_its_group():
    s = make_settings({"batch_size": 7, "variable_update": "replicated", "data_dir": "/d",
                       "model": "vgg16", "optimizer": "adam", "precision": "bf16",
                       "csv_file": "r.csv", "worker_hosts": "a:1,b:2", "task_index": 1,
                       "xla": True, "monitor_interval_ms": 50, "num_runs": 3})
    assert s.schedule.batch_size == 7 and s.schedule.num_runs == 3
    assert s.devices.variable_update == "replicated"
    assert s.data.data_dir == "/d"
    assert s.workload.model == "vgg16"
    assert s.learning.optimizer == "adam"
    assert s.numerics.precision == "bf16"
    assert s.outputs.csv_file == "r.csv"
    assert (s.cluster.worker_hosts, s.cluster.task_index) == ("a:1,b:2", 1)
    assert s.runtime.xla is True
    assert s.measurement.monitor_interval_ms == 50
    # Untouched flags keep their defaults; a list flag is a tuple, as frozen settings must be.
    assert s.schedule.num_warmup_batches is None and s.data.data_name is None
    assert s.measurement.validate_device_checks == ("step", "kernels", "numeric")


def test_no_flag_is_read_flat():
    s = make_settings({})
    for spec in flagdefs.ALL_FLAGS:
        assert not hasattr(s, spec.name), spec.name
    with pytest.raises(AttributeError):
        s.batch_size  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.schedule.batch_size = 1


@pytest.mark.parametrize("values, mode, micro", [
    ({}, "training", 1),
    ({"accum_steps": 4}, "training", 4),
    ({"accum_steps": 4, "forward_only": True}, "forward_only", 1),
    ({"accum_steps": 4, "eval": True, "train_dir": "/c"}, "eval", 1),
    ({"data_only": True, "data_dir": "/d", "eval": True, "train_dir": "/c"}, "data_only", 1),
])
def test_the_mode_and_micro_batches_are_asked_once(values, mode, micro):
    asks = make_settings(values).asks
    assert (asks.run_mode, asks.accum_steps) == (mode, micro)


@pytest.mark.parametrize("values, precision, xla", [
    ({}, "fp32", False), ({"use_fp16": True}, "fp16", False),
    ({"precision": "bf16"}, "bf16", False), ({"xla_compile": True}, "fp32", True),
    ({"use_fp16": True, "precision": "fp16", "xla": True}, "fp16", True),
])
def test_precision_and_xla_are_asked_once(values, precision, xla):
    asks = make_settings(values).asks
    assert (asks.precision, asks.xla) == (precision, xla)


@pytest.mark.parametrize("values, warmup", [
    ({}, 10), ({"num_warmup_batches": 0}, 0), ({"num_warmup_batches": 3}, 3),
    ({"autotune_threshold": 2}, 20), ({"autotune_threshold": 3}, 45),
    ({"autotune_threshold": 3, "num_warmup_batches": 4}, 4),
])
def test_warm_up_batches_follow_the_legacy_default(values, warmup):
    # The legacy default is max(10, 5 x t^2) for --autotune_threshold=t.
    assert make_settings(values).asks.warmup_batches == warmup


@pytest.mark.parametrize("values, devices, cpu, served", [
    ({}, 1, False, False),
    ({"gpu_indices": "0,2,5"}, 3, False, False),
    ({"device": "CPU", "num_gpus": 4, "gpu_indices": "x"}, 4, True, False),
    ({"saved_model": True, "forward_only": True}, 1, False, True),
    ({"trt_mode": "FP16", "forward_only": True}, 1, False, True),
])
def test_devices_and_serving_are_asked_once(values, devices, cpu, served):
    asks = make_settings(values).asks
    assert (asks.devices, asks.cpu, asks.served) == (devices, cpu, served)


def test_indices_it_cannot_count_are_refused_when_the_devices_are_asked():
    s = make_settings({"gpu_indices": "0,1", "num_gpus": 3, "batch_size": 8})
    assert s.schedule.batch_size == 8       # the rest of the flags still read (a failure row)
    for _ in range(2):                      # every time it is asked, not once
        with pytest.raises(UsageError) as exc:
            s.asks.devices
        assert str(exc.value) == "--gpu_indices names 2 GPUs but --num_gpus=3"
    assert make_settings({"gpu_indices": "3, 1,"}).asks.gpu_indices == (3, 1)
    assert make_settings({"gpu_indices": "3, 1,", "device": "cpu"}).asks.gpu_indices == ()


def test_with_flags_decides_again():
    s = make_settings({"accum_steps": 2, "batch_size": 8})
    inference = s.with_flags(forward_only=True)
    assert (inference.asks.run_mode, inference.asks.accum_steps) == ("forward_only", 1)
    assert inference.schedule.batch_size == 8
    assert inference.explicit == s.explicit        # what the user typed does not change
    assert (s.asks.run_mode, s.asks.accum_steps) == ("training", 2)


def test_flag_values_name_every_flag():
    values = make_settings({"batch_size": 5}).flag_values()
    assert list(values) == [f.name for f in flagdefs.ALL_FLAGS]
    assert values["batch_size"] == 5 and values["model"] == "trivial"


@pytest.mark.parametrize("values, batch", [
    ({"batch_size": 32}, 32),
    ({}, 64),                                                  # the model's batch
    ({"batch_size": 32, "eval_batch_size": 8}, 32),            # training times batch_size
    ({"batch_size": 32, "eval_batch_size": 8, "eval": True, "train_dir": "/c"}, 8),
    ({"batch_size": 32, "eval": True, "train_dir": "/c"}, 32),
    ({"eval": True, "train_dir": "/c"}, 64),
])
def test_timed_batch_is_the_eval_batch_in_eval_mode(values, batch):
    assert settings.timed_batch(make_settings(values), 64) == batch


def test_num_batches_and_epochs_legacy_cases():
    # From the legacy tests: defaults, explicit batches, and epochs rounding up.
    batches_and_epochs = settings.num_batches_and_epochs
    assert batches_and_epochs(make_settings({}), 25, 50) == (100, 50.0)
    assert batches_and_epochs(make_settings({"num_batches": 21}), 25, 50) == (21, 10.5)
    batches, epochs = batches_and_epochs(make_settings({"num_epochs": 3.0}), 2, 3)
    assert (batches, epochs) == (5, pytest.approx(10 / 3))
    assert batches_and_epochs(make_settings({"num_epochs": 4.0}), 2, 3) == (6, 4.0)


@pytest.mark.parametrize("values, scaling", [
    ({}, ("none", 1.0)),
    ({"use_fp16": True}, ("static", 128.0)),
    ({"use_fp16": True, "fp16_loss_scale": 64.0}, ("static", 64.0)),
    ({"use_fp16": True, "fp16_enable_auto_loss_scale": True}, ("dynamic", 32768.0)),
    ({"precision": "bf16", "fp16_enable_auto_loss_scale": True}, ("none", 1.0)),
])
def test_loss_scaling(values, scaling):
    s = make_settings(values)
    assert settings.loss_scaling(s, s.asks.precision) == scaling
