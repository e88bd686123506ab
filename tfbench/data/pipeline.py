"""The tf.data tail every reader shares: caching, shuffling, repeat, parallel preprocessing,
batching, prefetch and the --datasets_* options.

A reader describes its data as a `Source` (one epoch of raw elements in a fixed order, plus the
per-element preprocessing); `build` turns it into the batched, endlessly repeating dataset.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import tensorflow as tf

from tfbench.config.settings import Settings
from tfbench.data import image_ops

AUTOTUNE = tf.data.AUTOTUNE
DEFAULT_INTERLEAVE_CYCLE_LENGTH = 10  # legacy default of --datasets_parallel_interleave_cycle_length
RECORD_SHUFFLE_BUFFER = 10000  # legacy shuffle_and_repeat buffer (records, before decoding)

# preprocess(element, seed [2] int64, position in batch) -> (image float [S, S, 3], label int32)
Preprocess = Callable[[Any, tf.Tensor, tf.Tensor], tuple]


@dataclasses.dataclass
class Source:
    """One reader's data, before the shared tail."""
    elements: tf.data.Dataset  # one epoch of raw elements, deterministic order
    preprocess: Preprocess
    shuffle_buffer: int        # elements to shuffle over in training
    num_labels: int            # labels lie in [0, num_labels)
    description: str           # what was read, for messages (a pattern or a directory)


def interleave_files(files: tf.data.Dataset, open_file: Callable[[tf.Tensor], tf.data.Dataset],
                     params: Settings, ordered: bool = False) -> tf.data.Dataset:
    """Reads several files at once (--datasets_parallel_interleave_cycle_length, default 10),
    in a deterministic order unless --datasets_sloppy_parallel_interleave; always in order with
    `ordered` (the explicit argument overrides the dataset's `deterministic` option)."""
    cycle = params.data.datasets_parallel_interleave_cycle_length or DEFAULT_INTERLEAVE_CYCLE_LENGTH
    prefetch = params.data.datasets_parallel_interleave_prefetch

    def open_one(filename):
        ds = open_file(filename)
        # TF2's interleave has no prefetch_input_elements; a per-file prefetch buffer is the
        # nearest equivalent of the legacy flag.
        return ds.prefetch(prefetch) if prefetch else ds

    deterministic = ordered or not params.data.datasets_sloppy_parallel_interleave
    return files.interleave(open_one, cycle_length=cycle, block_length=1,
                            num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def options(params: Settings) -> tf.data.Options:
    opts = tf.data.Options()
    if params.data.datasets_num_private_threads:
        opts.threading.private_threadpool_size = params.data.datasets_num_private_threads
    opts.deterministic = not params.data.datasets_sloppy_parallel_interleave
    return opts


def build(source: Source, params: Settings, *, batch_size: int, train: bool, dtype, seed: int
          ) -> tf.data.Dataset:
    """Cache / shuffle / repeat forever, preprocess in parallel, batch (drop remainder), prefetch.

    Each element's random augmentation is seeded from (seed, its index in the stream), so a run
    is reproducible with --tf_random_seed even though the map runs on many threads.
    """
    dtype = tf.as_dtype(dtype)
    ds = source.elements
    if params.data.datasets_repeat_cached_sample:
        # One element in memory, repeated: the pipeline's ceiling without I/O.
        ds = ds.take(1).cache().repeat()
    else:
        if params.data.datasets_use_caching:
            ds = ds.cache()
        if train:
            ds = ds.shuffle(source.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        ds = ds.repeat()

    def preprocess(index, element):
        position = index % batch_size
        image, label = source.preprocess(element, image_ops.element_seed(seed, index), position)
        return tf.cast(image, dtype), tf.cast(label, tf.int32)

    ds = ds.enumerate().map(preprocess, num_parallel_calls=AUTOTUNE)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(options(params))
