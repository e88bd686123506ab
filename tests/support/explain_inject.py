"""A tfbench run with one known cost injected, for tests/e2e/test_explain_injected.py.

    python explain_inject.py KIND SECONDS [BENCHMARK FLAGS...]

KIND is what gets SECONDS slower, in the run and in its --explain_scaling probes alike (the
probes must find it as the run suffers it), or kinds joined by "+":
  allreduce  every gradient all-reduce (packing.PackedAllReduce, the reduction a replicated run
             and its all-reduce probe go through) waits SECONDS once the first pack's result
             (the last layers') exists
  collective every ReplicaContext.all_reduce (the gradient sum of MultiWorkerMirroredStrategy
             and of its all-reduce probe) gives its result SECONDS after
             it exists: a worker whose collectives are slow, which every worker of its cluster
             waits for at the next one
  allreduce_backward
             as allreduce, and the backward pass SECONDS longer: the first half of the
             gradients (the first layers', the backward pass's last) exist SECONDS after the
             whole backward pass has run, in the run and in the probes' one-device steps
  device     every training step of the replica on /cpu:1 (the run's, and the one-device step
             the probe times there) waits SECONDS after its update
  input      every batch of a real-data input pipeline (the run's and the probe's) waits
             SECONDS
  kernels    the matmul and convolution of --validate_devices' kernel probes on /cpu:1 (a
             tf.matmul of a tensor with itself, a tf.nn.conv2d: Keras' layers call neither)
             wait SECONDS: the matmul after it computes, the convolution for its images
  wrong      every gradient of a pass traced on /cpu:2 under op determinism (--validate_devices'
             numeric check, the only pass that runs with it on) comes out WRONG (2^-10) too
             large, relatively: that device computes wrong results, and only there
The wait is a stateless tf.numpy_function that sleeps, after the work it delays (its input) and
before what the delayed value feeds (which adds its zero), so it adds to the step instead of
running beside it.
"""

from __future__ import annotations

import sys
import time

import paths  # noqa: F401 - the checkout's root first on sys.path

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

KIND, SECONDS = sys.argv[1], float(sys.argv[2])


def _wait_after(tensor):
    """`tensor`, available only SECONDS after it was computed."""
    return _gated(tensor, _wait(tensor))


def _wait(tensor):
    """A zero that exists SECONDS after `tensor` does."""
    def sleep(_value):
        time.sleep(SECONDS)
        return np.float32(0.0)
    # Stateless: TensorFlow runs a function's stateful ops one after another in program order
    # (automatic control dependencies), so two stateful waits could never overlap.
    zero = tf.numpy_function(sleep, [tensor], tf.float32, stateful=False)
    zero.set_shape([])    # what it gates keeps its static shape (packing needs it)
    return zero


def _gated(tensor, zero):
    """`tensor`, once `zero` exists: a data dependency (grappler removes a stateless op whose
    output only a control dependency takes)."""
    return tensor + tf.cast(zero, tensor.dtype)


def _slow_allreduce():
    from tensorflow.python.distribute import values as tf_values

    from tfbench.distribute import packing
    reduce = packing.PackedAllReduce.batch_reduce_implementation

    def slowed(self, reduce_op, value_destination_pairs, options):
        out = reduce(self, reduce_op, value_destination_pairs, options)
        if not all(d is v for v, d in value_destination_pairs):
            return out   # not an all-reduce
        # The last gradient in variable order is the first pack's (packing._groups).
        first = out[-1].values[0]
        with tf.device(first.device):
            zero = _wait(tf.reshape(first, [-1])[:1])
        delayed = []
        for value in out:
            parts = []
            for part in value.values:
                with tf.device(part.device):
                    parts.append(_gated(part, zero))
            delayed.append(tf_values.Mirrored(parts))
        return delayed
    packing.PackedAllReduce.batch_reduce_implementation = slowed


def _slow_collective():
    from tensorflow.python.util import nest
    all_reduce = tf.distribute.ReplicaContext.all_reduce

    def slowed(self, reduce_op, value, options=None):
        out = all_reduce(self, reduce_op, value, options)
        flat = nest.flatten(out)
        zero = _wait(tf.reshape(flat[0], [-1])[:1])
        return nest.pack_sequence_as(out, [_gated(t, zero) for t in flat])
    tf.distribute.ReplicaContext.all_reduce = slowed


def _slow_backward():
    from tfbench.engine import steps
    gradients = steps.Steps._gradients

    def slowed(self, images, labels):
        logits, base, total, grads = gradients(self, images, labels)
        late = max(1, len(grads) // 2)
        zero = _wait(grads[0])
        return logits, base, total, [_gated(g, zero) for g in grads[:late]] + list(grads[late:])
    steps.Steps._gradients = slowed


def _slow_allreduce_and_backward():
    _slow_allreduce()
    _slow_backward()


def _slow_device():
    from tfbench.engine import steps
    train = steps.Steps._train_replica

    def slowed(self, images, labels=None):
        out = train(self, images, labels)
        # In the traced step an op's device is its replica's (MirroredStrategy, or the
        # OneDeviceStrategy of the probe's one-device step).
        return _wait_after(out) if out.device.endswith("CPU:1") else out
    steps.Steps._train_replica = slowed


def _slow_kernels():
    matmul, conv2d = tf.matmul, tf.nn.conv2d

    def slowed_matmul(a, b, *args, **kwargs):
        out = matmul(a, b, *args, **kwargs)
        return _wait_after(out) if a is b and out.device.endswith("CPU:1") else out

    def slowed_conv2d(images, *args, **kwargs):
        out = conv2d(images, *args, **kwargs)
        # The probe's step returns the backward convolutions only, which read the images.
        return conv2d(_wait_after(images), *args, **kwargs) if out.device.endswith("CPU:1") \
            else out
    tf.matmul, tf.nn.conv2d = slowed_matmul, slowed_conv2d


WRONG = 2.0 ** -10


def _wrong_device():
    from tensorflow.python.framework import config as tf_config

    from tfbench.engine import steps
    gradients = steps.Steps._gradients

    def wrong(self, images, labels):
        logits, base, total, grads = gradients(self, images, labels)
        if not (tf_config.is_op_determinism_enabled()
                and grads[0].device.endswith("CPU:2")):
            return logits, base, total, grads
        return logits, base, total, [g * (1.0 + WRONG) for g in grads]
    steps.Steps._gradients = wrong


def _slow_input():
    from tfbench.data import pipeline
    build = pipeline.build

    def slowed(*args, **kwargs):
        return build(*args, **kwargs).map(lambda images, labels: (_wait_after(images), labels))
    pipeline.build = slowed


for _kind in KIND.split("+"):
    {"allreduce": _slow_allreduce, "allreduce_backward": _slow_allreduce_and_backward,
     "collective": _slow_collective,
     "backward": _slow_backward, "device": _slow_device, "input": _slow_input,
     "kernels": _slow_kernels, "wrong": _wrong_device}[_kind]()

from tfbench.cli import entry_point  # noqa: E402

sys.argv = ["tfbench"] + sys.argv[3:]
entry_point()
