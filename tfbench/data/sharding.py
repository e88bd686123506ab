"""Which part of the data one input pipeline reads when several read the same data at once.

Input pipeline `index` of `count` (several workers, or horovod processes) reads every example
whose position in the data's fixed order is index modulo count, so every example is read by
exactly one pipeline per epoch. Readers split by file when there are at least as many files as
pipelines, else by example (see imagenet, folder, cifar10, tfds_reader). The index is an int,
or a scalar tensor on a parameter-server worker, whose index is known only when it runs.
Which pipeline this one is comes from the strategy (tfbench.distribute.strategy.distribute_inputs);
nothing here knows of clusters or of the processes' launcher.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from tfbench.errors import UsageError


@dataclasses.dataclass(frozen=True)
class Shard:
    index: Any = 0     # int, or a scalar integer tensor
    count: int = 1

    def __post_init__(self):
        if self.count < 1:
            raise ValueError("a shard count must be positive, got %d" % self.count)
        if isinstance(self.index, int) and not 0 <= self.index < self.count:
            raise ValueError("shard index %d is not in 0..%d" % (self.index, self.count - 1))

    @property
    def whole(self) -> bool:
        return self.count == 1


WHOLE = Shard()


def by_index(ds: tf.data.Dataset, shard: Shard) -> tf.data.Dataset:
    """Every count-th element of ds from index; ds must have the same order in every pipeline."""
    if shard.whole:
        return ds
    return ds.shard(shard.count, tf.cast(shard.index, tf.int64))


def seed_for(seed: int, shard: Shard):
    """This pipeline's seed: the run's seed offset by its index, so pipelines shuffle and augment
    differently (the whole data keeps the run's seed)."""
    if shard.whole:
        return seed
    if isinstance(shard.index, int):
        return seed + shard.index
    return tf.cast(shard.index, tf.int64) + seed


def check_enough(num_examples: int, shard: Shard, what: str) -> None:
    """UsageError when some pipeline would get no example at all."""
    if num_examples < shard.count:
        raise UsageError("%s holds %d example(s), fewer than the %d input pipelines that share "
                         "it (one per worker or process): use more data or fewer workers"
                         % (what, num_examples, shard.count))
