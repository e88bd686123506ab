"""Every registered model builds, gives float32 logits of the right shape and trains one step."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
import keras

from tfbench.measure import flops
from tfbench.errors import UsageError
from tfbench.config import datasets
from tfbench.models import catalog
from tfbench.models.layers import LocalResponseNorm

pytestmark = pytest.mark.slow

ALL_SPECS = catalog.all_specs()


def _id(spec) -> str:
    return "%s-%s" % (spec.name, spec.dataset)


def _test_size(spec) -> int:
    return max(spec.min_image_size, 32)


def _train_step(model, images, labels):
    """One plain GradientTape + SGD step; returns (logits, loss, gradients)."""
    optimizer = keras.optimizers.SGD(learning_rate=1e-6)
    with tf.GradientTape() as tape:
        logits = model(images, training=True)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    return logits, loss, grads


def _synthetic(size: int, batch: int = 2):
    # As the legacy synthetic images: unnormalised pixels around 127.
    images = tf.random.truncated_normal([batch, size, size, 3], mean=127, stddev=60, seed=1)
    return images, tf.constant([1, 3][:batch], tf.int32)


# Deeper or wider variants of a builder whose representative (in the comment) trains below:
# building one costs 10-110 s on 2 cores, so they are built (and trained a step) only with
# TFBENCH_FULL_MODEL_TESTS=1; tests/measure/test_model_table.py checks that each is registered, and
# its shipped parameters and FLOPs were computed by building it.
VARIANTS = {
    "resnet101", "resnet101_v2", "resnet152", "resnet152_v2",  # resnet50, resnet50_v2
    "official_resnet34", "official_resnet34_v2",  # official_resnet18(_v2)
    "official_resnet101", "official_resnet101_v2", "official_resnet152",  # official_resnet50(_v2)
    "official_resnet152_v2", "official_resnet200", "official_resnet200_v2",
    "densenet100_k12", "densenet100_k24",  # densenet40_k12
    "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4",  # efficientnet_b0
    "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
    "efficientnet_v2_m", "efficientnet_v2_l",  # efficientnet_v2_s
    "densenet169", "densenet201",  # densenet121
    "convnext_small", "convnext_base",  # convnext_tiny
    "nasnetlarge",  # nasnet
    "vgg16", "vgg19",  # vgg11
    "resnet32", "resnet44", "resnet56", "resnet110",  # resnet20
    "resnet32_v2", "resnet44_v2", "resnet56_v2", "resnet110_v2",  # resnet20_v2
}
# Builders of their own whose step costs 5-20 s on 2 cores: the GPU-kernel check traces their
# families' op kinds in CI (inception3, efficientnet_b0, mobilenet_v3_large), and the shipped
# model table was computed by building each; they train a step with TFBENCH_FULL_MODEL_TESTS=1.
COSTLY = {"nasnet", "inception_resnet_v2", "inception4", "xception", "densenet121",
          "efficientnet_v2_s"}
FULL = os.environ.get("TFBENCH_FULL_MODEL_TESTS") == "1"


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_id)
def test_builds_and_trains_one_step(spec):
    if spec.name in VARIANTS and not FULL:
        pytest.skip("a variant of its builder's representative: TFBENCH_FULL_MODEL_TESTS=1")
    if spec.name in COSTLY and not FULL:
        pytest.skip("a costly builder, traced by the GPU-kernel check: TFBENCH_FULL_MODEL_TESTS=1")
    size = _test_size(spec)
    model = spec.build(size, "NHWC")
    assert tuple(model.inputs[0].shape) == (None, size, size, 3)
    images, labels = _synthetic(size)
    logits, loss, grads = _train_step(model, images, labels)
    assert np.isfinite(float(loss))
    assert all(g is not None for g in grads)
    assert all(bool(tf.reduce_all(tf.math.is_finite(g))) for g in grads)
    assert logits.shape == (2, datasets.NUM_CLASSES[spec.dataset])
    assert logits.dtype == tf.float32


def test_forward_only_names_are_registered():
    assert VARIANTS | COSTLY <= {s.name for s in ALL_SPECS}


def test_registry_has_every_required_name():
    imagenet = {"trivial", "lenet", "alexnet", "overfeat", "vgg11", "vgg16", "vgg19", "googlenet",
                "inception3", "inception4", "resnet50", "resnet50_v1.5", "resnet50_v2",
                "resnet101", "resnet101_v2", "resnet152", "resnet152_v2", "mobilenet", "nasnet",
                "nasnetlarge", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small",
                "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l", "densenet121",
                "densenet169", "densenet201", "xception", "inception_resnet_v2", "convnext_tiny",
                "convnext_small", "convnext_base", "vit_tiny"}
    imagenet |= {"efficientnet_b%d" % i for i in range(8)}
    imagenet |= {"official_resnet%d%s" % (d, v) for d in (18, 34, 50, 101, 152, 200)
                 for v in ("", "_v2")}
    cifar10 = {"trivial", "alexnet", "densenet40_k12", "densenet100_k12", "densenet100_k24"}
    cifar10 |= {"resnet%d%s" % (d, v) for d in (20, 32, 44, 56, 110) for v in ("", "_v2")}
    have = {(s.name, s.dataset) for s in ALL_SPECS}
    missing = ({(n, "imagenet") for n in imagenet} | {(n, "cifar10") for n in cifar10}) - have
    assert not missing


# name, dataset, image size, batch, learning rate, schedule, header name: tf_cnn_benchmarks §3.
LEGACY_DEFAULTS = [
    ("lenet", "imagenet", 28, 32, 0.005, "constant", "lenet5"),
    ("alexnet", "imagenet", 227, 512, 0.005, "constant", "alexnet"),
    ("alexnet", "cifar10", 32, 128, 0.1, "alexnet_cifar", "alexnet"),
    ("overfeat", "imagenet", 231, 32, 0.005, "constant", "overfeat"),
    ("vgg16", "imagenet", 224, 64, 0.005, "constant", "vgg16"),
    ("googlenet", "imagenet", 224, 32, 0.005, "constant", "googlenet"),
    ("inception3", "imagenet", 299, 32, 0.005, "constant", "inception3"),
    ("inception4", "imagenet", 299, 32, 0.005, "constant", "inception4"),
    ("resnet50", "imagenet", 224, 64, 0.128, "resnet", "resnet50"),
    ("resnet50_v1.5", "imagenet", 224, 64, 0.128, "resnet", "resnet50_v1.5"),
    ("resnet101", "imagenet", 224, 32, 0.128, "resnet", "resnet101"),
    ("resnet152_v2", "imagenet", 224, 32, 0.128, "resnet", "resnet152_v2"),
    ("resnet56", "cifar10", 32, 128, 0.1, "cifar_resnet", "resnet56"),
    ("official_resnet50", "imagenet", 224, 128, 0.05, "official_resnet", "official_resnet_50_v1"),
    ("official_resnet18_v2", "imagenet", 224, 32, 0.0125, "official_resnet",
     "official_resnet_18_v2"),
    ("densenet40_k12", "cifar10", 32, 64, 0.1, "densenet_cifar", "densenet40_k12"),
    ("mobilenet", "imagenet", 224, 32, 0.005, "constant", "mobilenet"),
    ("nasnet", "imagenet", 224, 32, 0.005, "constant", "nasnet"),
    ("nasnetlarge", "imagenet", 331, 16, 0.005, "constant", "nasnet"),
]


@pytest.mark.parametrize("name,dataset,size,batch,lr,schedule,header", LEGACY_DEFAULTS)
def test_legacy_defaults(name, dataset, size, batch, lr, schedule, header):
    spec = catalog.get(name, dataset)
    assert (spec.image_size, spec.batch_size, spec.lr_schedule, spec.header_name) == (
        size, batch, schedule, header)
    assert spec.learning_rate == pytest.approx(lr)


def test_too_small_image_size_is_a_usage_error():
    with pytest.raises(UsageError, match="alexnet.*at least 67"):
        catalog.get("alexnet").build(64)


# One model per builder: NCHW must build the same network (same parameters and FLOPs), with an
# NHWC input, and run. TensorFlow's own CPU kernels take channels-first convolutions only with
# oneDNN, which is off by default on CPUs without AVX-512 (an AVX2-only AMD EPYC here), so the
# forward pass runs through XLA, whose CPU backend compiles either layout on any CPU.
NCHW_CASES = [("alexnet", "cifar10"), ("googlenet", "imagenet"), ("resnet20_v2", "cifar10"),
              ("official_resnet18_v2", "imagenet"), ("densenet40_k12", "cifar10"),
              ("mobilenet_v3_small", "imagenet"), ("vit_tiny", "imagenet"),
              ("convnext_tiny", "imagenet")]
# The XLA-compiled forward pass costs 5-10 s for the deeper ones: it runs for these in CI and
# for all with TFBENCH_FULL_MODEL_TESTS=1 (the others' same parameters and FLOPs are checked in
# CI; the GPU-kernel check traces the channels-first training steps of ConvNeXt and ViT).
NCHW_RUN_IN_CI = {"alexnet", "resnet20_v2", "official_resnet18_v2"}


@pytest.mark.parametrize("name,dataset", NCHW_CASES)
def test_nchw_builds_the_same_network(name, dataset):
    spec = catalog.get(name, dataset)
    size = _test_size(spec)
    nhwc, nchw = spec.build(size, "NHWC"), spec.build(size, "NCHW")
    assert tuple(nchw.inputs[0].shape) == (None, size, size, 3)
    assert flops.count_params(nchw) == flops.count_params(nhwc)
    assert flops.forward_flops(nchw, size) == flops.forward_flops(nhwc, size)
    has_transpose = any(layer.name == "to_nchw" for layer in nchw.layers)
    assert has_transpose == spec.channels_first
    if name not in NCHW_RUN_IN_CI and not FULL:
        return
    out = tf.function(lambda x: nchw(x, training=False), jit_compile=True)(_synthetic(size)[0])
    assert out.shape == (2, datasets.NUM_CLASSES[dataset]) and out.dtype == tf.float32


@pytest.fixture
def mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("name,dataset", [("resnet20", "cifar10"), ("efficientnet_b0", "imagenet"),
                                          ("vit_tiny", "imagenet")])
def test_logits_are_float32_under_mixed_precision(mixed_float16, name, dataset):
    spec = catalog.get(name, dataset)
    model = spec.build(32)
    assert any(layer.compute_dtype == "float16" for layer in model.layers)
    logits = model(_synthetic(32)[0], training=False)
    assert logits.dtype == tf.float32
    assert bool(tf.reduce_all(tf.math.is_finite(logits)))


@pytest.mark.parametrize("policy,dtype", [("mixed_float16", tf.float16),
                                          ("mixed_bfloat16", tf.bfloat16)])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_lrn_computes_in_float32_under_mixed_precision(policy, dtype, data_format):
    # LRN and LRNGrad have GPU kernels for float32 only and no bfloat16 kernel on any device:
    # in float16 a GPU step ran them on the host, in bfloat16 it could not run at all.
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = LocalResponseNorm(4, 1.0, 0.001 / 9.0, 0.75, data_format)
        x = tf.cast(tf.random.stateless_normal([2, 4, 5, 5], seed=[1, 2]) * 3.0, dtype)

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x)
                loss = tf.reduce_sum(tf.cast(y, tf.float32))
            return y, tape.gradient(loss, x)
        y, grad = step(x)
        ops = step.get_concrete_function(x).graph.get_operations()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    lrn_types = sorted((op.type, op.get_attr("T").name) for op in ops
                       if op.type in ("LRN", "LRNGrad"))
    assert lrn_types == [("LRN", "float32"), ("LRNGrad", "float32")]
    assert y.dtype == dtype and grad.dtype == dtype
    perm = ([0, 2, 3, 1], [0, 3, 1, 2]) if data_format == "NCHW" else None
    x32 = tf.cast(x, tf.float32)
    expected = tf.nn.local_response_normalization(
        tf.transpose(x32, perm[0]) if perm else x32, 4, 1.0, 0.001 / 9.0, 0.75)
    expected = tf.transpose(expected, perm[1]) if perm else expected
    np.testing.assert_allclose(tf.cast(y, tf.float32), expected, rtol=1e-2, atol=1e-2)
