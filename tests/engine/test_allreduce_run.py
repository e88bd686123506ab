"""The all-reduce probe with sizes (tfbench.engine.allreduce_run): its JSON by hand, and
--validate_allreduce_json in a training run on two logical CPU devices, on the run's own
strategy and model, beside the device checks --validate_device_checks chose; a probe that fails
there is the file's error and a notice, and the run's figures stand."""

import json
import os

import pytest

import zygote
from helpers import ROOT, FakeNvml, NVMLError, only_row
from tfbench.distribute import allreduce_probe
from tfbench.engine import allreduce_run, explain

TWO_DEVICES = ["--device=cpu", "--num_gpus=2", "--model=trivial", "--image_size=16",
               "--batch_size=2", "--variable_update=replicated", "--num_batches=2", "--num_warmup_batches=1",
               "--csv_file=r.csv", "--json_dir=runs"]


def test_the_json_holds_the_table_and_the_links():
    summary = {"median_ms": 2.0, "spread_pct": 12.5}
    probe = allreduce_run.AllReduceProbe(
        8, 1, "NCCL all-reduce", [], [allreduce_probe.Timing(
            "64 MiB", 1, 64 << 20, "float32", 8, (0.002,), summary)],
        "NVLink 4.0 x18; expected busbw from NVSwitch", 450.0)
    data = json.loads(json.dumps(probe.to_json()))
    assert (data["ranks"], data["expected_busbw_gbs"], data["link"]) == (
        8, 450.0, "NVLink 4.0 x18; expected busbw from NVSwitch")
    (t,) = data["timings"]
    # 64 MiB in 2 ms: 33.55 GB/s algbw; busbw x 2 (8 - 1) / 8 = 58.72 GB/s
    assert (t["bytes"], t["time_ms"], t["at_variables"], t["per_sync"]) == (
        64 << 20, 2.0, False, 1)
    assert t["algbw_gbs"] == pytest.approx(33.554432)
    assert t["busbw_gbs"] == pytest.approx(33.554432 * 1.75)


def test_the_sizes_validate_times():
    # On GPUs up to 1 GiB, where busbw nears the links' rate; 1 KiB to 1 MiB on CPU devices;
    # x4 each; calls of 10 all-reduces each
    assert allreduce_run.VALIDATE_SIZES["gpu"] == allreduce_run.Sizes(1024, 1 << 30, 4, 5, 1)
    assert allreduce_run.VALIDATE_SIZES["cpu"] == allreduce_run.Sizes(1024, 1 << 20, 4, 3, 1)
    assert [t.label for t in allreduce_probe.size_sets(1024, 1 << 30, 4)][-3:] == [
        "64 MiB", "256 MiB", "1 GiB"]


GIB = 1 << 30
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": [9, 0], "memory": [3 * GIB, 80 * GIB]}


def _held(**current):
    """get_memory_info as TensorFlow's allocator answers it: bytes held per device."""
    def memory_info(device):
        return {"current": current[device.replace(":", "")], "peak": 0}
    return memory_info


def test_a_gpus_room_is_its_memory_for_tensorflow_less_what_tensorflow_holds():
    nvml = FakeNvml([dict(H100, uuid="GPU-%d" % i) for i in range(3)])
    # The run's GPUs 1 and 2 (its devices 0 and 1): 80 GiB, 2.5 GiB of it not TensorFlow's
    # (its reserve for the system, the CUDA context); TensorFlow holds 10 and 70 GiB.
    room = allreduce_run.gpu_room(["/gpu:0", "/gpu:1"], [1, 2],
                                  memory_info=_held(GPU0=10 * GIB, GPU1=70 * GIB), nvml=nvml,
                                  environ={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert room == (int(80 * GIB - 2.5 * GIB - 70 * GIB), "GPU 2")
    # --gpu_memory_limit_mb is the memory TensorFlow has.
    assert allreduce_run.gpu_room(["/gpu:0"], [0], limit_mb=16384,
                                  memory_info=_held(GPU0=GIB)) == (15 * GIB, "GPU 0")


def test_a_room_not_known_says_why():
    def no_stats(device):
        raise ValueError("Allocator stats not available for device 'GPU:0'")
    assert allreduce_run.gpu_room(["/gpu:0"], [0], memory_info=no_stats, nvml=FakeNvml([H100])) \
        == (None, "TensorFlow's allocator of GPU:0: Allocator stats not available for device "
                  "'GPU:0'")
    assert allreduce_run.gpu_room(["/gpu:0"], [0], memory_info=_held(GPU0=0),
                                  nvml=FakeNvml([H100], init_error=9)) == (
        None, "NVIDIA driver not loaded")


def test_sizes_without_room_are_left_out_with_a_notice():
    import tensorflow as tf
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    sets = allreduce_probe.size_sets(256 << 20, 1 << 30, 4)     # 256 MiB, 1 GiB
    # 4 copies each: 1 GiB and 4 GiB; with 3 GiB free the 1 GiB set is left out.
    kept, notices = allreduce_run.fitting_sets(one, sets, (3 * GIB, "GPU 5"))
    assert [t.label for t in kept] == ["256 MiB"]
    assert notices == ["sizes: 1 GiB left out: each replica would hold 4 GiB (4 copies of the "
                       "tensor) and GPU 5 has 3 GiB free for TensorFlow"]
    assert allreduce_run.fitting_sets(one, sets, (4 * GIB, "GPU 5")) == (sets, [])
    assert allreduce_run.fitting_sets(one, sets, (None, "NVIDIA driver not loaded")) == (
        sets, ["sizes: the GPUs' free memory is not known (NVIDIA driver not loaded): no size "
               "is left out for want of it"])


def _env(**more):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **more,
                PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))


