"""Input pipelines under a strategy (tfbench.distribute.pipelines): which part of the data each
process reads, in replica batches."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import install_fake_horovod
from tfbench.distribute import strategy as strategy_lib, pipelines
from tfbench.distribute.devices import DeviceSet
from tfbench.config.settings import make_settings


CPU1 = DeviceSet("cpu", 1, ("/cpu:0",), "NHWC")


@pytest.fixture
def fake_horovod(monkeypatch):
    return install_fake_horovod(monkeypatch, rank=3, size=4, local_rank=1)


def _first_batches(iterator, count=2):
    return [np.asarray(next(iterator)).tolist() for _ in range(count)]


def _numbers(index, count, batch=2):
    """Example ids 0..11 split as a reader splits them by index, in replica batches."""
    return tf.data.Dataset.range(12).shard(count, index).repeat().batch(batch)


@pytest.mark.parametrize("args,shard", [
    ((0, 1), (0, 1)),                 # one host
    ((1, 2), (1, 2)),                 # worker 1 of 2 (its input context)
    ((0, 1, 3, 4), (3, 4)),           # horovod rank 3 of 4
    ((1, 2, 1, 3), (3, 6)),           # input pipeline 1 of 2 in process 1 of 3
])
def test_pipeline_shard(args, shard):
    assert pipelines.pipeline_shard(*args) == shard


def test_horovod_ranks_read_their_own_part_of_the_data(fake_horovod):
    """--variable_update=horovod: rank 3 of 4 reads examples 3, 7, 11, ..."""
    sp = strategy_lib.make_strategy(make_settings({"variable_update": "horovod", "device": "cpu"}),
                                    CPU1)
    assert pipelines.process_rank(sp.strategy) == (3, 4)
    assert pipelines.process_shard(sp.strategy) == (3, 4)
    shards = []

    def make(index, count):
        shards.append((index, count))
        return _numbers(index, count)
    assert _first_batches(pipelines.distribute_inputs(sp.strategy, make)) == [[3, 7], [11, 3]]
    assert shards == [(3, 4)]


def test_one_host_reads_all_the_data_in_replica_batches():
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert pipelines.process_shard(one) == (0, 1)
    iterator = pipelines.distribute_inputs(one, _numbers)
    assert _first_batches(iterator, 3) == [[0, 1], [2, 3], [4, 5]]
