"""GPU-path behaviour of several replicas, checked on 2 logical CPU devices.

The checks run in a fresh process (tests/support/multi_replica_checks.py): the CPU can be split into
logical devices only before TensorFlow initialises.
"""


import pytest

from helpers import run_check_script

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checks():
    return run_check_script("multi_replica_checks.py")


@pytest.mark.parametrize("key", ["input_devices", "input_devices_central"])
def test_each_replicas_synthetic_batch_lives_on_its_own_device(checks, key):
    # Created on the first device, every batch would be copied to its replica every step.
    assert checks[key] == ["/job:localhost/replica:0/task:0/device:CPU:0",
                           "/job:localhost/replica:0/task:0/device:CPU:1"]


@pytest.mark.parametrize("strategy", ["mirrored", "central", "spread", "independent"])
def test_an_overflow_on_one_replica_skips_the_step_on_all(checks, strategy):
    got = checks["overflow_" + strategy]
    assert got["weights_unchanged"] and got["weights_finite"] and got["replicas_identical"]
    assert got["scale"] == 512.0          # halved from 1024
    assert got["iterations"] == 0         # no update was applied


@pytest.mark.parametrize("strategy", ["mirrored", "central", "spread"])
def test_dynamic_loss_scaling_updates_as_unscaled_and_grows_the_scale(checks, strategy):
    # Central storage is the legacy default --variable_update=parameter_server on several
    # devices, where Keras' own loss-scale update could not run at all.
    got = checks["growth_" + strategy]
    assert got["state"] == [[1, 1024.0], [0, 2048.0], [1, 2048.0]]
    assert got["iterations"] == 3
    assert got["weight_diff_to_unscaled"] < 1e-6


def test_replicas_decide_finiteness_on_the_reduced_gradients(checks):
    # Replica 0's own gradient is finite: deciding on it, replica 0 would apply an update that
    # replica 1 skips. On the reduced values both decide alike, with no collective of their own.
    got = checks["replica_decisions"]
    assert got["decisions"] == [False, False]
    assert got["collectives_per_replica"] == 1     # the gradient's all-reduce alone


def test_batch_norm_statistics_are_not_reduced_across_replicas(checks):
    mirrored = checks["batch_norm_mirrored"]
    assert mirrored == {"aggregation": "none", "reductions": 0, "replica_means_differ": True}


def test_central_storage_writes_the_first_replicas_statistics(checks):
    # One copy for all replicas: "none" is refused there, "mean" would reduce every step.
    assert checks["batch_norm_central"] == {"aggregation": "only_first_replica",
                                            "reductions": 0}


def test_parameter_server_sums_gradients_where_the_variables_live(checks):
    # The default --local_parameter_device=gpu spreads the variables over the compute devices
    # (CPU:1, CPU:2 here) and sums each gradient on its variable's device, as the legacy script
    # does; =cpu keeps them all on the host and sums there. TensorFlow's CentralStorageStrategy
    # would sum on the host CPU:0 whatever the parameter device.
    assert checks["gradient_sum_devices"] == ["/device:CPU:1", "/device:CPU:2"]
    assert checks["gradient_sum_devices_cpu"] == ["/device:CPU:0"]


def test_replicated_on_cpu_devices_sums_each_gradient_on_a_device_in_turn(checks):
    # The legacy script's default (batch_allreduce.CopyToDeviceAlgorithm) on CPU devices: the
    # 2 gradients (kernel, bias) on CPU:1 and CPU:2 in turn, or all on the host with
    # --local_parameter_device=cpu; no collective (TensorFlow's ring copies on CPUs).
    assert checks["replicated_sum_devices"] == ["/device:CPU:1", "/device:CPU:2"]
    assert checks["replicated_sum_devices_cpu"] == ["/device:CPU:0"]


@pytest.mark.parametrize("strategy", ["mirrored", "central"])
def test_dropout_trains_with_one_mask_per_call_on_every_replica(checks, strategy):
    # Keras writes Dropout's seed state ("none") on every call; central storage's one copy took
    # no replica write (the first training step failed). Written by the first replica there,
    # each call draws one seed on all replicas, as MirroredStrategy's copies in lockstep do.
    got = checks["dropout_" + strategy]
    assert got["aggregation"] == ("only_first_replica" if strategy == "central" else "none")
    assert got["same_mask_on_every_replica"] == [True, True]
    assert got["mask_changed_between_calls"]
    assert got["state_advanced_by"] == [2]      # once per call, not once per replica


@pytest.mark.parametrize("strategy", ["mirrored", "central", "independent"])
def test_each_copy_of_each_variable_is_updated_by_one_kernel_with_keras_values(checks, strategy):
    """tfbench.engine.update_kernels under each --variable_update's strategy: mirrored keeps a
    copy per replica (2 variables x 2 devices), central storage one; Keras' own update gives the
    same weights (up to 1 - beta computed in float32, see tests/engine/test_update_kernels.py)."""
    copies = 2 if strategy == "central" else 4
    for name, got in checks["fused_" + strategy].items():
        assert got["copies"] == copies, name
        assert got["kernels"] == copies, name
        assert got["diff"] < 1e-4, name


@pytest.mark.parametrize("strategy", ["mirrored", "spread", "mirrored_dynamic"])
def test_gradient_clip_clips_the_summed_gradient(checks, strategy):
    # Replica gradients +3 and -1, clipped at 0.5 with a learning rate of 1: the sum, 2, clips
    # to 0.5 (the legacy script clips the aggregated gradient); clipping each replica's first
    # gives 0.5 - 0.5 = 0, no change at all. With dynamic loss scaling, after the unscaling.
    assert checks["clipped_" + strategy] == [-0.5]


@pytest.mark.parametrize("mode", ["replicated", "replicated_pscpu", "parameter_server",
                                  "parameter_server_cpu", "collective_all_reduce", "horovod"])
def test_replica_gradients_are_averaged_not_summed(checks, mode):
    """docs/behaviour.md: one SGD step (learning rate 0.1) with replica 0's gradient 3 and
    replica 1's -1 for every weight (horovod: this rank's and the other rank's) moves every
    weight by -0.1 x their mean (1), where the legacy script's replicated and horovod modes
    moved it by -0.1 x their sum (2)."""
    assert checks["mean_of_replicas"][mode] == [-0.1]


def test_independent_replicas_each_take_their_own_gradient(checks):
    assert checks["mean_of_replicas"]["independent"] == [-0.3, 0.1]
