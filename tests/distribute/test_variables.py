"""tfbench.distribute.variables: which variables get first-replica semantics, and where.

What a strategy then does with them on several replicas (Dropout's seed state and batch norm's
statistics under central storage) is checked on logical CPU devices in test_multi_replica.py.
"""

import keras
import tensorflow as tf

from tfbench.distribute import variables

NONE = tf.VariableAggregation.NONE
FIRST = tf.VariableAggregation.ONLY_FIRST_REPLICA


def _created_with(**kwargs) -> dict:
    seen = {}

    def next_creator(**got):
        seen.update(got)
    variables._first_replica_state(next_creator, **kwargs)
    return seen


def test_replica_state_is_written_by_the_first_replica():
    assert _created_with(trainable=False, aggregation=NONE)["aggregation"] == FIRST
    assert _created_with(trainable=False)["aggregation"] == FIRST     # tf.Variable's default


def test_weights_reductions_asked_for_and_on_read_state_are_left_alone():
    assert _created_with(trainable=True, aggregation=NONE)["aggregation"] == NONE
    sums = _created_with(trainable=False, aggregation=tf.VariableAggregation.SUM)
    assert sums["aggregation"] == tf.VariableAggregation.SUM
    on_read = _created_with(trainable=False, aggregation=NONE,
                            synchronization=tf.VariableSynchronization.ON_READ)
    assert on_read["aggregation"] == NONE


def test_one_device_keeps_keras_aggregation():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert not variables.keeps_one_copy(strategy)
    with variables.scope(strategy):
        layer = keras.layers.Dropout(0.5)
        assert tf.distribute.get_strategy() is strategy
    assert layer.seed_generator.state.value.aggregation == NONE
