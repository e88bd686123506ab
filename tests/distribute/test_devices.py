"""Device plans: what asks for GPUs when none is visible, and which GPUs name the run.

This machine has no GPU, so the no-GPU paths run for real; GPUs are stand-ins whose CUDA names
come from a patched tf.config.experimental.get_device_details (what devices.py reads).
"""

import pytest
import tensorflow as tf

from helpers import FakeGpu
from helpers import A100_DRIVER, FakeNvml, a100
from tfbench.distribute import devices
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings

CUDA12 = {"is_cuda_build": True, "cuda_version": "12.5.1"}


@pytest.fixture
def gpus(monkeypatch):
    """Installs stand-in GPUs: gpus(['NVIDIA A100-SXM4-40GB', ...])."""
    def install(models):
        fakes = [FakeGpu(i, m) for i, m in enumerate(models)]
        monkeypatch.setattr(devices, "visible_gpus", lambda: fakes)
        monkeypatch.setattr(tf.config.experimental, "get_device_details",
                            lambda gpu: {"device_name": gpu.model})
        return fakes
    return install


# --- no GPU visible ---------------------------------------------------------------------------

@pytest.mark.parametrize("flags, request_flag", [
    ({"num_gpus": 8}, "--num_gpus=8"),
    ({"num_gpus": 2, "variable_update": "replicated", "all_reduce_spec": "nccl"},
     "--num_gpus=2"),
    ({"gpu_indices": "0"}, "--gpu_indices=0"),
    ({"gpu_indices": "1,2", "num_gpus": 2}, "--gpu_indices=1,2"),
    ({"device": "gpu"}, "--device=gpu"),
    ({"device": "GPU", "num_gpus": 1}, "--device=gpu"),
])
def test_a_gpu_request_without_a_gpu_is_refused(flags, request_flag):
    assert devices.visible_gpus() == []
    with pytest.raises(UsageError) as err:
        devices.select_devices(make_settings(flags))
    message = str(err.value)
    assert message.startswith("%s asks for GPUs but none is visible (TensorFlow sees none; "
                              % request_flag)
    assert "--gpus all" in message and "CUDA_VISIBLE_DEVICES" in message
    assert "Add --device=cpu to run on the CPU" in message and "\n" not in message


@pytest.mark.parametrize("flags", [
    {},
    {"num_gpus": 1},
    # The legacy one-GPU line: one device has nothing to all-reduce.
    {"model": "resnet50", "num_gpus": 1, "variable_update": "replicated",
     "all_reduce_spec": "nccl"},
    {"num_gpus": 1, "all_reduce_spec": "nccl", "variable_update": "replicated",
     "hierarchical_copy": False},
])
def test_the_single_device_default_falls_back_to_the_cpu_and_says_so(flags):
    plan = devices.select_devices(make_settings(flags))
    assert (plan.kind, plan.num_devices, plan.names) == ("cpu", 1, ("/cpu:0",))
    assert plan.notices == ("No GPU visible: running on CPU (--device=cpu)",)


def test_explicit_cpu_devices_are_not_a_gpu_request():
    plan = devices.select_devices(make_settings({"device": "cpu", "num_gpus": 4}))
    assert (plan.kind, plan.num_devices, plan.notices) == ("cpu", 4, ())
    plan = devices.select_devices(make_settings({"device": "cpu", "gpu_indices": "1"}))
    assert plan.notices == ("--gpu_indices=1 has no effect on the CPU; ignored",)


@pytest.mark.parametrize("build, nvml, environ, seen, cause", [
    (CUDA12, FakeNvml([], init_error=12), {},
     "NVML: no NVIDIA driver: NVML library not found; TensorFlow built for CUDA 12.5.1",
     "no NVIDIA driver, or one older than CUDA 12 needs (525.60.13 or newer)"),
    (CUDA12, FakeNvml([a100("GPU-0"), a100("GPU-1")], system=A100_DRIVER), {"CUDA_VISIBLE_DEVICES": ""},
     "CUDA_VISIBLE_DEVICES=''; NVML: 2 x NVIDIA A100-SXM4-40GB, driver 550.54.15 (CUDA 12.4); "
     "TensorFlow built for CUDA 12.5.1",
     "CUDA_VISIBLE_DEVICES hiding the GPUs"),
    ({"is_cuda_build": False}, FakeNvml([a100("GPU-0")], system=A100_DRIVER), {},
     "NVML: 1 x NVIDIA A100-SXM4-40GB, driver 550.54.15 (CUDA 12.4)",
     "this TensorFlow has no GPU support (tensorflow-cpu, or a CPU wheel): install "
     "tensorflow[and-cuda]"),
])
def test_the_message_names_what_is_visible(build, nvml, environ, seen, cause):
    message = devices.no_gpu_message("--num_gpus=2", environ, build, nvml)
    assert ("(TensorFlow sees none; %s)" % seen) in message
    assert cause in message


# --- which GPUs name the run -------------------------------------------------------------------

def test_device_name_is_the_model_of_the_gpus_used_not_gpu_0(gpus):
    gpus(["NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"])
    plan = devices.DeviceSet("gpu", 2, ("/gpu:0", "/gpu:1"), "NCHW", gpu_indices=(2, 3))
    assert devices.device_name(plan) == "NVIDIA H100 80GB HBM3"
    plan = devices.DeviceSet("gpu", 1, ("/gpu:0",), "NCHW", gpu_indices=(1,))
    assert devices.device_name(plan) == "Tesla T4"


