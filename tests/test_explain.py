"""--explain_scaling's engine side (tfbench.engine.explain): when the probes apply, NCCL's log
captured for them on GPUs, the run's own split and its console lines. The probes themselves run
in test_explain_injected.py (a run on logical devices, with a known cost injected)."""

import dataclasses

import pytest

from tfbench.config.argv import parse_params
from tfbench.engine import explain
from tfbench.engine.plan import resolve
from tfbench.output import console
from tfbench.results import RunResult


def _plan(*flags, kind="cpu"):
    p = parse_params(["tfbench", "--device=cpu", "--model=trivial"] + list(flags))
    plan = resolve(p)
    return p, dataclasses.replace(plan, device=dataclasses.replace(plan.device, kind=kind))


def test_the_probes_apply_to_training_and_forward_only_runs(monkeypatch, tmp_path):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    p, plan = _plan("--explain_scaling", "--eval", "--train_dir=%s" % tmp_path)
    assert explain.prepare(p, plan) == [
        "--explain_scaling applies to training and forward-only runs; not in eval mode"]
    p, plan = _plan("--explain_scaling", "--forward_only")
    assert explain.prepare(p, plan) == []
    p, plan = _plan()
    assert explain.prepare(p, plan) == []


def test_on_gpus_nccl_logs_its_transport_to_a_file_of_its_own(monkeypatch, tmp_path):
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", explain.NCCL_LOG_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(explain.tempfile, "gettempdir", lambda: str(tmp_path))
    p, plan = _plan("--explain_scaling", kind="gpu")
    explain.prepare(p, plan)
    import os
    path = os.environ["NCCL_DEBUG_FILE"]
    assert (os.environ["NCCL_DEBUG"], os.environ["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
    assert os.path.dirname(path) == str(tmp_path)
    with open(path, "w") as handle:   # what NCCL 2.21 writes on one host with P2P over NVLink
        handle.write("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                     "h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    assert explain._nccl_transport() == "NCCL 2.21.5+cuda12.4: within a host P2P/IPC"
    assert not os.path.exists(path)   # read once, then removed


def test_a_users_own_nccl_debug_is_left_alone(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    monkeypatch.delenv(explain.NCCL_LOG_ENV, raising=False)
    p, plan = _plan("--explain_scaling", kind="gpu")
    explain.prepare(p, plan)
    import os
    assert os.environ["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_FILE" not in os.environ
    assert explain._nccl_transport() == ""


def _probed_result(**extra):
    res = RunResult(global_batch_size=64, images_per_sec=160.0, device_kind="gpu")
    res.extra.update(dict(dict(
        one_device_step_ms=320.0, slowest_device_step_ms=330.0, allreduce_ms=50.0,
        allreduce_mib=97.5, allreduce_algbw_gbs=2.0, allreduce_busbw_gbs=2.0,
        slowest_device="GPU 1", slowest_device_ratio=1.02, link="PCIe 3.0 x16",
        expected_busbw_gbs=15.76), **extra))
    return res


def test_the_run_is_split_against_its_own_one_device_probe_and_printed():
    res = _probed_result()
    res.extra["scaling_explained"] = explain.explain_run(res)
    e = res.extra["scaling_explained"]
    # 64 images at 160 images/sec: 400 ms; 320 alone, 330 together (+10), all-reduce 50: 20 left
    assert (e["step_ms"], e["reference_ms"], e["efficiency_pct"]) == (400.0, 320.0, 80.0)
    assert e["lost_ms"] == {"compute": 10.0, "input": 0.0, "allreduce": 50.0, "unexplained": 20.0}
    assert e["largest"] == "allreduce"
    lines = console.scaling_lines(res.extra)
    assert lines[0] == (
        "Scaling probes: all-reduce of 97.5 MiB: time 50.00 ms, algbw 2 GB/s, busbw 2 GB/s, "
        "expected up to 15.8 GB/s; one device alone 320.00 ms/step; slowest device with all at "
        "once 330.00 ms/step (GPU 1, 1.02x the median)")
    assert lines[1] == "Links: PCIe 3.0 x16"
    assert lines[2] == (
        "Scaling explained: 400.00 ms/step against 320.00 ms on one device alone (probe), 80.0% "
        "efficiency; points lost: slowest device's extra compute 2.5, input wait 0.0, "
        "all-reduce (not overlapped) 12.5, unexplained 5.0")
    assert lines[3].startswith("Largest cause: the all-reduce of 97.5 MiB takes 50.0 ms")


def test_a_parameter_server_run_shows_its_exchange_without_bandwidth():
    res = _probed_result(allreduce_algbw_gbs=None, allreduce_busbw_gbs=None)
    line = console.scaling_lines(res.extra)[0]
    assert line.startswith("Scaling probes: gradient sums at the variables' devices and "
                           "variable reads of 97.5 MiB: time 50.00 ms; one device alone")


def test_nothing_to_split_without_the_probes():
    assert explain.explain_run(RunResult(images_per_sec=10.0)) is None
    assert console.scaling_lines({}) == []


@pytest.mark.parametrize("kind,indices,label", [("gpu", (5, 7), "GPU 7"),
                                                ("cpu", (), "/cpu:1")])
def test_devices_are_named_as_the_user_names_them(kind, indices, label):
    _, plan = _plan("--num_gpus=2", "--device=cpu")
    device = dataclasses.replace(plan.device, kind=kind, gpu_indices=indices)
    assert explain.device_label(dataclasses.replace(plan, device=device), 1) == label


def test_each_device_probe_keeps_its_own_cuda_index():
    """A probe's plan names the GPU it runs on (what reads the plan's GPUs, such as the NVML
    monitors, then watches that one), not the run's first."""
    from tfbench.engine.train import TrainRunner
    p, plan = _plan("--num_gpus=2", "--device=cpu")
    plan = dataclasses.replace(plan, device=dataclasses.replace(plan.device,
                                                                gpu_indices=(5, 7)))
    runner = TrainRunner(p=p, plan=plan, strategy=None)
    probes = [explain.one_device_runner(runner, name, i)
              for i, name in enumerate(plan.device.names)]
    assert [r.plan.device.gpu_indices for r in probes] == [(5,), (7,)]
    assert [r.plan.device.names for r in probes] == [(n,) for n in plan.device.names]
