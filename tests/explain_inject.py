"""A tfbench run with one known cost injected, for tests/test_explain_injected.py.

    python explain_inject.py KIND SECONDS [BENCHMARK FLAGS...]

KIND is what gets SECONDS slower, in the run and in its --explain_scaling probes alike (the
probes must find it as the run suffers it):
  allreduce  every gradient all-reduce (packing.PackedAllReduce, the reduction a replicated run
             and its all-reduce probe go through) waits SECONDS once its result exists
  device     every training step of the replica on /cpu:1 (the run's, and the one-device step
             the probe times there) waits SECONDS after its update
  input      every batch of a real-data input pipeline (the run's and the probe's) waits
             SECONDS
The wait is a tf.py_function that sleeps, ordered after the work it delays, so it adds to the
step instead of running beside it.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

KIND, SECONDS = sys.argv[1], float(sys.argv[2])


def _wait_after(tensor):
    """`tensor`, available only SECONDS after it was computed."""
    def sleep(_value):
        time.sleep(SECONDS)
        return np.float32(0.0)
    done = tf.py_function(sleep, [tensor], tf.float32)
    with tf.control_dependencies([done]):
        return tf.identity(tensor)


def _slow_allreduce():
    from tensorflow.python.distribute import values as tf_values

    from tfbench.distribute import packing
    reduce = packing.PackedAllReduce.batch_reduce_implementation

    def slowed(self, reduce_op, value_destination_pairs, options):
        out = reduce(self, reduce_op, value_destination_pairs, options)
        if not all(d is v for v, d in value_destination_pairs):
            return out   # not an all-reduce
        first = out[0].values[0]
        with tf.device(first.device):
            gate = _wait_after(tf.reshape(first, [-1])[:1])
        delayed = []
        for value in out:
            parts = []
            for part in value.values:
                with tf.device(part.device), tf.control_dependencies([gate]):
                    parts.append(tf.identity(part))
            delayed.append(tf_values.Mirrored(parts))
        return delayed
    packing.PackedAllReduce.batch_reduce_implementation = slowed


def _slow_device():
    from tfbench.engine import steps
    train = steps.Steps._train_replica

    def slowed(self, images, labels=None):
        out = train(self, images, labels)
        # In the traced step an op's device is its replica's (MirroredStrategy, or the
        # OneDeviceStrategy of the probe's one-device step).
        return _wait_after(out) if out.device.endswith("CPU:1") else out
    steps.Steps._train_replica = slowed


def _slow_input():
    from tfbench.data import pipeline
    build = pipeline.build

    def slowed(*args, **kwargs):
        return build(*args, **kwargs).map(lambda images, labels: (_wait_after(images), labels))
    pipeline.build = slowed


{"allreduce": _slow_allreduce, "device": _slow_device, "input": _slow_input}[KIND]()

from tfbench.cli import entry_point  # noqa: E402

sys.argv = ["tfbench"] + sys.argv[3:]
entry_point()
