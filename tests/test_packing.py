"""tfbench.distribute.packing: which dtype and how many packs a gradient all-reduce sends.

What the packs do in a traced step (dtype on the wire, packs per device) is in
test_graph_audit.py; the numbers they give, in test_multi_device.py.
"""

import pytest

from tfbench.config.params import make_params
from tfbench.distribute import packing
from tfbench.distribute.packing import Transfer, plan_packs

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
    assert packing.transfer_for(make_params(flags), 0, compiled).dtype == dtype


@pytest.mark.parametrize("repacking,spec_packs,packs", [(0, 0, 0), (3, 0, 3), (0, 2, 2),
                                                        (3, 2, 3)])
def test_gradient_repacking_wins_over_the_specs_packs(repacking, spec_packs, packs):
    p = make_params({"gradient_repacking": repacking})
    assert packing.transfer_for(p, spec_packs, False).num_packs == packs


def test_n_packs_of_about_equal_bytes_from_the_last_gradient():
    packs = plan_packs([4, 4, 4, 4, 4, 4], Transfer(num_packs=3))
    assert packs == [[5, 4], [3, 2], [1, 0]]


def test_more_packs_than_gradients_gives_one_per_gradient():
    assert plan_packs([8, 8], Transfer(num_packs=5)) == [[1], [0]]


def test_default_packs_close_at_pack_bytes():
    sizes = [10 * MIB] * 6
    assert plan_packs(sizes, Transfer()) == [[5, 4, 3], [2, 1, 0]]
    assert plan_packs([MIB] * 3, Transfer()) == [[2, 1, 0]]
    assert plan_packs([], Transfer()) == []


def test_label_names_dtype_and_packs():
    assert Transfer("float16", 2).label() == "float16, 2 packs"
    assert Transfer().label() == "as computed, packs of 25 MiB"