def _manifest(tmp_path):
    (name,) = os.listdir(tmp_path / "runs")
    with open(tmp_path / "runs" / name) as handle:
        return json.load(handle)


@pytest.mark.slow
def test_a_training_run_times_the_all_reduce_after_the_checks_it_was_given(tmp_path):
    proc = zygote.run(TWO_DEVICES + ["--validate_devices", "--validate_device_checks=kernels",
                                     "--validate_allreduce_json=ar.json"],
                      tmp_path, _env(), 300, merged=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "ar.json") as handle:
        data = json.load(handle)
    assert (data["ranks"], data["workers"]) == (2, 1)
    assert [t["label"] for t in data["timings"]] == [
        "trivial gradients", "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB"]
    assert [t["bytes"] for t in data["timings"][1:]] == [1024 * 4 ** i for i in range(6)]
    assert all(t["busbw_gbs"] > 0 and t["time_ms"] > 0 for t in data["timings"])
    # trivial's gradients at 16 px: its 4,110,058 float32 parameters (the run's Model stats)
    assert data["timings"][0]["bytes"] == 4 * 4110058
    assert (data["link"], data["expected_busbw_gbs"]) == ("", None)   # CPU devices
    # the kernels only, on both devices
    extra = _manifest(tmp_path)["extra"]
    assert extra["device_checks_run"] == ["kernels"]
    for entry in extra["device_checks"]:
        assert entry["alone_ms"] is None and entry["agrees"] is None
        assert entry["matmul_tflops"] > 0 and entry["conv_tflops"] > 0
    assert "slowest_alone_device" not in extra and "devices_differing" not in extra
    lines = proc.stdout.splitlines()
    assert "Checking each device alone: a matmul and a 3x3 convolution in fp32" in lines
    assert "Timing the all-reduce alone: trivial's gradients, then sizes up to 1 MiB" in lines
    assert lines[-1] == "-" * 64
    assert float(only_row(tmp_path / "r.csv")["images_per_sec"]) > 0


# Every all-reduce probe fails as NCCL fails; the run's own steps reduce as usual.
_PROBE_FAILS = """
import sys
import tensorflow as tf
from tfbench.distribute import allreduce_probe

def time_all_reduce(*args, **kwargs):
    raise tf.errors.InternalError(None, None, "NCCL failure: unhandled system error")

allreduce_probe.time_all_reduce = time_all_reduce
from tfbench.cli import entry_point
sys.argv = ["tfbench"] + sys.argv[1:]
entry_point()
"""


@pytest.mark.slow
def test_a_failed_probe_is_the_files_error_and_the_run_stands(tmp_path):
    path = tmp_path / "tfbench-nccl-1.log"
    path.write_text("host:1:1 [0] NCCL WARN Call to ibv_reg_mr failed\n")
    proc = zygote.run(TWO_DEVICES + ["--validate_allreduce_json=ar.json"], tmp_path,
                      _env(**{explain.NCCL_LOG_ENV: str(path)}), 300, merged=False,
                      code=_PROBE_FAILS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "ar.json") as handle:
        data = json.load(handle)
    error = ("TensorFlow's runtime failed in the all-reduce probe: NCCL failure: unhandled "
             "system error; NCCL's log (1 warning) is kept in %s" % path)
    assert data == {"error": error, "timings": []}
    row = only_row(tmp_path / "r.csv")
    assert row["status"] == "ok" and float(row["images_per_sec"]) > 0
    assert "--validate_allreduce_json: %s; the run's own figures stand" % error in row["notices"]
