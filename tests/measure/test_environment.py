import json
import os
import shutil
import subprocess

import pytest

import tfbench
from helpers import A100_DRIVER, FakeNvml, a100, environment_record
from tfbench.measure import environment
from tfbench.output import environment as environment_text

GB = 1 << 30


@pytest.fixture(scope="module")
def env():
    return environment.capture(["tfbench", "--model=resnet50", "--batch_size=64"],
                               import_tf=False)


def test_capture_has_every_section_and_is_json(env):
    for key in ("captured_at", "hostname", "command", "argv", "env_vars", "tfbench", "python",
                "tensorflow", "keras", "nvidia", "cpu", "memory", "os", "virtualization",
                "container", "capture_sec", "nvidia_packages"):
        assert key in env, key
    json.dumps(env)
    assert env["command"] == "tfbench --model=resnet50 --batch_size=64"
    assert env["tfbench"]["version"] == tfbench.__version__
    assert env["tensorflow"]["version"].startswith("2.")
    assert env["keras"]["version"].startswith("3.")
    assert env["python"]["version"].count(".") == 2
    assert env["cpu"]["logical_cores"] >= 1
    assert env["memory"]["total_bytes"] > GB
    assert env["os"]["system"] == "Linux" and env["os"]["kernel"]


def _fake_dist(site, name, version):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                                   % (name, version))


def test_nvidia_packages_found_by_their_metadata_directories(tmp_path, monkeypatch):
    _fake_dist(tmp_path, "nvidia-cublas-cu12", "12.4.5.8")
    _fake_dist(tmp_path, "nvidia-ml-py", "12.560.30")
    _fake_dist(tmp_path, "numpy-nvidia-fork", "1.0")   # not an nvidia- package
    monkeypatch.syspath_prepend(str(tmp_path))
    found = environment._nvidia_packages()
    assert found["nvidia-cublas-cu12"] == "12.4.5.8"
    assert found["nvidia-ml-py"] == "12.560.30"
    assert "numpy-nvidia-fork" not in found
    assert list(found) == sorted(found)


def test_no_driver_is_not_available(env):
    if env["nvidia"]["available"]:
        pytest.skip("this machine has an NVIDIA driver")
    assert env["nvidia"]["available"] is False
    assert env["nvidia"]["reason"]
    assert environment_text.summary_lines(env)[1].startswith("GPU: none visible to NVML (")


def test_tf_details_when_imported():
    import tensorflow as tf
    env = environment.capture([], import_tf=False)  # already imported: used as is
    assert env["tensorflow"]["git_version"] == tf.version.GIT_VERSION
    # What the installed wheel is: the full tensorflow wheel (the test command's) is a CUDA build
    # even without a GPU, tensorflow-cpu is not; TensorFlow's C++ side says which, independently
    # of the build_info module capture() reads.
    assert env["tensorflow"]["build"]["is_cuda_build"] is tf.test.is_built_with_cuda()
    if env["tensorflow"]["distribution"] == "tensorflow-cpu":
        assert env["tensorflow"]["build"]["is_cuda_build"] is False


@pytest.mark.slow
def test_git_hash_of_checkout(env):
    root = os.path.dirname(os.path.dirname(os.path.abspath(tfbench.__file__)))
    if shutil.which("git") is None or not os.path.isdir(os.path.join(root, ".git")):
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True).stdout.strip()
    assert env["tfbench"]["git_hash"] == head
    assert env["tfbench"]["git_dirty"] in (True, False)


def test_git_hash_none_outside_a_checkout(tmp_path, monkeypatch):
    (tmp_path / "tfbench").mkdir()
    monkeypatch.setattr(tfbench, "__file__", str(tmp_path / "tfbench" / "__init__.py"))
    info = environment._tfbench()
    assert info["git_hash"] is None and info["git_dirty"] is None


def test_gpu_info_from_nvml():
    fake = FakeNvml([a100("GPU-0"), a100("GPU-1")], system=A100_DRIVER)
    env = environment.capture([], import_tf=False, nvml=fake)
    nv = env["nvidia"]
    assert nv["available"] and nv["driver_version"] == "550.54.15"
    assert [g["name"] for g in nv["gpus"]] == ["NVIDIA A100-SXM4-40GB"] * 2
    assert nv["gpus"][1]["nvml_index"] == 1 and nv["gpus"][0]["nvlink_active_links"] == 12
    assert fake.shutdowns == fake.inits == 1
    assert environment_text.summary_lines(env)[1] == (
        "GPU: 2 x NVIDIA A100-SXM4-40GB (40.0 GiB, PCIe gen4 x16, 12 NVLinks) | "
        "driver 550.54.15 (CUDA 12.4)")


