"""GPU-path checks on 2 logical CPU devices, run in a fresh process by test_multi_replica.py.

What each replica's inputs live on, how replicas agree on dynamic loss scaling, and that batch
norm statistics add no cross-replica reduction: on GPUs these decide scaling efficiency and
correctness, and the same tf.distribute code runs on logical CPU devices. Prints one JSON object.
"""

from __future__ import annotations

import json

import paths  # noqa: F401 - the checkout's root first on sys.path

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfbench.engine import optimizers, steps, update_kernels
from tfbench.distribute import strategy as strategy_lib, strategies, sync, variables  # noqa: E402
from tfbench.distribute.devices import DeviceSet  # noqa: E402
from tfbench.distribute.spread import SpreadStorageStrategy  # noqa: E402
from tfbench.models.fused_bn import FusedBatchNorm  # noqa: E402
from tfbench.config.settings import make_settings  # noqa: E402

DEVICES = ("/cpu:0", "/cpu:1")


def _input_devices(strategy) -> list[str]:
    images = steps.synthetic_images(strategy, 2, 4, "float32")
    return [tf.DeviceSpec.from_string(v.device).to_string()
            for v in strategy.experimental_local_results(images)]


def _model():
    keras.utils.set_random_seed(5)
    return keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Flatten(),
                             keras.layers.Dense(5)])


def _aggregation(variable) -> str:
    """The TensorFlow variable's aggregation ("none", "only_first_replica", ...): what the
    strategy acts on (Keras' own attribute keeps the value the layer asked for)."""
    return variable.value.aggregation.name.lower()


def _replica_values(strategy, variable) -> list[np.ndarray]:
    """Each replica's copy (one value where the strategy keeps one copy)."""
    return [v.numpy() for v in strategy.experimental_local_results(variable.value)]


def _scaled_steps(strategy, loss_scaling="dynamic", growth_steps=2000,
                  make_optimizer=lambda: update_kernels.FusedSGD(0.1)):
    with variables.scope(strategy):
        model = _model()
        opt = make_optimizer()
        if loss_scaling == "dynamic":
            opt = optimizers.LossScaleOptimizer(opt, initial_scale=1024.0,
                                                dynamic_growth_steps=growth_steps)
        opt.build(model.trainable_variables)
    st = steps.Steps(model, opt, strategy,
                     steps.StepConfig(5, 0.0, loss_scaling=loss_scaling, loss_scale=1024.0))
    return model, opt, st


def _images(strategy):
    return steps.synthetic_images(strategy, 2, 4, "float32", seed=7)


def _scale_growth(strategy) -> dict:
    """Finite steps: the update equals the unscaled one, and the scale doubles every 2 steps."""
    model, opt, st = _scaled_steps(strategy, growth_steps=2)
    plain_model, _, plain = _scaled_steps(strategy, loss_scaling="none")
    step, plain_step = st.train_step(), plain.train_step()
    images = _images(strategy)
    state = []
    for _ in range(3):
        step(images).numpy()
        plain_step(images).numpy()
        state.append((int(opt.step_counter.numpy()), float(opt.dynamic_scale.numpy())))
    diff = max(float(np.max(np.abs(a - b))) for v, w in zip(model.trainable_variables,
                                                           plain_model.trainable_variables)
               for a, b in zip(_replica_values(strategy, v), _replica_values(strategy, w)))
    return {"state": state, "weight_diff_to_unscaled": diff,
            "iterations": int(opt.iterations.numpy())}


def _keras_own(cls):
    """Keras' own update, of the gradients the step has reduced (as tfbench's optimizers)."""
    return type("Keras" + cls.__name__, (update_kernels.ReducedByTheStep, cls), {})


# name -> (tfbench's optimizer, Keras' own); the legacy defaults of --optimizer. (Adam passes
# its bias corrections through the strategy's merge call with the learning rate.)
OPTIMIZERS = {
    "momentum": (lambda: update_kernels.FusedSGD(0.1, momentum=0.9, nesterov=True),
                 lambda: _keras_own(keras.optimizers.SGD)(0.1, momentum=0.9, nesterov=True)),
    "adam": (lambda: update_kernels.FusedAdam(0.1),
             lambda: _keras_own(keras.optimizers.Adam)(0.1)),
}


