"""What steps, optimizers and checkpoints ask of a strategy: how gradients are scaled and
reduced, how every process starts from the same state, and which process writes --train_dir.
"""

from __future__ import annotations

import tensorflow as tf

from tfbench.distribute.spread import SpreadStorageStrategy
from tfbench.distribute.strategies import HorovodStrategy, IndependentStrategy


def gradient_divisor(strategy: tf.distribute.Strategy) -> int:
    """Replicas whose gradients are summed into one update (each loss is divided by it)."""
    if isinstance(strategy, IndependentStrategy):
        return 1
    return strategy.num_replicas_in_sync


def replica_all_reduce_reduces(strategy: tf.distribute.Strategy) -> bool:
    """Whether ReplicaContext.all_reduce hands each replica the reduced value. Independent
    replicas get their own value back (they exchange no gradients), and so do the replicas of
    a spread parameter server (the update sums each gradient where its variable lives): a
    value every replica must agree on goes through strategy.reduce in a merge call there."""
    return not isinstance(strategy, (IndependentStrategy, SpreadStorageStrategy))


def reduce_gradients(strategy: tf.distribute.Strategy, grads: list) -> list:
    """Cross-process reduction that tf.distribute does not do itself (horovod)."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.reduce_gradients(grads)
    return grads


def sync_initial_state(strategy: tf.distribute.Strategy, variables: list) -> None:
    """Every process starts from rank 0's variables (horovod); tf.distribute syncs its own."""
    if isinstance(strategy, HorovodStrategy) and variables:
        strategy.broadcast(variables)


def _multi_worker(strategy: tf.distribute.Strategy) -> bool:
    """A MultiWorkerMirroredStrategy spanning more than this process."""
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.num_replicas_in_sync > len(strategy.extended.worker_devices))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes --train_dir (checkpoints, summaries): horovod rank 0, the
    MultiWorkerMirroredStrategy chief (TensorFlow's: the "chief" task, else worker 0), and
    every process that is alone in running the steps (the parameter-server controller too)."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.hvd.rank() == 0
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return bool(strategy.extended.should_checkpoint)
    return True


def chief_label(strategy: tf.distribute.Strategy) -> str:
    """The process that writes --train_dir, as a user names it."""
    if isinstance(strategy, HorovodStrategy):
        return "horovod rank 0"
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        jobs = strategy.cluster_resolver.cluster_spec().as_dict()
        return "the chief task" if jobs.get("chief") else "worker 0"
    return "this process"


def saves_beside_chief(strategy: tf.distribute.Strategy) -> bool:
    """A MultiWorkerMirroredStrategy worker other than the chief also saves each checkpoint,
    into a scratch directory it then removes: TensorFlow's documented pattern, because a save
    may need every worker (reading an on-read variable is a collective). Horovod ranks hold
    plain variables, so only rank 0 saves, as in the legacy script."""
    return _multi_worker(strategy) and not is_chief(strategy)


def sync_restored_state(strategy: tf.distribute.Strategy, variables: list) -> None:
    """After the chief restored a checkpoint (or found none), every process takes the chief's
    values, so no process needs the chief's files. Every process must call it, in the same
    place: it is a collective (horovod's broadcast; an all-reduce under MultiWorkerMirrored)."""
    if isinstance(strategy, HorovodStrategy) and variables:
        strategy.broadcast(variables)
    elif _multi_worker(strategy) and variables:
        _broadcast_from_chief(strategy, variables)


def _broadcast_from_chief(strategy: tf.distribute.Strategy, variables: list) -> None:
    """Every worker's copy of `variables` set to the chief's: a sum over all replicas in which
    only global replica 0 (the chief's first device) contributes.

    Eager, one all-reduce per variable: in a tf.function the collective batches its inputs
    (concat and split, one dtype per batch), and SplitV has no int64 GPU kernel for the step
    and seed counters; eagerly each value goes alone. Float32 and int64 are types that NCCL,
    ring and CPU collectives all take. It runs once, before warm-up.
    """
    def contribution():
        ctx = tf.distribute.get_replica_context()
        first = tf.get_static_value(ctx.replica_id_in_sync_group) == 0
        return [ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                               tf.convert_to_tensor(v) if first else tf.zeros(v.shape, v.dtype))
                for v in variables]
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")   # not TF's warning that running eagerly is slow: this runs once
    try:
        reduced = strategy.run(contribution)
    finally:
        logger.setLevel(level)
    for var, value in zip(variables, reduced):
        # The same value on every local replica: assign the first local one to all copies.
        var.assign(strategy.experimental_local_results(value)[0])