def test_capture_never_raises(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("probe failed")

    monkeypatch.setattr(environment, "_cpu", boom)
    monkeypatch.setattr(environment, "_os", boom)
    env = environment.capture([], import_tf=False)
    assert env["cpu"] == {} and env["os"] == {}
    environment_text.summary_lines(env)
    environment.vm_warning(env)


def test_env_vars_filtered():
    got = environment.relevant_env_vars({
        "TF_XLA_FLAGS": "--tf_xla_auto_jit=2", "XLA_FLAGS": "--xla_dump_to=/tmp",
        "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "4",
        "KMP_BLOCKTIME": "0", "HOME": "/root", "PATH": "/bin",
        "TF_VAR_db_pass": "hunter2", "TF_CLI_CONFIG_FILE": "/root/.terraformrc",
        "NCCL_IB_AUTH_KEY": "s3cret", "TF_API_TOKEN": "t",
    })
    assert got == {"CUDA_VISIBLE_DEVICES": "0,1", "KMP_BLOCKTIME": "0", "NCCL_DEBUG": "INFO",
                   "OMP_NUM_THREADS": "4", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2",
                   "XLA_FLAGS": "--xla_dump_to=/tmp"}


def test_container_nvidia_variables(monkeypatch):
    monkeypatch.setenv("NVIDIA_TENSORFLOW_VERSION", "25.02-tf2")
    monkeypatch.setenv("NVIDIA_BUILD_ID", "138512873")
    monkeypatch.setenv("CUDNN_VERSION", "9.7.1.26")
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-secret")
    c = environment._container()
    assert c["nvidia_image"] == "25.02-tf2"
    assert c["version_vars"]["NVIDIA_BUILD_ID"] == "138512873"
    assert c["version_vars"]["CUDNN_VERSION"] == "9.7.1.26"
    assert "NVIDIA_API_KEY" not in c["version_vars"]


def test_arm_cpu_model(monkeypatch):
    cpuinfo = ("processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve2\n"
               "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd4f\n\n"
               "processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n")
    real_read = environment._read
    monkeypatch.setattr(environment, "_read",
                        lambda p: cpuinfo if p == "/proc/cpuinfo" else real_read(p))
    cpu = environment._cpu()
    assert cpu["model"] == "Arm Neoverse-V2" and cpu["hypervisor_flag"] is False


def test_vm_warning():
    vm = environment_record(is_vm=True, hypervisor="kvm", cloud="Amazon EC2")
    assert environment.vm_warning(vm) == (
        "Running in a virtual machine (kvm, Amazon EC2): virtualised disk and network I/O make "
        "real-data results noisy; prefer synthetic data (omit --data_dir) when comparing "
        "hardware")
    assert environment.vm_warning(vm, using_real_data=False) is None
    assert environment.vm_warning(environment_record()) is None
    unknown = environment_record(is_vm=True, hypervisor="unknown")
    assert "(hypervisor detected)" in environment.vm_warning(unknown)


def test_this_machine_is_detected_as_vm(env):
    # The development machines are KVM guests (cpuinfo hypervisor flag).
    if env["cpu"].get("hypervisor_flag"):
        assert env["virtualization"]["is_vm"] is True
        assert environment.vm_warning(env).startswith("Running in a virtual machine")


def test_diff_flags_changes_and_ignores_volatile():
    before = environment_record()
    before.update(captured_at="t0", capture_sec=0.1,
                  memory={"total_bytes": 1, "available_bytes": 5})
    before["nvidia"] = {"available": True, "driver_version": "550.54.15",
                        "gpus": [{"name": "A100", "power_limit_w": 400.0,
                                  "applications_sm_clock_mhz": 1410, "pcie_gen_current": 4}]}
    after = json.loads(json.dumps(before))
    after.update(captured_at="t1", capture_sec=0.2)
    after["memory"]["available_bytes"] = 3
    after["nvidia"]["gpus"][0]["pcie_gen_current"] = 1
    assert environment.diff(before, after) == []
    after["nvidia"]["gpus"][0]["power_limit_w"] = 300.0
    after["nvidia"]["gpus"][0]["applications_sm_clock_mhz"] = 1095
    after["env_vars"]["XLA_FLAGS"] = "--xla_gpu_autotune_level=0"
    assert environment_text.change_lines(environment.diff(before, after)) == [
        "Environment changed during the run: env_vars.XLA_FLAGS: <unset> -> "
        "--xla_gpu_autotune_level=0",
        "Environment changed during the run: nvidia.gpus.0.applications_sm_clock_mhz: "
        "1410 -> 1095",
        "Environment changed during the run: nvidia.gpus.0.power_limit_w: 400.0 -> 300.0",
    ]
    # The figures: the field, and its values before and after (absent when it was unset).
    assert environment.diff(before, after)[0] == {"field": "env_vars.XLA_FLAGS",
                                                  "after": "--xla_gpu_autotune_level=0"}
    assert environment.diff(before, after)[2] == {"field": "nvidia.gpus.0.power_limit_w",
                                                  "before": 400.0, "after": 300.0}
    assert len(environment.diff(before, after, ignore=["env_vars.*"])) == 2