def _fused_updates(strategy) -> dict:
    """Per optimizer: how many fused training kernels a step runs, and the largest difference
    of any replica's weights to Keras' own update after 3 steps, relative to the weights."""
    out = {}
    for name, (fused, own) in OPTIMIZERS.items():
        model, _, st = _scaled_steps(strategy, loss_scaling="none", make_optimizer=fused)
        keras_model, _, keras_st = _scaled_steps(strategy, loss_scaling="none",
                                                 make_optimizer=own)
        step, keras_step = st.train_step(), keras_st.train_step()
        images = _images(strategy)
        for _ in range(3):
            step(images).numpy()
            keras_step(images).numpy()
        graph = step.function.get_concrete_function(images).graph.as_graph_def()
        ops = [n.op for n in graph.node] + [
            n.op for f in graph.library.function for n in f.node_def]
        diff = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
                   for v, w in zip(model.trainable_variables, keras_model.trainable_variables)
                   for a, b in zip(_replica_values(strategy, v), _replica_values(strategy, w)))
        out[name] = {"kernels": sum(op.startswith("ResourceApply") for op in ops),
                     "copies": sum(len(_replica_values(strategy, v))
                                   for v in model.trainable_variables),
                     "diff": diff}
    return out


def _overflow_on_replica_1(strategy) -> dict:
    """One dynamic-loss-scaling step in which only replica 1's gradient overflows."""
    model, opt, st = _scaled_steps(strategy)
    before = [_replica_values(strategy, v) for v in model.trainable_variables]
    clean = st._gradients

    def overflowing(images, labels):
        logits, base, total, grads = clean(images, labels)
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        poison = tf.where(tf.equal(replica, 1), np.inf, 0.0)
        return logits, base, total, [grads[0] + poison] + list(grads[1:])

    st._gradients = overflowing
    step = st.train_step()
    step(_images(strategy)).numpy()
    after = [_replica_values(strategy, v) for v in model.trainable_variables]
    return {
        "weights_unchanged": all(np.array_equal(a, b) for va, vb in zip(before, after)
                                 for a, b in zip(va, vb)),
        "weights_finite": all(np.isfinite(a).all() for va in after for a in va),
        "replicas_identical": all(np.array_equal(va[0], va[-1]) for va in after),
        "scale": float(opt.dynamic_scale.numpy()),
        "iterations": int(opt.iterations.numpy()),
    }


def _clipped_update(strategy, loss_scaling: str) -> list[float]:
    """One step with --gradient_clip=0.5 and a learning rate of 1, replica 0's every gradient
    +3 and replica 1's -1 (times the loss scale where it is dynamic, as scaled gradients are):
    every distinct change of the weights, on every copy."""
    def optimizer():
        return optimizers.make_optimizer(make_settings({"gradient_clip": 0.5}), 1.0)
    model, _, st = _scaled_steps(strategy, loss_scaling=loss_scaling, make_optimizer=optimizer)
    before = [_replica_values(strategy, v) for v in model.trainable_variables]
    scale = 1024.0 if loss_scaling == "dynamic" else 1.0

    def known(images, labels):
        logits, base, total, grads = _clean_gradients(st)(images, labels)
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        value = tf.where(tf.equal(replica, 0), 3.0, -1.0) * scale
        return logits, base, total, [tf.fill(tf.shape(g), value) for g in grads]

    st._gradients = known
    st.train_step()(_images(strategy)).numpy()
    after = [_replica_values(strategy, v) for v in model.trainable_variables]
    return sorted({round(float(d), 6) for va, vb in zip(before, after) for a, b in zip(va, vb)
                   for d in np.unique(b - a)})


def _clean_gradients(st):
    return type(st)._gradients.__get__(st)


def _replica_decisions(strategy) -> dict:
    """check_finite on the gradients the step reduces, only replica 1's overflowing: what each
    replica decides, and the collectives the decision adds to the gradient's own."""
    with variables.scope(strategy):
        opt = optimizers.LossScaleOptimizer(update_kernels.FusedSGD(0.1))
        weight = tf.Variable(tf.zeros([3]))
        opt.build([weight])

    @tf.function
    def decide():
        def replica_fn():
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            grad = tf.where(tf.equal(replica, 1), np.inf, 1.0) * tf.ones([3])
            return opt.check_finite(sync.reduce_gradients(strategy, [grad], [weight]))
        return strategy.run(replica_fn)
    decisions = [bool(v.numpy()) for v in strategy.experimental_local_results(decide())]
    graph = decide.get_concrete_function().graph
    collectives = sum(op.type == "CollectiveReduceV2" for op in graph.get_operations())
    return {"decisions": decisions, "collectives_per_replica": collectives / 2}


