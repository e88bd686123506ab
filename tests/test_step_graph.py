"""tfbench.measure.step_graph: what a traced step does, on steps whose answers are known.

The steps are built in a fresh process on 2 logical CPU devices (tests/step_graph_checks.py).
"""

import pytest

from helpers import run_check_script


@pytest.fixture(scope="module")
def checks():
    return run_check_script("step_graph_checks.py")


def test_keras_sgd_writes_each_variable_with_a_multiply_and_a_subtract(checks):
    sgd = checks["sgd"]
    assert sgd["kernels"] == [["AssignSubVariableOp", "Mul"]]
    assert len(sgd["copies"]) == 4          # 2 Dense layers x (kernel, bias), one device


def test_keras_nesterov_momentum_takes_eight_kernels_per_variable(checks):
    # m = momentum*m - lr*g; v += momentum*m - lr*g (Keras 3 SGD, nesterov=True).
    kernels = checks["nesterov"]["kernels"]
    assert len(kernels) == 1 and len(kernels[0]) == 8


def test_a_fused_training_kernel_counts_one(checks):
    assert checks["fused"]["kernels"] == [["ResourceApplyGradientDescent"]]


def test_the_all_reduce_is_read_in_the_dtype_it_travels_in(checks):
    # 4x3 + 3 + 3x2 + 2 = 23 gradients, packed by MirroredStrategy into one collective.
    assert checks["mirrored_fp32"]["reductions"] == [["CollectiveReduceV2", "float32", 92]]
    assert checks["mirrored_fp16"]["reductions"] == [["CollectiveReduceV2", "float16", 46]]
    assert checks["mirrored_fp16"]["packs_per_device"] == 1


def test_each_replica_copy_is_one_variable_copy(checks):
    copies = checks["mirrored_fp32"]["copies"]
    assert len(copies) == 8
    assert {c.split("@")[1] for c in copies} == {"CPU:0", "CPU:1"}
    # Variables, the optimizer's iteration counter (int64) and learning rate (float32).
    assert checks["mirrored_fp32"]["bytes_per_device"] == {"CPU:0": 92 + 8 + 4,
                                                           "CPU:1": 92 + 8 + 4}


def test_variables_are_held_where_they_were_placed(checks):
    assert checks["placed"] == {"CPU:1": 92}


def test_xla_coverage_follows_jit_compile(checks):
    assert checks["sgd"]["xla"] == {"forward": "none", "backward": "none",
                                    "all-reduce": "-", "update": "none"}
    assert checks["sgd_xla"]["xla"] == {"forward": "all", "backward": "all",
                                        "all-reduce": "-", "update": "all"}


def test_short_device_keeps_type_and_index():
    from tfbench.measure.step_graph import short_device
    assert short_device("/job:localhost/replica:0/task:0/device:GPU:3") == "GPU:3"
    assert short_device("/cpu:0") == "CPU:0"
    assert short_device("") == ""
    assert short_device("/job:worker/task:1") == ""
