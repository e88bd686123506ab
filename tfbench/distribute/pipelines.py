"""Input pipelines under a strategy: each replica takes whole batches of its own, and each
process (worker, horovod rank) reads its own part of the data.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from tfbench.distribute import native_log
from tfbench.distribute.strategies import (HorovodStrategy, cluster_of, coordinator,
                                           is_parameter_server)


def pipeline_shard(pipeline_id, num_pipelines: int, rank=0, size: int = 1) -> tuple:
    """(index, count) of input pipeline `pipeline_id` of `num_pipelines` in process `rank` of
    `size`: the part of the data it reads (every count-th example from index). Ints, or a
    tensor index on a parameter-server worker."""
    return rank * num_pipelines + pipeline_id, size * num_pipelines


def process_rank(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(rank, size) among processes that tf.distribute does not know of: horovod's."""
    if isinstance(strategy, HorovodStrategy):
        return strategy.hvd.rank(), strategy.hvd.size()
    return 0, 1


def distribute_inputs(strategy: tf.distribute.Strategy, make: Callable[..., tf.data.Dataset]):
    """An iterator giving every replica its own batch; per worker on a parameter-server cluster.

    make(index, count) builds input pipeline `index` of `count` (see pipeline_shard), batched
    per replica: each replica takes whole batches from its worker's pipeline. A dataset handed
    to experimental_distribute_dataset would instead be taken as the global batch and split
    over every worker's replicas.
    """
    if is_parameter_server(strategy):
        _, num = cluster_of(strategy)

        def per_worker():
            def dataset_fn(context):
                # Each worker runs the traced function; its index is known only there.
                worker = tf.distribute.coordinator.experimental_get_current_worker_index()
                return make(*pipeline_shard(context.input_pipeline_id,
                                            context.num_input_pipelines, worker, num))
            return strategy.distribute_datasets_from_function(dataset_fn)
        return iter(coordinator(strategy).create_per_worker_dataset(per_worker))
    rank, size = process_rank(strategy)

    def dataset_fn(context):
        return make(*pipeline_shard(context.input_pipeline_id, context.num_input_pipelines,
                                    rank, size))
    with native_log.without_lines(native_log.PER_DEVICE_BUFFER_NOT_OPTIMIZED):
        return iter(strategy.distribute_datasets_from_function(dataset_fn))


def process_shard(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(index, count) of this process's part of the data, read without tf.distribute
    (--data_only): the same part its replicas read through distribute_inputs."""
    rank, size = process_rank(strategy)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # One input pipeline per worker, numbered chief first (as TensorFlow numbers them).
        resolver = strategy.cluster_resolver
        jobs = resolver.cluster_spec().as_dict()
        chiefs = len(jobs.get("chief", ()))
        worker = resolver.task_id + (chiefs if resolver.task_type == "worker" else 0)
        return pipeline_shard(worker, chiefs + len(jobs.get("worker", ())), rank, size)
    return pipeline_shard(0, 1, rank, size)


def per_worker_synthetic(strategy: tf.distribute.Strategy, make: Callable):
    """Per-worker iterator repeating one per-replica batch of images made by make(context)."""
    def per_worker():
        def dataset_fn(context):
            return tf.data.Dataset.from_tensors(make(context)).repeat()
        return strategy.distribute_datasets_from_function(dataset_fn)
    return iter(coordinator(strategy).create_per_worker_dataset(per_worker))
