"""Every op of every step a GPU run builds has a GPU kernel for its types.

A GPU step that holds a CPU-only op cannot be placed next to its variables, and no CPU test
notices. The full `tensorflow` wheel registers its GPU kernels on any machine, so the steps are
traced here exactly as `--device=gpu` builds them (tests/support/gpu_kernel_checks.py) and each op
is looked up in the kernel registry. `tensorflow-cpu` registers none: there the test skips.

TFBENCH_GPU_KERNEL_MODELS=all traces every model variant (each registered model name and
dataset, channels-first and channels-last) instead of the representative ones, and checks that
the representative ones hold every (op, dtype) pair that all variants hold.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

from helpers import run_check_script

GPU_KERNELS_REGISTERED = any(
    k.device_type == "GPU"
    for k in kernels.get_registered_kernels_for_op("ResourceApplyGradientDescent").kernel)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not GPU_KERNELS_REGISTERED,
    reason="this TensorFlow registers no GPU kernels (tensorflow-cpu); the README's test command "
           "installs the full tensorflow wheel")]


@pytest.fixture(scope="module")
def checker():
    import gpu_kernel_checks
    return gpu_kernel_checks


def test_the_check_names_cpu_only_ops_and_unsupported_types(checker):
    var = tf.Variable(np.ones(3, np.float32))

    @tf.function(jit_compile=True)
    def compiled(x):
        # Compiled by XLA, whose kernels are not TensorFlow's: not looked up.
        tf.raw_ops.ResourceApplyProximalGradientDescent(
            var=var.handle, alpha=0.1, l1=0.0, l2=0.0, delta=x)
        return x

    @tf.function
    def nested(x):
        tf.raw_ops.ResourceApplyProximalGradientDescent(
            var=var.handle, alpha=0.1, l1=0.0, l2=0.0, delta=x * 2)   # a CPU kernel only
        return tf.matmul(tf.ones([2, 2], tf.int32), tf.ones([2, 2], tf.int32))  # no int32 GPU

    @tf.function
    def step(x):
        compiled(x)
        return tf.nn.relu(x), nested(x)

    graph = step.get_concrete_function(tf.TensorSpec([3], tf.float32)).graph.as_graph_def()
    assert checker.ops_without_gpu_kernel(graph) == [
        "MatMul(T=int32)", "ResourceApplyProximalGradientDescent"]


def test_every_variant_a_flag_combination_builds_is_traced_under_all(checker):
    from tfbench.models import catalog
    configs = checker.configurations("all")
    trained = {(flags["model"], flags["data_name"]) for flags in configs.values()
               if "data_name" in flags}
    assert trained == {(s.name, s.dataset) for s in catalog.all_specs()}
    assert configs["alexnet:cifar10/train/bf16/1gpu"]["data_name"] == "cifar10"
    assert configs["alexnet/train/fp16_dynamic/nhwc/1gpu"]["data_format"] == "NHWC"
    assert set(checker.REPRESENTATIVE) <= set(checker.variants())
    assert "alexnet:cifar10" in checker.REPRESENTATIVE   # LRN: another network than ImageNet's


@pytest.fixture(scope="module")
def traced():
    """The check script's result: the GPU steps traced once for the tests below."""
    models = os.environ.get("TFBENCH_GPU_KERNEL_MODELS", "")
    # The bound catches a hang, not a loaded machine (about 4 min on 2 quiet cores).
    return run_check_script("gpu_kernel_checks.py", *([models] if models else []),
                            timeout=7200 if models == "all" else 1800)


def test_every_op_of_every_gpu_step_has_a_gpu_kernel(traced):
    models = os.environ.get("TFBENCH_GPU_KERNEL_MODELS", "")
    got = traced
    missing = got["missing"]
    assert len(missing) >= 60   # every optimizer x precision x replicas, and the families
    assert {name: ops for name, ops in missing.items() if ops} == {}
    if models == "all":
        import gpu_kernel_checks as checker
        traced_in_ci = checker.configurations("")
        kinds = got["op_kinds"]
        every = set().union(*kinds.values())
        representative = set().union(*(kinds[name] for name in traced_in_ci))
        assert sorted(every - representative) == []


def test_the_numeric_checks_pass_under_op_determinism_has_gpu_kernels(traced):
    """--validate_devices' pass, traced under op determinism as the check runs it, in each
    training precision: TensorFlow builds another loss then (nn_ops.py: log-softmax and a
    gather instead of the fused sparse cross-entropy, whose GPU kernel is not deterministic),
    and every op of it has a GPU kernel."""
    import gpu_kernel_checks as checker
    assert {name: traced["missing"][name] for name in checker.NUMERIC} == {
        name: [] for name in checker.NUMERIC}
    for name in checker.NUMERIC:
        ops = {kind.split("(")[0] for kind in traced["numeric_op_kinds"][name]}
        assert "GatherV2" in ops and "LogSoftmax" in ops, name
        assert "SparseSoftmaxCrossEntropyWithLogits" not in ops, name
        assert not any(op.startswith("ResourceApply") for op in ops), name   # no update


# The one training kernel each --optimizer updates a variable with (tfbench.engine.update_kernels).
UPDATE_KERNEL = {"sgd": "ResourceApplyGradientDescent", "momentum": "ResourceApplyKerasMomentum",
                 "rmsprop": "ResourceApplyRMSProp", "adam": "ResourceApplyAdam"}


def _update_ops(flags: dict) -> str:
    """The ops that update one copy of a variable, after the gradient reduction (on one GPU,
    after the backward pass): its optimizer's one training kernel, and beside it only what the
    legacy script also runs per variable: the loss scale's division (after the all-reduce with
    dynamic loss scaling, which decides on the reduced gradients), clipping of the reduced
    gradient (Maximum, Minimum), the micro-batches' sum and mean."""
    ops = [UPDATE_KERNEL[flags.get("optimizer", "sgd")]]
    one_device = flags.get("num_gpus", 1) == 1
    if flags.get("use_fp16") and (flags.get("fp16_enable_auto_loss_scale") or one_device):
        ops.append("RealDiv")
    if flags.get("accum_steps", 1) > 1 and one_device:
        ops += ["AddV2", "RealDiv"]
    if flags.get("gradient_clip"):
        ops += ["Maximum", "Minimum"]
    return "+".join(sorted(ops))


def test_every_gpu_step_updates_each_variable_with_one_training_kernel(traced):
    """The legacy script launches one fused training kernel per variable; Keras' element-wise
    update launches 2 (plain SGD) to about a dozen (Adam). Every training step a GPU run builds
    (each optimizer, precision, loss scaling, accumulation, clipping, replica count and variable
    update) updates every copy of every trainable variable with exactly one kernel, its
    optimizer's (with the per-variable ops of _update_ops where the flags ask for them), as
    benchmarks/step_graph.py counts them (the kernels' GPU registrations:
    test_every_op_of_every_gpu_step_has_a_gpu_kernel)."""
    import gpu_kernel_checks as checker
    configs = checker.configurations(os.environ.get("TFBENCH_GPU_KERNEL_MODELS", ""))
    trained = {name for name, flags in configs.items() if not flags.get("forward_only")}
    updates = traced["update_kernels"]
    assert set(updates) == trained and len(trained) >= 50
    assert {"trivial/train/adam/replicated/2gpu", "trivial/train/momentum/fp16_dynamic/2gpu",
            "trivial/train/independent/2gpu"} <= trained
    wrong = {}
    for name in trained:
        got = updates[name]
        if got["kernels"] != {_update_ops(configs[name]): got["copies"]} or not got["copies"]:
            wrong[name] = got
    assert wrong == {}