def test_the_plan_records_the_chosen_models(gpus):
    gpus(["Tesla T4", "NVIDIA L4", "NVIDIA L4"])
    plan = devices.select_devices(make_settings({"device": "gpu", "gpu_indices": "1,2"}))
    assert plan.gpu_indices == (1, 2) and plan.gpu_models == ("NVIDIA L4", "NVIDIA L4")
    assert plan.notices == () and devices.device_name(plan) == "NVIDIA L4"


@pytest.mark.parametrize("flags, count, indices", [
    ({"gpu_indices": "0,1,2"}, 3, (0, 1, 2)),         # --num_gpus left at its default of 1
    ({"gpu_indices": "3,1", "num_gpus": 2}, 2, (3, 1)),
    ({"num_gpus": 2}, 2, (0, 1)),
    ({"device": "cpu", "gpu_indices": "1", "num_gpus": 2}, 2, ()),
])
def test_the_plan_has_the_devices_the_flags_ask_for(gpus, flags, count, indices):
    """The count a study reads from the flags alone (config.settings.Asks.devices)."""
    gpus(["NVIDIA L4"] * 4)
    p = make_settings(flags)
    plan = devices.select_devices(p)
    assert (plan.num_devices, plan.gpu_indices) == (count, indices)
    assert p.asks.devices == count


@pytest.mark.parametrize("flags, message", [
    ({"gpu_indices": "0,1", "num_gpus": 3}, "--gpu_indices names 2 GPUs but --num_gpus=3"),
    ({"gpu_indices": "0,0"}, "--gpu_indices='0,0' must name distinct GPUs by index (0, 1, ...)"),
])
def test_indices_the_flags_cannot_count_are_refused_alike(gpus, flags, message):
    gpus(["NVIDIA L4"] * 4)
    p = make_settings(flags)
    for count in (devices.select_devices, lambda settings: settings.asks.devices):
        with pytest.raises(UsageError) as exc:
            count(p)
        assert str(exc.value) == message


def test_a_mig_slice_is_said(gpus):
    gpus(["NVIDIA A100-SXM4-40GB MIG 1g.5gb"])
    plan = devices.select_devices(make_settings({}))
    assert plan.notices == (
        "GPU 0 is a MIG slice (NVIDIA A100-SXM4-40GB MIG 1g.5gb): it has a fraction of the GPU's "
        "SMs and memory, so there is no datasheet peak (MFU needs --peak_tflops or `tfbench "
        "peak` on the slice) and no published expected range",)
    assert devices.device_name(plan) == "NVIDIA A100-SXM4-40GB MIG 1g.5gb"


def test_gpus_of_different_models_are_said_and_named_together(gpus):
    gpus(["NVIDIA A100-SXM4-40GB", "Tesla T4"])
    plan = devices.select_devices(make_settings({"num_gpus": 2}))
    assert plan.notices == ("The GPUs used are of different models (NVIDIA A100-SXM4-40GB, "
                            "Tesla T4): no one datasheet peak or published expected range "
                            "describes them",)
    name = devices.device_name(plan)
    assert name == "NVIDIA A100-SXM4-40GB + Tesla T4"
    from tfbench.measure import peak
    from tfbench.measure import expected_range
    assert peak.gpu_peak(name, "fp16") is None
    assert expected_range.expected_range(name, "resnet50", "training", "fp16", 2, 1.0) == \
        (None, "")


def test_a_slurm_task_drives_every_gpu_it_sees_unless_num_gpus_is_given(gpus, monkeypatch):
    """Slurm binds the job's GPUs through CUDA_VISIBLE_DEVICES; the count reaches
    MultiWorkerMirroredStrategy as the resolver's num_accelerators (strategy._multi_host passes
    the plan's GPU count)."""
    from slurm_env import SLURM_TASK_2
    from tfbench.distribute import cluster
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in dict(SLURM_TASK_2, CUDA_VISIBLE_DEVICES="4,5,6,7").items():
        monkeypatch.setenv(name, value)
    gpus(["NVIDIA H100 80GB HBM3"] * 4)
    plan = devices.select_devices(make_settings({}))
    assert plan.num_devices == 4 and plan.names == ("/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3")
    assert plan.notices == ("Slurm step: this task drives the 4 GPU(s) it sees (--num_gpus=4; "
                            "CUDA_VISIBLE_DEVICES=4,5,6,7)",)
    resolver = cluster.read_cluster(make_settings({})).resolver(num_gpus=plan.num_devices)
    assert resolver.num_accelerators() == {"GPU": 4}
    assert devices.select_devices(make_settings({"num_gpus": 2})).num_devices == 2
    # A one-node step given its cluster by flags (scripts/sbatch_scaling.sh): the same GPUs.
    flags = {"job_name": "worker", "worker_hosts": "dgx8:12000", "task_index": 0}
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")
    assert devices.select_devices(make_settings(flags)).num_devices == 4
    # Slurm bound no GPU: the node's GPUs may be other jobs', so the default of one, said so.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    plan = devices.select_devices(make_settings(flags))
    assert plan.num_devices == 1 and plan.notices == (
        "Slurm step: no GPU bound to this task (CUDA_VISIBLE_DEVICES unset; ask with "
        "--gpus-per-node or --gres): running the default --num_gpus=1",)
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS")   # not a step: the --num_gpus default
    assert devices.select_devices(make_settings({})).num_devices == 1
