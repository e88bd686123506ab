"""benchmarks/step_graph.py: what a traced step does, on steps whose answers are known.

The steps are built in a fresh process on 2 logical CPU devices
(tests/support/step_graph_checks.py).
"""

import pytest

from helpers import run_check_script

pytestmark = pytest.mark.slow


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
    from step_graph import short_device
    assert short_device("/job:localhost/replica:0/task:0/device:GPU:3") == "GPU:3"
    assert short_device("/cpu:0") == "CPU:0"
    assert short_device("") == ""
    assert short_device("/job:worker/task:1") == ""


def test_an_all_reduce_waits_only_for_the_gradients_it_carries(checks):
    # v1's gradient is all-reduced first and does not wait for v0's, the backward pass's last;
    # v0's all-reduce follows v1's (TensorFlow runs a replica's collectives one after another,
    # ordered by a token), so it waits for both.
    assert checks["overlap"] == [[False, 1, 2], [True, 2, 2]]


def test_a_control_dependency_makes_an_all_reduce_wait(checks):
    assert checks["overlap_control"] == [[True, 2, 2], [True, 2, 2]]


def test_gradients_of_one_compiled_function_exist_only_together(checks):
    # An XLA cluster's outputs all appear when it ends: v1's all-reduce waits for v0's gradient.
    assert checks["overlap_compiled"] == [[True, 2, 2], [True, 2, 2]]


def test_tf2xla_drops_a_control_edge_into_an_xla_all_reduce():
    """What the audit assumes inside XLA: tf2xla builds each op from its data edges alone
    (graph_compiler.cc skips control edges), so the HLO all-reduce depends on its operand only,
    not on what it was made to wait for (TF 2.17 names the dot's result differently: the test
    walks HLO's own operands)."""
    import re

    import tensorflow as tf

    @tf.function(jit_compile=True, autograph=False)
    def f(x, y):
        pack = tf.matmul(x, x)
        last = tf.sin(y) * 3.0
        with tf.control_dependencies([last]):
            reduced = tf.raw_ops.CollectiveReduceV2(
                input=pack, group_size=1, group_key=1, instance_key=1, ordering_token=[],
                merge_op="Add", final_op="Id")
        return reduced, last

    hlo = f.experimental_get_compiler_ir(tf.ones([4, 4]), tf.ones([4, 4]))(stage="hlo")
    assert "control-predecessors" not in hlo
    # HLO's own ancestry: each instruction's opcode and operands (`%name = type op(%a, %b)`).
    ops, operands = {}, {}
    for line in hlo.splitlines():
        found = re.match(r"\s*(?:ROOT )?%(\S+) = .*? ([a-z][a-z0-9-]*)\((.*?)\)", line)
        if found:
            name, op, args = found.groups()
            ops[name], operands[name] = op, re.findall(r"%([\w.\-]+)", args)
    (reduce,) = [name for name, op in ops.items() if op == "all-reduce"]
    seen, pending = set(), list(operands[reduce])
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending += operands.get(name, [])
    assert "dot" in {ops[n] for n in seen if n in ops}
    assert "sine" not in {ops[n] for n in seen if n in ops}