def _batch_norm(strategy) -> dict:
    """A training step of FusedBatchNorm with different data on each replica."""
    with variables.scope(strategy):
        layer = FusedBatchNorm()
        layer.build((4, 3, 3, 2))
    images = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.random.stateless_normal([4, 3, 3, 2], seed=[1, 2])
        + 10.0 * float(ctx.replica_id_in_sync_group))

    @tf.function
    def train(x):
        return strategy.run(lambda x: tf.reduce_sum(layer(x, training=True)), args=(x,))
    train(images)
    ops = [op.type for op in train.get_concrete_function(images).graph.get_operations()]
    out = {"aggregation": _aggregation(layer.moving_mean),
           "reductions": sum(op in ("AddN", "CollectiveReduceV2", "NcclAllReduce")
                             for op in ops)}
    if hasattr(layer.moving_mean.value, "values"):
        means = _replica_values(strategy, layer.moving_mean)
        out["replica_means_differ"] = not np.allclose(means[0], means[1])
    return out


def _dropout(strategy) -> dict:
    """Two training calls of a Keras Dropout on every replica (the seed state it writes on each
    call is a non-trainable "none" variable): each replica's mask per call, and the state."""
    with variables.scope(strategy):
        layer = keras.layers.Dropout(0.5, seed=3)
        layer.build((1, 64))
    state = layer.seed_generator.state

    @tf.function
    def call():
        return strategy.run(lambda: tf.cast(layer(tf.ones([1, 64]), training=True) > 0, tf.int32))
    before = _replica_values(strategy, state)
    masks = [[m.numpy().tolist() for m in strategy.experimental_local_results(call())]
             for _ in range(2)]
    after = _replica_values(strategy, state)
    return {"aggregation": _aggregation(state),
            "same_mask_on_every_replica": [all(m == call_masks[0] for m in call_masks)
                                           for call_masks in masks],
            "mask_changed_between_calls": masks[0][0] != masks[1][0],
            "state_advanced_by": sorted({int(a[1] - b[1]) for a, b in zip(after, before)})}


def _gradient_sum_devices(compute_devices, local_parameter_device,
                          variable_update="parameter_server") -> list[str]:
    """Where a step sums the replicas' gradients."""
    plan = DeviceSet("cpu", len(compute_devices), tuple(compute_devices), "NHWC")
    sp = strategy_lib.make_strategy(make_settings({
        "variable_update": variable_update, "device": "cpu",
        "num_gpus": len(compute_devices), "local_parameter_device": local_parameter_device}),
        plan)
    _, _, st = _scaled_steps(sp.strategy, loss_scaling="none")
    step = st.train_step()
    graph = step.function.get_concrete_function(_images(sp.strategy)).graph
    specs = [tf.DeviceSpec.from_string(op.device) for op in graph.get_operations()
             if op.type == "AddN" and op.device]
    found = {"/device:%s:%d" % (s.device_type, s.device_index) for s in specs}
    return sorted(found)


# Replica 0's loss is 3 x the sum of every weight, replica 1's -1 x: each replica's gradient of
# its loss is 3 (-1) for every weight, their mean 1 and their sum 2.
KNOWN = (3.0, -1.0)
LEARNING_RATE = 0.1


def _known_losses(st, replica_of):
    """Steps._losses with the losses of KNOWN, on the replica replica_of() says."""
    def losses(images, labels, training, tape=None):
        logits = st._call_model(images, training)  # noqa: SLF001
        factor = tf.gather(tf.constant(KNOWN), replica_of())
        total = factor * tf.add_n([tf.reduce_sum(v) for v in st.model.trainable_variables])
        return logits, total, total
    return losses


def _moves(strategy, replica_of) -> list[float]:
    """One plain SGD step (LEARNING_RATE) of the engine's training step with the losses of
    KNOWN: every distinct change of a weight, on every copy of it."""
    model, _, st = _scaled_steps(strategy, loss_scaling="none", make_optimizer=lambda: (
        optimizers.make_optimizer(make_settings({"optimizer": "sgd"}), LEARNING_RATE)))
    before = [_replica_values(strategy, v) for v in model.trainable_variables]
    st._losses = _known_losses(st, replica_of)  # noqa: SLF001
    st.train_step()(_images(strategy)).numpy()
    after = [_replica_values(strategy, v) for v in model.trainable_variables]
    return sorted({round(float(d), 6) for va, vb in zip(before, after) for a, b in zip(va, vb)
                   for d in np.unique(b - a)})


