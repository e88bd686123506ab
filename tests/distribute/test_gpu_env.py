"""The GPU environment variables (TF_GPU_THREAD_MODE, TF_GPU_THREAD_COUNT,
TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT): a flag the user gave wins, as the legacy script
assigned them (and removed the batch-norm one for --nobatchnorm_persistent); a value inherited
from the environment that no flag touched is kept and said; and a run whose settings TensorFlow
no longer takes (its runtime started first) says which did not apply."""

import os

import pytest

from helpers import run_inprocess
from tfbench.config import startup_env
from tfbench.config.settings import make_settings
from tfbench.distribute import devices, gpu_env
from tfbench.errors import UsageError

MODE, COUNT, BN = (gpu_env.GPU_THREAD_MODE_ENV, gpu_env.GPU_THREAD_COUNT_ENV,
                   gpu_env.BATCHNORM_PERSISTENT_ENV)


@pytest.fixture
def environ(monkeypatch):
    """os.environ as the process would inherit it, without the GPU variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in (MODE, COUNT, BN, startup_env.SET_BY_TFBENCH)}
    monkeypatch.setattr(os, "environ", env)
    return env


def _gpu(values, environ, num_devices=1):
    settings = devices.set_environment(make_settings(dict(values, model="trivial")), "gpu",
                                       num_devices=num_devices)
    return {k: environ.get(k) for k in (MODE, COUNT, BN)}, list(settings.notices)


def test_flags_the_user_gave_win_over_inherited_values(environ):
    environ.update({MODE: "gpu_shared", COUNT: "7", BN: "1"})
    env, notices = _gpu({"gpu_thread_mode": "gpu_private", "batchnorm_persistent": False},
                        environ)
    assert env == {MODE: "gpu_private", COUNT: "2", BN: None}
    assert notices == [
        "--gpu_thread_mode=gpu_private replaces TF_GPU_THREAD_MODE=gpu_shared from the "
        "environment",
        "--gpu_thread_mode=gpu_private (2 threads) replaces TF_GPU_THREAD_COUNT=7 from the "
        "environment",
        "--nobatchnorm_persistent replaces TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT=1 from the "
        "environment"]
    # The manifest's set_by_tfbench names what tfbench set (not what it removed).
    assert startup_env.set_by_tfbench(environ) == [MODE, COUNT]


def test_an_explicit_global_mode_replaces_an_inherited_private_pool(environ):
    environ[MODE] = "gpu_private"
    env, _ = _gpu({"gpu_thread_mode": "global"}, environ)
    assert env[MODE] == "global"    # TensorFlow's own default: no pool of GPU threads


def test_inherited_values_no_flag_touched_are_kept_and_said(environ):
    environ.update({MODE: "gpu_shared", COUNT: "6", BN: "0"})
    env, notices = _gpu({}, environ, num_devices=4)
    assert env == {MODE: "gpu_shared", COUNT: "6", BN: "0"}
    assert notices == [
        "TF_GPU_THREAD_MODE=gpu_shared from the environment is kept (no --gpu_thread_mode "
        "given; tfbench's default is gpu_private)",
        "TF_GPU_THREAD_COUNT=6 from the environment is kept (no --per_gpu_thread_count given; "
        "tfbench's default is 8)",
        "TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT=0 from the environment is kept (no "
        "--[no]batchnorm_persistent given; tfbench's default is 1)"]
    assert startup_env.set_by_tfbench(environ) == []


def test_inherited_values_equal_to_the_defaults_need_no_line(environ):
    environ.update({MODE: "GPU_PRIVATE", COUNT: "2", BN: "true"})
    env, notices = _gpu({}, environ)
    assert env == {MODE: "GPU_PRIVATE", COUNT: "2", BN: "true"} and notices == []


def test_without_flags_or_environment_the_legacy_defaults_are_set(environ):
    assert _gpu({}, environ) == ({MODE: "gpu_private", COUNT: "2", BN: "1"}, [])


@pytest.mark.parametrize("values, num_devices, count", [
    ({"gpu_thread_mode": "gpu_shared"}, 4, "8"),            # one pool for all GPUs: 2 x 4
    ({"gpu_thread_mode": "gpu_shared", "per_gpu_thread_count": 3}, 8, "24"),
    ({"per_gpu_thread_count": 3}, 8, "3"),                  # gpu_private: per GPU
])
def test_thread_counts_follow_the_legacy_arithmetic(environ, values, num_devices, count):
    assert _gpu(values, environ, num_devices)[0][COUNT] == count


def test_values_set_by_tfbench_before_are_not_taken_for_the_users(environ):
    # A process started by tfbench inherits what tfbench set (and the mark saying so).
    environ.update({MODE: "gpu_shared", COUNT: "16"})
    startup_env.mark([MODE, COUNT], environ)
    env, notices = _gpu({}, environ)
    assert (env[MODE], env[COUNT], notices) == ("gpu_private", "2", [])


@pytest.mark.parametrize("values, inherited, needle", [
    ({"gpu_thread_mode": "gpu_privat"}, {}, "--gpu_thread_mode=gpu_privat: use one of global, "
                                            "gpu_private, gpu_shared"),
    ({"gpu_thread_mode": "global", "per_gpu_thread_count": 4}, {},
     "--per_gpu_thread_count=4 has no effect with gpu_thread_mode=global"),
    ({}, {MODE: "private"}, "TF_GPU_THREAD_MODE=private in the environment is not a mode "
                            "TensorFlow knows"),
    ({}, {COUNT: "two"}, "TF_GPU_THREAD_COUNT=two in the environment is not a positive thread "
                         "count"),
    ({}, {BN: "yes"}, "TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT=yes in the environment is not "
                      "0, 1, true or false: cuDNN would abort the run at its first batch norm"),
])
def test_values_tensorflow_would_refuse_are_one_error_line(environ, values, inherited, needle):
    environ.update(inherited)
    with pytest.raises(UsageError, match=needle):
        _gpu(values, environ)


def test_the_cpu_path_sets_no_gpu_variable(environ):
    devices.set_environment(make_settings({"model": "trivial", "gpu_thread_mode": "gpu_shared"}),
                            "cpu")
    assert not {MODE, COUNT, BN} & set(environ)


def test_variables_set_after_tensorflow_started_are_named_in_one_line(environ, monkeypatch):
    monkeypatch.setattr(devices, "runtime_started", lambda: True)
    monkeypatch.setattr(devices, "configure_runtime", lambda *a: ["GPUs 0,1"])
    plan = devices.DeviceSet("gpu", 2, ("/gpu:0", "/gpu:1"), "NCHW", gpu_indices=(0, 1))
    environ[BN] = "1"
    notices = devices.prepare_runtime(make_settings({"model": "trivial",
                                                   "batchnorm_persistent": False}), plan)
    assert notices[-1] == (
        "TensorFlow had started in this process before this run's settings, so these did not "
        "apply: TF_GPU_THREAD_MODE=gpu_private; TF_GPU_THREAD_COUNT=2; "
        "TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT removed; GPUs 0,1")


@pytest.mark.slow
def test_a_run_after_tensorflow_started_says_which_settings_did_not_apply(tmp_path):
    """The runtime set-up swallowed TensorFlow's "cannot be modified after initialization"
    silently: the run then used the threads of the runtime that was already there."""
    import tensorflow as tf
    tf.constant(0.0)   # the runtime of this (test) process has started
    threads = tf.config.threading.get_intra_op_parallelism_threads() + 1
    code, lines = run_inprocess(
        ["--device=cpu", "--model=trivial", "--image_size=8", "--batch_size=2",
         "--num_batches=1", "--num_warmup_batches=0", "--num_intra_threads=%d" % threads,
         "--force_gpu_compatible", "--csv_file=", "--json_dir="], tmp_path)
    assert code == 0, lines
    assert ("TensorFlow had started in this process before this run's settings, so these did "
            "not apply: %d intra-op threads; pinned host buffers (--force_gpu_compatible)"
            % threads) in lines


@pytest.mark.parametrize("flags,gpus,cpus,want", [
    ({}, 8, 64, 32),                                  # 64 - 8 x 2 GPU threads - 8 x 2
    ({}, 1, 8, 4),                                    # 8 - 2 - 2
    ({"per_gpu_thread_count": 4}, 8, 64, 16),         # 64 - 8 x 4 - 8 x 2
    ({"gpu_thread_mode": "global"}, 2, 16, 8),        # the GPU threads counted in every mode
    ({}, 4, 8, 1),                                    # at least 1
    ({"datasets_num_private_threads": 3}, 8, 64, 3),  # the flag wins
    ({"datasets_num_private_threads": 0}, 8, 64, None),   # 0: TensorFlow's shared threads
    ({}, 0, 64, None),                                # a CPU run: the shared threads
])
def test_tf_data_private_pool_follows_the_legacy_arithmetic(flags, gpus, cpus, want):
    p = make_settings(dict(flags, model="trivial"))
    assert gpu_env.private_threads(p, gpus, cpus)[0] == want


def test_the_private_pool_says_where_its_size_comes_from():
    p = make_settings({"model": "trivial"})
    assert gpu_env.private_threads(p, 2, 16) == (
        8, "the legacy default on GPUs: 16 usable CPUs - 4 GPU threads - 4 for monitoring and transfers")


FORCE_GPU_COMPATIBLE_CHECK = """
import sys, tensorflow as tf
from tensorflow.python.eager import context
from tfbench.config.settings import make_settings
from tfbench.distribute import devices
p = make_settings({"model": "trivial", "force_gpu_compatible": sys.argv[1] == "1"})
plan = devices.DeviceSet("cpu", 1, ("/cpu:0",), "NHWC")
assert devices.configure_runtime(p, plan) == []
tf.constant(1.0)   # the runtime starts with the context's ConfigProto
config = context.context().config
print("RESULT", config.gpu_options.force_gpu_compatible, config.device_count["CPU"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("given", [True, False])
def test_force_gpu_compatible_reaches_the_config_the_runtime_starts_with(given):
    """The legacy flag was accepted and ignored; TensorFlow reads the option when it creates
    its CPU device (pinned host memory when a GPU is present), so it must be in the ConfigProto
    the eager context hands over at start, and nothing else of that config may change."""
    import zygote
    from helpers import ROOT
    out = zygote.run(["1" if given else "0"], ROOT, dict(os.environ, PYTHONPATH=ROOT), 300,
                     merged=False, code=FORCE_GPU_COMPATIBLE_CHECK)
    assert out.returncode == 0, out.stderr[-2000:]
    assert ("RESULT %s 1" % given) in out.stdout
