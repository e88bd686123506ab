"""Learning-rate schedules: step-exact values from the legacy script's own tests (spec §8)."""

import pytest

from tfbench.engine import lr
from tfbench.config.datasets import IMAGENET, NUM_TRAIN_EXAMPLES
from tfbench.models.registry import ModelSpec
from tfbench.config.settings import make_settings

RESNET = ModelSpec("resnet_like", IMAGENET, lambda *a: None, 224, 64, 0.128, "resnet",
                   lr_schedule="resnet")
TRIVIAL = ModelSpec("trivial_like", IMAGENET, lambda *a: None, 227, 32, 0.005, "trivial")
N = 1281167


def values(flag_values, spec, batch, steps, num_examples=None):
    plan, _ = lr.schedule_for(make_settings(flag_values), spec, batch,
                              num_examples or NUM_TRAIN_EXAMPLES[spec.dataset])
    schedule = lr.KerasSchedule(plan)
    return [float(schedule(s)) for s in steps]


def test_resnet_default_schedule():
    got = values({}, RESNET, 256, [0, 150136, 150137, 300274, 10 ** 7])
    assert got == pytest.approx([0.0, 0.128, 0.0128, 0.00128, 1.28e-5], rel=1e-5)


def test_resnet_base_lr_flag():
    got = values({"resnet_base_lr": 0.256}, RESNET, 256, [150136])
    assert got == pytest.approx([0.256])


def test_init_lr_with_warmup():
    got = values({"init_learning_rate": 1.0, "num_learning_rate_warmup_epochs": 5}, TRIVIAL,
                 256, [12511, 25022])
    assert got == pytest.approx([0.5, 1.0], rel=1e-4)


def test_staircase_decay_with_floor():
    got = values({"init_learning_rate": 1.0, "num_epochs_per_decay": 2,
                  "learning_rate_decay_factor": 0.5, "minimum_learning_rate": 0.375},
                 TRIVIAL, 32, [80071, 80072, 160144])
    assert got == pytest.approx([1.0, 0.5, 0.375])


def test_piecewise_schedule():
    got = values({"piecewise_learning_rate_schedule": "1;3;.1;5;.01"}, TRIVIAL, 32,
                 [120108, 120109, 200181, 200182])
    assert got == pytest.approx([1.0, 0.1, 0.1, 0.01])


def test_model_default_constant():
    assert values({}, TRIVIAL, 32, [0, 10 ** 6]) == pytest.approx([0.005, 0.005])


def test_cifar_resnet_schedule():
    spec = ModelSpec("r20", "cifar10", lambda *a: None, 32, 128, 0.1, "resnet",
                     lr_schedule="cifar_resnet")
    per_epoch = 50000 // 128
    got = values({}, spec, 128, [per_epoch * 82, per_epoch * 82 + 1, per_epoch * 300 + 1])
    assert got == pytest.approx([0.1, 0.01, 0.0002])


def test_warmup_without_init_lr_gives_notice():
    plan, notices = lr.schedule_for(make_settings({"num_learning_rate_warmup_epochs": 2}), TRIVIAL,
                                    32, N)
    assert plan.warmup_steps == 0
    assert notices and "no effect" in notices[0]


def test_schedule_serialises():
    plan, _ = lr.schedule_for(make_settings({}), RESNET, 256, N)
    restored = lr.KerasSchedule.from_config(lr.KerasSchedule(plan).get_config())
    assert restored.schedule == plan


def test_densenet_cifar_schedule():
    spec = ModelSpec("dn", "cifar10", lambda *a: None, 32, 64, 0.1, "densenet",
                     lr_schedule="densenet_cifar")
    per_epoch = 50000 // 64
    got = values({}, spec, 64, [0, per_epoch * 150, per_epoch * 150 + 1, per_epoch * 300 + 1])
    assert got == pytest.approx([0.1, 0.1, 0.01, 0.0001])


def test_model_default_epochs_are_the_datas_epochs():
    # A folder of 2,560 images at batch 256: 10 steps an epoch, so resnet warms up over 50
    # steps and decays after 300 (the legacy constant 1,281,167 is imagenet's epoch).
    got = values({}, RESNET, 256, [25, 50, 300, 301], num_examples=2560)
    assert got == pytest.approx([0.064, 0.128, 0.128, 0.0128], rel=1e-5)
    cifar = ModelSpec("r20", "cifar10", lambda *a: None, 32, 128, 0.1, "resnet",
                      lr_schedule="cifar_resnet")
    assert values({}, cifar, 128, [82 * 10, 82 * 10 + 1], num_examples=1280) == \
        pytest.approx([0.1, 0.01])
