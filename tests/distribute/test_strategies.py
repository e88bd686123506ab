"""The strategies tfbench adds to tf.distribute (tfbench.distribute.strategies): horovod's, and
XLA over each replica's step."""

import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import FakeGpu, install_fake_horovod
from tfbench.engine import steps
from tfbench.distribute import strategy as strategy_lib, strategies, sync
from tfbench.distribute.devices import DeviceSet
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings


CPU1 = DeviceSet("cpu", 1, ("/cpu:0",), "NHWC")
CPU2 = DeviceSet("cpu", 2, ("/cpu:0", "/cpu:1"), "NHWC")


@pytest.fixture
def fake_horovod(monkeypatch):
    return install_fake_horovod(monkeypatch, rank=3, size=4, local_rank=1)


def test_horovod_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "horovod", None)
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", None)
    with pytest.raises(UsageError) as err:
        strategy_lib.make_strategy(make_settings({"variable_update": "horovod", "device": "cpu"}),
                                   CPU1)
    assert str(err.value).startswith("--variable_update=horovod needs horovod, which is not "
                                     "importable")
    assert strategy_lib.num_workers(make_settings({"variable_update": "horovod"}), None) == 1


def test_horovod_averages_gradients_and_broadcasts_initial_state(fake_horovod):
    p = make_settings({"variable_update": "horovod", "device": "cpu", "horovod_device": "/cpu:0"})
    assert strategy_lib.num_workers(p, None) == 4
    sp = strategy_lib.make_strategy(p, CPU1)
    assert isinstance(sp.strategy, strategies.HorovodStrategy)
    assert (sp.variables_label, sp.num_workers, sp.horovod_device) == ("horovod", 4, "/cpu:0")
    with sp.strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
    builder = steps.Steps(model, opt, sp.strategy,
                          steps.StepConfig(num_label_classes=3, weight_decay=0.0))
    assert ("broadcast", len(model.variables) + len(opt.variables), 0) in fake_horovod.calls
    images = tf.constant(np.ones((2, 4), "float32"))
    out = builder.train_step()(sp.strategy.experimental_distribute_values_from_function(
        lambda _: images)).numpy()
    assert np.all(np.isfinite(out))
    reduced = [c for c in fake_horovod.calls if c[0] == "allreduce"]
    assert reduced == [("allreduce", "average", "/cpu:0")] * len(model.trainable_variables)


@pytest.mark.slow
def test_horovod_with_xla_compiles_around_the_allreduce(fake_horovod):
    """Horovod's allreduce has no XLA kernel: with --xla the step compiles the replica's forward
    and backward pass and keeps the allreduce outside (a py_function has no XLA kernel either)."""
    def allreduce(tensor, op=None, device_dense=""):
        fake_horovod.calls.append(("allreduce", op, device_dense))
        return tf.py_function(lambda t: t, [tensor], tensor.dtype)
    fake_horovod.allreduce = allreduce
    sp = strategy_lib.make_strategy(make_settings({"variable_update": "horovod", "device": "cpu",
                                                 "xla": True}), CPU1)
    with sp.strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
    builder = steps.Steps(model, opt, sp.strategy, steps.StepConfig(
        num_label_classes=3, weight_decay=0.0, jit_compile=True))
    images = tf.constant(np.ones((2, 4), "float32"))
    out = builder.train_step()(sp.strategy.experimental_distribute_values_from_function(
        lambda _: images)).numpy()
    assert np.all(np.isfinite(out))
    assert [c[0] for c in fake_horovod.calls].count("allreduce") == 2


def test_horovod_runs_one_device_per_process(fake_horovod):
    with pytest.raises(UsageError, match="one device per process"):
        strategy_lib.make_strategy(make_settings({"variable_update": "horovod", "device": "cpu",
                                                "num_gpus": 2}), CPU2)


def test_horovod_with_a_cluster_is_an_error():
    with pytest.raises(UsageError, match="horovodrun"):
        strategy_lib.make_strategy(make_settings({"variable_update": "horovod", "device": "cpu",
                                                "job_name": "worker",
                                                "worker_hosts": "127.0.0.1:1"}), CPU1)


def test_gradient_divisor():
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert sync.gradient_divisor(one) == 1
    assert sync.reduce_gradients(one, [1, 2]) == [1, 2]


def test_horovod_process_takes_its_local_rank_gpu(fake_horovod, monkeypatch):
    from tfbench.distribute import devices

    monkeypatch.setattr(devices, "visible_gpus", lambda: [FakeGpu(i) for i in range(4)])
    plan = devices.select_devices(make_settings({"variable_update": "horovod", "device": "gpu"}))
    assert (plan.num_devices, plan.names, plan.gpu_indices) == (1, ("/gpu:0",), (1,))


def test_horovod_process_bound_to_one_gpu_takes_it(fake_horovod, monkeypatch):
    """Slurm --gpus-per-task=1 (or a per-rank CUDA_VISIBLE_DEVICES) shows each rank one GPU,
    whatever its local rank (1 here)."""
    from tfbench.distribute import devices

    monkeypatch.setattr(devices, "visible_gpus", lambda: [FakeGpu()])
    plan = devices.select_devices(make_settings({"variable_update": "horovod", "device": "gpu"}))
    assert (plan.num_devices, plan.names, plan.gpu_indices) == (1, ("/gpu:0",), (0,))


def test_xla_compiles_replica_steps_only_with_nccl_or_auto_collectives(monkeypatch):
    # XLA refuses RING collectives (CollectiveReduceV2Op::Compile): --all_reduce_spec=ring under
    # MultiWorkerMirroredStrategy, or MirroredStrategy on virtual GPUs, keeps merge calls.
    import types
    from tensorflow.python.distribute import collective_util
    monkeypatch.setattr(strategies, "gpu_devices", lambda devices: True)
    impl = tf.distribute.experimental.CommunicationImplementation
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    monkeypatch.setattr(type(strategy), "num_replicas_in_sync", property(lambda self: 2))
    answers = {}
    for name in ("NCCL", "AUTO", "RING"):
        strategy.extended._communication_options = collective_util.Options(
            implementation=getattr(impl, name))
        answers[name] = strategies.replica_step_compilation(strategy, xla=True)
    assert answers == {"NCCL": (True, None), "AUTO": (True, None), "RING": (
        False, "XLA does not compile the RING collectives TensorFlow chose for these devices")}
    assert strategies.replica_step_compilation(strategy, xla=False) == (False, None)
    del strategy.extended._communication_options
    assert strategies.replica_step_compilation(strategy, xla=True) == (
        False, "XLA does not compile the cross-device collectives TensorFlow chose for these "
               "devices")
    assert not strategies.xla_takes_its_collectives(types.SimpleNamespace(
        extended=types.SimpleNamespace()))