def _mean_of_replicas(variable_update: str, **flags) -> list[float]:
    """_moves under the strategy a run of --variable_update builds on 2 devices."""
    plan = DeviceSet("cpu", len(DEVICES), DEVICES, "NHWC")
    strategy = strategy_lib.make_strategy(make_settings({
        "variable_update": variable_update, "device": "cpu", "num_gpus": len(DEVICES),
        **flags}), plan).strategy
    return _moves(strategy, lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)


class _TwoRankHorovod:
    """horovod.tensorflow for rank 0 of 2 whose other rank's gradients are KNOWN[1] each:
    allreduce sums, or with op=Average averages, this rank's tensor and the other's."""
    Average, Sum = "average", "sum"

    def init(self):
        pass

    def size(self):
        return 2

    def rank(self):
        return 0

    def allreduce(self, tensor, op=None, device_dense=""):
        total = tensor + KNOWN[1] * tf.ones_like(tensor)
        return total / 2.0 if op == self.Average else total

    def broadcast_variables(self, variables, root_rank):
        pass   # rank 0's own values


def _mean_of_horovod_ranks() -> list[float]:
    """_moves of rank 0 (KNOWN[0]) under --variable_update=horovod, the other rank's gradients
    KNOWN[1]."""
    import sys
    import types
    hvd = _TwoRankHorovod()
    sys.modules["horovod"] = types.SimpleNamespace(tensorflow=hvd)
    sys.modules["horovod.tensorflow"] = hvd
    try:
        plan = DeviceSet("cpu", 1, DEVICES[:1], "NHWC")
        strategy = strategy_lib.make_strategy(make_settings({
            "variable_update": "horovod", "device": "cpu"}), plan).strategy
        return _moves(strategy, lambda: 0)
    finally:
        del sys.modules["horovod"], sys.modules["horovod.tensorflow"]


def main() -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    # A third device, so that a parameter device other than the host's CPU:0 can be told apart.
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * (len(DEVICES) + 1))
    mirrored = tf.distribute.MirroredStrategy(list(DEVICES))
    independent = strategies.IndependentStrategy(DEVICES)
    central = tf.distribute.experimental.CentralStorageStrategy(
        compute_devices=list(DEVICES), parameter_device="/cpu:0")
    spread = SpreadStorageStrategy(DEVICES)
    out = {
        "input_devices": _input_devices(mirrored),
        "input_devices_central": _input_devices(central),
        "overflow_mirrored": _overflow_on_replica_1(mirrored),
        "overflow_central": _overflow_on_replica_1(central),
        "overflow_spread": _overflow_on_replica_1(spread),
        "growth_mirrored": _scale_growth(mirrored),
        "growth_central": _scale_growth(central),
        "growth_spread": _scale_growth(spread),
        "overflow_independent": _overflow_on_replica_1(independent),
        "gradient_sum_devices": _gradient_sum_devices(("/cpu:1", "/cpu:2"), "gpu"),
        "gradient_sum_devices_cpu": _gradient_sum_devices(("/cpu:1", "/cpu:2"), "cpu"),
        "replicated_sum_devices": _gradient_sum_devices(("/cpu:1", "/cpu:2"), "gpu",
                                                        "replicated"),
        "replicated_sum_devices_cpu": _gradient_sum_devices(("/cpu:1", "/cpu:2"), "cpu",
                                                            "replicated"),
        "replica_decisions": _replica_decisions(mirrored),
        "clipped_mirrored": _clipped_update(mirrored, "none"),
        "clipped_spread": _clipped_update(spread, "none"),
        "clipped_mirrored_dynamic": _clipped_update(mirrored, "dynamic"),
        "batch_norm_mirrored": _batch_norm(mirrored),
        "batch_norm_central": _batch_norm(central),
        "dropout_mirrored": _dropout(mirrored),
        "dropout_central": _dropout(central),
        "fused_mirrored": _fused_updates(mirrored),
        "fused_central": _fused_updates(central),
        "fused_independent": _fused_updates(independent),
        "mean_of_replicas": {
            "replicated": _mean_of_replicas("replicated"),
            "replicated_pscpu": _mean_of_replicas("replicated",
                                                  all_reduce_spec="pscpu"),
            "parameter_server": _mean_of_replicas("parameter_server"),
            "parameter_server_cpu": _mean_of_replicas("parameter_server",
                                                      local_parameter_device="cpu"),
            "collective_all_reduce": _mean_of_replicas("collective_all_reduce"),
            "independent": _mean_of_replicas("independent"),
            "horovod": _mean_of_horovod_ranks()},
    }
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
