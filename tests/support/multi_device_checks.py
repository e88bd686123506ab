"""Numerical checks on logical CPU devices, run in a fresh process by
distribute/test_devices_logical.py.

`python multi_device_checks.py [N]`: N = 2 (default) runs the general checks, N = 3 those of an
odd device count. The CPU can be split into logical devices only before TensorFlow initialises,
which a shared pytest process cannot promise, so these checks run here and print one JSON object.
"""

from __future__ import annotations

import json
import sys

import paths  # noqa: F401 - the checkout's root first on sys.path

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfbench.engine import steps, update_kernels  # noqa: E402
from tfbench.distribute import strategy as strategy_lib, pipelines, variables  # noqa: E402
from tfbench.distribute.devices import DeviceSet  # noqa: E402
from tfbench.config.settings import make_settings  # noqa: E402

NUM_DEVICES = int(sys.argv[1]) if len(sys.argv) > 1 else 2
DEVICES = tuple("/cpu:%d" % i for i in range(NUM_DEVICES))
BATCH, SIZE, CLASSES = 4 * NUM_DEVICES, 8, 10


def _model(norm: bool = False):
    layers = [keras.Input((SIZE, SIZE, 3)), keras.layers.Conv2D(4, 3, padding="same")]
    if norm:
        layers.append(keras.layers.BatchNormalization())
    layers += [keras.layers.ReLU(), keras.layers.GlobalAveragePooling2D(),
               keras.layers.Dense(CLASSES)]
    return keras.Sequential(layers)


def _data():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(BATCH, SIZE, SIZE, 3)).astype("float32")
    labels = rng.integers(0, CLASSES, size=(BATCH,)).astype("int32")
    return images, labels


def _train(strategy, weights, images, labels, num_steps=2, weight_decay=0.0, jit=False,
           norm=False):
    """Trains a fresh model from `weights` on one fixed global batch; (losses, model)."""
    with variables.scope(strategy):
        model = _model(norm)
        model.set_weights(weights)
        opt = update_kernels.FusedSGD(0.1, momentum=0.9)
        opt.build(model.trainable_variables)
    config = steps.StepConfig(num_label_classes=CLASSES, weight_decay=weight_decay,
                              compute_accuracy=True, jit_compile=jit)
    fn = steps.Steps(model, opt, strategy, config).train_step(from_iterator=True)
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    it = iter(strategy.experimental_distribute_dataset(dataset))
    losses = [float(fn(it).numpy()[1]) for _ in range(num_steps)]
    return losses, model


def _replica_weights(model, i):
    """Replica i's copy of every trainable variable."""
    return [v.value.values[i].numpy() for v in model.trainable_variables]


