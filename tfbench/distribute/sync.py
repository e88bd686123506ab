"""What steps, optimizers and checkpoints ask of a strategy: how gradients are scaled and
reduced, how every process starts from the same state, and which process writes --train_dir.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tfbench.distribute import packing
from tfbench.distribute.strategies import HorovodStrategy, IndependentStrategy


def gradient_divisor(strategy: tf.distribute.Strategy) -> int:
    """Replicas whose gradients are summed into one update (each loss is divided by it)."""
    if isinstance(strategy, IndependentStrategy):
        return 1
    return strategy.num_replicas_in_sync


def reduces_gradients(strategy: tf.distribute.Strategy) -> bool:
    """Whether reduce_gradients hands every replica the same values (all but independent
    replicas, which exchange no gradients)."""
    return not isinstance(strategy, IndependentStrategy)


def reduce_gradients(strategy: tf.distribute.Strategy, grads: list,
                     variables: Optional[list] = None) -> list:
    """One replica's gradients summed over every replica, in replica context, before the
    update; the optimizer then reduces nothing itself (update_kernels.ReducedByTheStep).

    - several replicas of one model: ReplicaContext.all_reduce(SUM), the call Keras' optimizer
      makes (keras/src/backend/tensorflow/optimizer.py, _all_reduce_sum_gradients, Keras 3.8
      to 3.15), so packing.PackedAllReduce and every strategy's own reduction run as before;
    - a parameter server (CentralStorageStrategy, SpreadStorageStrategy): each gradient summed
      on its variable's device (StrategyExtended.batch_reduce_to with the variable as the
      destination), where the update then runs;
    - horovod: averaged over the processes by horovod's allreduce (each process's loss is its
      own batch's mean);
    - independent replicas and a single replica: as they are.
    None gradients stay None. Each pack's all-reduce depends on its own gradients only: a
    control dependency around this call would, on the merge-call path, hold every pack until
    the whole backward pass ends (see Steps._apply).
    """
    if isinstance(strategy, HorovodStrategy):
        return strategy.reduce_gradients(grads)
    if isinstance(strategy, IndependentStrategy) or strategy.num_replicas_in_sync == 1:
        return list(grads)
    present = [i for i, g in enumerate(grads) if g is not None]
    if not present:
        return list(grads)
    context = tf.distribute.get_replica_context()
    values = [grads[i] for i in present]
    if isinstance(strategy, tf.distribute.experimental.CentralStorageStrategy):
        if variables is None:
            raise ValueError("a parameter server sums each gradient at its variable")
        targets = [_tf_variable(variables[i]) for i in present]
        reduced = context.merge_call(_sum_at_variables, args=(values, targets))
    else:
        reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, values)
    out = list(grads)
    for i, value in zip(present, reduced):
        out[i] = value
    return out


def _tf_variable(variable):
    """The TensorFlow variable, the destination of its gradient's sum (a Keras variable wraps
    one as its `value`; a TensorFlow variable's own `value` is a method)."""
    return variable if isinstance(variable, tf.Variable) else getattr(variable, "value", variable)


def _sum_at_variables(strategy: tf.distribute.Strategy, values: list, targets: list) -> list:
    return strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM,
                                             list(zip(values, targets)))


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
        # Exact values, not the gradients' transfer dtype (fp16 makes a loss scale of 65536 inf).
        with packing.as_computed(strategy):
            reduced = strategy.run(contribution)
    finally:
        logger.setLevel(level)
    for var, value in zip(variables, reduced):
        # The same value on every local replica: assign the first local one to all copies.
        var.assign(strategy.experimental_local_results(value)[0])
