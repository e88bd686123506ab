"""tfbench.distribute.spread: SpreadStorageStrategy's update of a variable from the replicas'
values (in-process, one device). Placement and the sums' devices on several devices are in
test_multi_replica.py and test_graph_audit.py; the numbers it trains to, in test_multi_device.py.
"""

import pytest
import tensorflow as tf
from tensorflow.python.distribute import values as tf_values

from tfbench.distribute.spread import SpreadStorageStrategy


def test_unsummable_replica_values_raise_instead_of_applying_replica_0():
    strategy = SpreadStorageStrategy(["/cpu:0"])
    with strategy.scope():
        var = tf.Variable(tf.zeros([2]))
    grads = tf_values.PerReplica((tf.ones([2]), tf.ones([3])))
    with pytest.raises(RuntimeError, match="cannot be summed"):
        strategy.extended._update(var, lambda v, g: v.assign_sub(g), (grads,), {}, True)
    assert var.numpy().tolist() == [0.0, 0.0]
    # Summable values are summed on the variable's device, as before.
    strategy.extended._update(var, lambda v, g: v.assign_sub(g),
                              (tf_values.PerReplica((tf.ones([2]), tf.ones([2]))),), {}, True)
    assert var.numpy().tolist() == [-2.0, -2.0]