def main() -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * len(DEVICES))
    tf.random.set_seed(1)
    images, labels = _data()
    init = _model().get_weights()
    out = {}
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy(list(DEVICES))
    out["num_replicas"] = mirrored.num_replicas_in_sync
    base_losses, base = _train(one, init, images, labels)
    base_weights = base.get_weights()

    def diff_to_base(model, replica=None):
        got = [v.numpy() for v in model.trainable_variables] if replica is None \
            else _replica_weights(model, replica)
        return max(float(np.max(np.abs(a - b))) for a, b in zip(base_weights, got))

    plan = DeviceSet("cpu", NUM_DEVICES, DEVICES, "NHWC")
    if NUM_DEVICES % 2:
        odd_count_checks(out, plan, init, images, labels, diff_to_base)
        print("RESULT " + json.dumps(out))
        return

    # 2 replicas of 4 = 1 device on the same 8 images, with and without weight decay.
    for wd in (0.0, 0.01):
        l1, m1 = _train(one, init, images, labels, weight_decay=wd)
        l2, m2 = _train(mirrored, init, images, labels, weight_decay=wd)
        out["mirrored_wd%g" % wd] = {
            "loss_diff": max(abs(a - b) for a, b in zip(l1, l2)),
            "weight_diff": max(float(np.max(np.abs(a - b))) for a, b in
                               zip(m1.get_weights(), _replica_weights(m2, 0))),
            "replicas_diff": max(float(np.max(np.abs(a - b))) for a, b in
                                 zip(_replica_weights(m2, 0), _replica_weights(m2, 1)))}

    # Spread parameter servers (parameter_server) and XLA per replica give the same update too.
    sp = strategy_lib.make_strategy(make_settings({"variable_update": "parameter_server",
                                                 "device": "cpu", "num_gpus": 2}), plan)
    out["ps_strategy"] = type(sp.strategy).__name__
    mp_strategy = sp.strategy
    _, mp = _train(sp.strategy, init, images, labels)
    out["ps_weight_diff"] = diff_to_base(mp)
    lx, mx = _train(mirrored, init, images, labels, jit=True)
    out["xla_loss_diff"] = max(abs(a - b) for a, b in zip(base_losses, lx))
    out["xla_weight_diff"] = diff_to_base(mx, 0)
    lxn, _ = _train(mirrored, _model(norm=True).get_weights(), images, labels, jit=True,
                    norm=True)
    out["xla_norm_losses"] = lxn

    # Independent: replica i trains alone on its half of the batch.
    sp = strategy_lib.make_strategy(make_settings({"variable_update": "independent",
                                                 "device": "cpu", "num_gpus": 2}), plan)
    out["independent_label"] = sp.variables_label
    _, mi = _train(sp.strategy, init, images, labels)
    diffs = []
    for i in range(2):
        half = slice(i * BATCH // 2, (i + 1) * BATCH // 2)
        _, alone = _train(one, init, images[half], labels[half])
        diffs.append(max(float(np.max(np.abs(a - b))) for a, b in
                         zip(alone.get_weights(), _replica_weights(mi, i))))
    out["independent_vs_alone"] = diffs
    out["independent_replicas_diff"] = max(
        float(np.max(np.abs(a - b))) for a, b in
        zip(_replica_weights(mi, 0), _replica_weights(mi, 1)))

    # Real data: every replica takes its own batch of 3 from the host's one input pipeline.
    def numbered(index, count):
        return tf.data.Dataset.range(100).shard(count, index).batch(3).repeat()
    for name, strategy in (("mirrored", mirrored), ("central_storage", mp_strategy),
                           ("independent", sp.strategy)):
        element = next(pipelines.distribute_inputs(strategy, numbered))
        out["inputs_" + name] = [np.asarray(x).tolist()
                                 for x in strategy.experimental_local_results(element)]

    # Replicated with an explicit reduction.
    for spec in ("pscpu", "hierarchical_copy"):
        sp = strategy_lib.make_strategy(make_settings({"variable_update": "replicated",
                                                     "all_reduce_spec": spec, "device": "cpu",
                                                     "num_gpus": 2}), plan)
        _, ms = _train(sp.strategy, init, images, labels)
        out["spec_" + spec] = {"label": sp.all_reduce_label,
                               "weight_diff": diff_to_base(ms, 0)}
    print("RESULT " + json.dumps(out))


def odd_count_checks(out, plan, init, images, labels, diff_to_base) -> None:
    """Hierarchical copy over an odd number of devices, as TensorFlow runs it and as tfbench."""
    raw = tf.distribute.MirroredStrategy(
        list(DEVICES), cross_device_ops=tf.distribute.HierarchicalCopyAllReduce())
    _, mr = _train(raw, init, images, labels)
    out["tf_hierarchical_copy_weight_diff"] = diff_to_base(mr, 0)
    for name, flags in (("hierarchical_copy", {"hierarchical_copy": True}),
                        ("xring", {"all_reduce_spec": "xring"})):
        sp = strategy_lib.make_strategy(make_settings(dict(
            variable_update="replicated", device="cpu", num_gpus=NUM_DEVICES, **flags)), plan)
        _, ms = _train(sp.strategy, init, images, labels)
        out["odd_" + name] = {"label": sp.all_reduce_label, "notices": list(sp.notices),
                              "weight_diffs": [diff_to_base(ms, i) for i in range(NUM_DEVICES)]}


if __name__ == "__main__":
    main()
