"""tfbench.distribute.spread (and the step's reduction under it, sync.reduce_gradients):
SpreadStorageStrategy on 2 logical CPU devices (tests/support/spread_checks.py, a fresh process).
Placement and sums in a traced training step are in test_graph_audit.py and
test_multi_replica.py; the numbers it trains to, in distribute/test_devices_logical.py.
"""

import pytest

from helpers import run_check_script

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checks():
    return run_check_script("spread_checks.py")


def test_each_variable_goes_to_the_device_holding_the_fewest_bytes(checks):
    assert checks["variable_devices"] == ["CPU:0", "CPU:1", "CPU:1"]


def test_each_gradient_is_summed_once_on_its_variables_device(checks):
    # Replica r (1, 2) sends r and 10 r: every replica gets the sums, made where each lives.
    assert checks["sums"] == [[3.0] * 8, [30.0] * 3]
    assert checks["gradient_sums_on"] == ["CPU:0", "CPU:1"]


def test_an_all_reduce_hands_every_replica_the_sum(checks):
    assert checks["all_reduce"] == [3.0, 3.0]


def test_the_finite_check_and_the_clip_read_each_sum_where_it_lives(checks):
    # Keras checks in replica 0's thread and clips in each replica's: every sum on the other
    # device was copied there (and back for the update), each step.
    got = checks["checks"]
    assert got["checked"] >= 2 and got["misplaced"] == []
