"""The environment record as text (tfbench/output/environment.py): the summary lines a run's log
opens with, the full text report and the lines of what changed during a run."""

from helpers import environment_record
from tfbench.measure import environment
from tfbench.output import environment as environment_text

GB = 1 << 30


def test_summary_lines_format():
    lines = environment_text.summary_lines(environment_record(is_vm=True, hypervisor="kvm",
                                                cloud="Google Compute Engine"))
    assert lines == [
        "tfbench 0.1.0 (git 0123456789, modified) | TensorFlow 2.21.0 (v2.21.0-0-gabc, "
        "CUDA 12.5.1, cuDNN 9) | Keras 3.15.1 | Python 3.11.7",
        "GPU: none visible to NVML (no NVIDIA driver: NVML library not found)",
        "CPU: AMD EPYC 7B13 (8 logical / 4 physical cores), 32.0 GiB RAM | Linux 6.1.0 "
        "(Ubuntu 22.04.4 LTS) | VM: kvm, Google Compute Engine | container: docker "
        "(NVIDIA TensorFlow 25.02-tf2)",
        "Env: TF_GPU_THREAD_MODE=gpu_private",
    ]
    bare = environment_text.summary_lines(environment_record(cloud="Amazon EC2"))
    assert bare[2].endswith("| Amazon EC2 (bare metal) | container: docker "
                            "(NVIDIA TensorFlow 25.02-tf2)")


def test_text_report_lists_fields():
    env = environment.capture(["tfbench", "--model=resnet50"], import_tf=False)
    text = environment_text.text_report(env)
    assert "cpu.logical_cores:" in text and "tfbench.version:" in text


def test_summary_lines_with_gpus_limits_and_long_variables():
    env = environment_record()
    env["tfbench"] = {"version": "0.1.0"}
    env["tensorflow"] = {"version": "2.17.1", "build": {}}
    env["nvidia"] = {"available": True, "driver_version": "550.54.15",
                     "cuda_driver_version": "12.4", "gpus": [
                         {"name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GB,
                          "pcie_gen_max": 5, "pcie_width_max": 16, "nvlink_active_links": 18},
                         {"name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GB},
                         {"name": None}]}
    env["cpu"] = {"model": "Intel Xeon", "logical_cores": 16, "physical_cores": 8,
                  "usable_cores": 4, "cgroup_cpu_limit": 2.5}
    env["memory"] = {}
    env["os"] = {"system": "Linux", "kernel": "5.15"}
    env["container"] = {"in_container": True, "runtime": "podman"}
    env["virtualization"] = {"is_vm": True, "hypervisor": "unknown"}
    env["env_vars"] = {"XLA_FLAGS": "x" * 300}
    assert environment_text.summary_lines(env) == [
        "tfbench 0.1.0 | TensorFlow 2.17.1 | Keras 3.15.1 | Python 3.11.7",
        "GPU: 2 x NVIDIA H100 80GB HBM3 (80.0 GiB, PCIe gen5 x16, 18 NVLinks), 1 x unknown GPU "
        "| driver 550.54.15 (CUDA 12.4)",
        "CPU: Intel Xeon (16 logical / 8 physical cores, 4 usable, cgroup limit 2.5) | Linux "
        "5.15 | VM | container: podman",
        "Env: XLA_FLAGS=" + "x" * 187 + "..."]
    env["nvidia"] = {"available": True, "driver_version": "550", "gpus": []}
    env["env_vars"] = {"A": "1", "B": "x" * 194}            # 200 characters: shown whole
    lines = environment_text.summary_lines(env)
    assert lines[1] == "GPU: none | driver 550"
    assert lines[3] == "Env: A=1 B=" + "x" * 194
    env["tfbench"] = {"version": "0.1.0", "git_hash": "0123456789abcdef", "git_dirty": False}
    env["tensorflow"]["build"] = {"cudnn_version": "9"}
    assert environment_text.summary_lines(env)[0].startswith(
        "tfbench 0.1.0 (git 0123456789) | TensorFlow 2.17.1 (cuDNN 9) |")
    env["virtualization"] = {"cloud": "Amazon EC2"}
    assert environment_text.summary_lines(env)[2].startswith("CPU: Intel Xeon (16 logical")
    assert environment_text.summary_lines(env)[2].endswith(
        "| Linux 5.15 | Amazon EC2 (bare metal) | container: podman")
    env["virtualization"] = {"is_vm": True, "hypervisor": "unknown"}
    env["nvidia"], env["env_vars"] = {}, {}
    assert environment_text.summary_lines(env)[1:] == [
        "GPU: none visible to NVML (not available)", lines[2]]


def test_text_report_aligns_every_field():
    text = environment_text.text_report({"a": {"b": 1, "long_name": None}, "c": "x"})
    assert text.splitlines() == ["a.b:          1", "a.long_name:  ", "c:            x"]
    wide = environment_text.text_report({"k" * 60: 1, "b": 2}).splitlines()
    assert wide == ["k" * 60 + ":  1", "b:" + " " * 49 + "2"]   # labels pad to 49 at most
    assert environment_text.change_lines([{"field": "f"}]) == [
        "Environment changed during the run: f: <unset> -> <unset>"]
