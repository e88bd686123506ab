"""tfbench.distribute.packing: which dtype and how many packs a gradient all-reduce sends.

What the packs do in a traced step (dtype on the wire, packs per device) is in
test_graph_audit.py; the numbers they give, in
distribute/test_devices_logical.py. The order TensorFlow's
collectives launch the packs in, and the sums they give back, come from packing_checks.py (2
logical CPU devices, a fresh process).
"""

import pytest

from helpers import run_check_script
from tfbench.config.settings import make_settings
from tfbench.distribute import packing
from tfbench.distribute.packing import Transfer, split_into_packs

MIB = 2 ** 20


@pytest.mark.parametrize("flags,compiled,dtype", [
    ({"use_fp16": True}, False, "float16"),
    ({"precision": "fp16"}, True, "float16"),
    ({"use_fp16": True, "compact_gradient_transfer": False}, False, None),
    ({"precision": "bf16"}, True, "bfloat16"),
    ({"precision": "bf16"}, False, None),     # NCCL outside XLA takes no bfloat16
    ({}, True, None),
])
def test_transfer_dtype_is_the_compute_dtype_when_compact(flags, compiled, dtype):
    assert packing.transfer_for(make_settings(flags), 0, compiled, "gpu").dtype == dtype


@pytest.mark.parametrize("repacking,spec_packs,packs", [(0, 0, 0), (3, 0, 3), (0, 2, 2),
                                                        (3, 2, 3)])
def test_gradient_repacking_wins_over_the_specs_packs(repacking, spec_packs, packs):
    p = make_settings({"gradient_repacking": repacking})
    assert packing.transfer_for(p, spec_packs, False, "gpu").num_packs == packs


@pytest.mark.parametrize("kind,pack_bytes,label", [
    ("gpu", 25 * 2 ** 20, "as computed, packs of 25 MiB"),
    # On CPU devices, as the legacy script: no packs unless asked (--gradient_repacking, #N).
    ("cpu", 0, "as computed, each gradient alone")])
def test_default_packs_by_device_kind(kind, pack_bytes, label):
    transfer = packing.transfer_for(make_settings({}), 0, False, kind)
    assert (transfer.pack_bytes, transfer.label()) == (pack_bytes, label)
    assert split_into_packs([4, 4, 4], transfer) == (
        [[2, 1, 0]] if kind == "gpu" else [[2], [1], [0]])
    assert packing.transfer_for(make_settings({"gradient_repacking": 2}), 0, False,
                                kind).num_packs == 2


def test_n_packs_of_about_equal_bytes_from_the_last_gradient():
    packs = split_into_packs([4, 4, 4, 4, 4, 4], Transfer(num_packs=3))
    assert packs == [[5, 4], [3, 2], [1, 0]]


def test_more_packs_than_gradients_gives_one_per_gradient():
    assert split_into_packs([8, 8], Transfer(num_packs=5)) == [[1], [0]]


def test_default_packs_close_at_pack_bytes():
    sizes = [10 * MIB] * 6
    assert split_into_packs(sizes, Transfer()) == [[5, 4, 3], [2, 1, 0]]
    assert split_into_packs([MIB] * 3, Transfer()) == [[2, 1, 0]]
    assert split_into_packs([], Transfer()) == []


def test_label_names_dtype_and_packs():
    assert Transfer("float16", 2).label() == "float16, 2 packs"
    assert Transfer().label() == "as computed, packs of 25 MiB"


@pytest.fixture(scope="module")
def collectives():
    return run_check_script("packing_checks.py")


@pytest.mark.slow
@pytest.mark.parametrize("path", ["mirrored", "multi_worker", "compiled_replica"])
def test_the_first_collective_carries_the_last_layers_pack(collectives, path):
    # Gradients of 10..60 elements in variable order, 3 packs from the last: {60, 50} (the last
    # layers, made first by the backward pass), {40}, {30, 20, 10}. TensorFlow chains a
    # replica's collectives; the chain must start with the last layers' pack.
    assert collectives[path]["chain"] == [110, 40, 60]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["mirrored", "multi_worker"])
def test_packed_gradients_sum_back_into_their_own_places(collectives, path):
    # Replica r's gradient i holds (i + 1) * (r + 1): the sum over 2 replicas is 3 * (i + 1),
    # the same on both replicas.
    assert collectives[path]["sums"] == [[[3.0 * (i + 1)]] * 2 for i in range(6)]


@pytest.mark.slow
def test_values_that_are_not_gradients_are_reduced_exactly():
    # An fp16 transfer sends gradients in float16, but a checkpoint's state broadcast from the
    # chief and the probe's flags go as they are: in fp16 a loss scale above 65504 would
    # arrive as inf and 1e-9 (an Adam second moment) as 0 on every worker.
    got = run_check_script("packing_checks.py", "as_computed")["as_computed"]
    assert got["gradient_dtypes"] == ["float16"]
    assert got["broadcast_dtypes"] == ["float32"] and got["agreed_dtypes"] == ["float32"]
    assert got["broadcast"] == [70000.0, pytest.approx(1e-9, rel=1e-6), pytest.approx(0.1)]
    assert got["agreed"] == [True, False]
