"""Input pipelines under a strategy: each replica takes whole batches of its own, and each
process (worker, horovod rank) reads its own part of the data.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

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
    if is_parameter_server(strategy):   # distribute has no plan (engine's): the strategy says
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


class WorkerImages:
    """Synthetic images kept on the devices of every parameter-server worker, as on one host.

    A per-worker dataset (`from_tensors(images).repeat()`) lives on the worker's CPU and is
    copied to each GPU replica on every step; the legacy script kept synthetic images in a
    local variable on each GPU instead. Here each replica's batch is a per-worker variable
    (ParameterServerStrategy's `per_worker_variable=True`: one unsynchronised variable on every
    worker, none on the parameter servers; ps_values.PerWorkerVariable in TF 2.17 and 2.21),
    created on the worker under the replica's device (`/device:GPU:r`, the strategy's
    worker_devices) by a variable creator the strategy's own runs on the worker. The step reads
    it there (the read runs on the variable's device), so no step copies an image. The
    coordinator holds one copy of each batch too (PerWorkerVariable traces with it).

    make(context) builds replica `context.replica_id_in_sync_group`'s batch; on the worker it
    runs once, when the first traced step reads the variable.
    """

    def __init__(self, strategy: tf.distribute.Strategy, make: Callable,
                 devices: Optional[Sequence[str]] = None):
        self.strategy = strategy
        self.devices = tuple(devices or strategy.extended.worker_devices)
        coordinator(strategy)   # per-worker variables need the strategy's ClusterCoordinator
        self.variables = []
        for r, device in enumerate(self.devices):
            context = tf.distribute.experimental.ValueContext(r, len(self.devices))
            with tf.variable_creator_scope(_on_device(device)), strategy.scope():
                self.variables.append(tf.Variable(
                    initial_value=functools.partial(make, context), trainable=False,
                    per_worker_variable=True, name="synthetic_images_%d" % r))

    def per_replica(self):
        """Inside a scheduled step: each replica's batch, read on its device."""
        def read(context):
            r = context.replica_id_in_sync_group
            with tf.device(self.devices[r]):
                return self.variables[r].read_value()
        return self.strategy.experimental_distribute_values_from_function(read)


def _on_device(device: str) -> Callable:
    """A variable creator that places what the creators after it make on `device` (within the
    worker the creation runs on)."""
    def creator(next_creator, **kwargs):
        with tf.device(device):
            return next_creator(**kwargs)
    return creator
