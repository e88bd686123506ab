"""Variables created under a strategy: the scope in which tfbench builds models and optimizers.

Keras creates the state that every replica writes in its own step as non-trainable variables
with aggregation "none": each SeedGenerator's state (Dropout, every random layer), batch
norm's moving statistics, LossScaleOptimizer's scale and counter. Under MirroredStrategy each
replica writes its own copy. (Optimizer slots are created so too, but written in the update's
cross-replica context, where no aggregation is read.) Strategies that keep one copy for all
replicas (CentralStorageStrategy: the legacy default --variable_update=parameter_server on
several devices; a ParameterServerStrategy worker with several GPUs) wrap every variable in
TensorFlow's AggregatingVariable, which refuses a replica-context write to a "none" variable
(ps_values.AggregatingVariable._assign_func, TF 2.17 to 2.21): Dropout's first training step
failed there. In `scope` such state is created with aggregation "only_first_replica" instead:
the first replica's value is written to the one copy through a merge call
(values_util.apply_aggregation broadcasts it), which copies and reduces nothing. This is the
depth at which any layer's state is created, so no layer needs a case of its own.

Strategies that keep a copy per replica (MirroredStrategy, MultiWorkerMirroredStrategy) get the
converse: Keras' counters created "only_first_replica" (the optimizer's iterations) are created
"none", each replica advancing its own copy, all equal. A replica-context write to an
"only_first_replica" variable is a merge call (values.apply_aggregation_replica_context, TF 2.17
to 2.21), which an XLA-compiled replica step cannot hold (steps.py compiles each replica's whole
step on GPUs); and it saves a broadcast per step elsewhere.

What that means for Dropout: every replica reads the one seed state before it is written, so
within a step all replicas draw the same seed and, with equal per-replica batch shapes, the same
mask; the state advances once per step (the first replica's write), so masks change from step
to step. MirroredStrategy gives the same masks: each replica's copy of the state starts equal
and advances in lockstep. (The legacy script's per-tower random ops drew different masks per
tower; throughput is the same either way.)
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf


def keeps_one_copy(strategy: tf.distribute.Strategy) -> bool:
    """Whether several replicas share one copy of each variable (AggregatingVariable)."""
    one_copy = (tf.distribute.experimental.CentralStorageStrategy,
                tf.distribute.experimental.ParameterServerStrategy)
    return isinstance(strategy, one_copy) and strategy.num_replicas_in_sync > 1


def keeps_copy_per_replica(strategy: tf.distribute.Strategy) -> bool:
    """Whether every replica holds its own copy of each variable (MirroredVariable)."""
    per_replica = (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy)
    return isinstance(strategy, per_replica) and strategy.num_replicas_in_sync > 1


def _is_replica_state(kwargs: dict) -> bool:
    """A non-trainable, on-write variable that no reduction was asked for."""
    on_read = kwargs.get("synchronization") == tf.VariableSynchronization.ON_READ
    aggregation = kwargs.get("aggregation")
    return (kwargs.get("trainable") is False and not on_read
            and aggregation in (None, tf.VariableAggregation.NONE))


def _first_replica_state(next_creator, **kwargs):
    if _is_replica_state(kwargs):
        kwargs["aggregation"] = tf.VariableAggregation.ONLY_FIRST_REPLICA
    return next_creator(**kwargs)


def _own_copy_state(next_creator, **kwargs):
    if (kwargs.get("trainable") is False
            and kwargs.get("aggregation") == tf.VariableAggregation.ONLY_FIRST_REPLICA):
        kwargs["aggregation"] = tf.VariableAggregation.NONE
    return next_creator(**kwargs)


@contextlib.contextmanager
def scope(strategy: tf.distribute.Strategy) -> Iterator[None]:
    """`strategy.scope()`, where replica state gets first-replica semantics if the strategy
    keeps one copy of each variable, and counters a copy per replica if it keeps one per
    replica. Build models, optimizers and their clones in it."""
    with strategy.scope():
        if keeps_one_copy(strategy):
            creator = _first_replica_state
        elif keeps_copy_per_replica(strategy):
            creator = _own_copy_state
        else:
            yield
            return
        # Entered after the strategy's own creator, so it runs first and the strategy wraps
        # the variable with the aggregation set here.
        with tf.variable_creator_scope(creator):
            yield
