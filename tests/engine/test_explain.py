"""--explain_scaling's engine side (tfbench.engine.explain): when the probes apply, NCCL's log
captured for them on GPUs, the run's own split and its console lines. The probes themselves run
in test_explain_injected.py (a run on logical devices, with a known cost injected)."""

import dataclasses
import os

import pytest
import tensorflow as tf

import zygote
from helpers import ROOT, only_row, run_inprocess
from tfbench.config.argv import parse_settings
from tfbench.engine import explain
from tfbench.engine.resolved import resolve
from tfbench.measure import nccl_log
from tfbench.output import console
from tfbench.results import RunResult


def _plan(*flags, kind="cpu"):
    p = parse_settings(["tfbench", "--device=cpu", "--model=trivial"] + list(flags))
    plan = resolve(p)
    return p, plan.with_facts(device=dataclasses.replace(plan.device, kind=kind))


def test_the_probes_apply_to_training_and_forward_only_runs(monkeypatch, tmp_path):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    p, plan = _plan("--explain_scaling", "--eval", "--train_dir=%s" % tmp_path)
    assert explain.prepare(p, plan.facts) == [
        "--explain_scaling applies to training and forward-only runs; not in eval mode"]
    p, plan = _plan("--explain_scaling", "--forward_only")
    assert explain.prepare(p, plan.facts) == []
    p, plan = _plan()
    assert explain.prepare(p, plan.facts) == []


def test_on_gpus_nccl_logs_its_transport_to_a_file_of_its_own(monkeypatch, tmp_path):
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", explain.NCCL_LOG_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(explain.tempfile, "gettempdir", lambda: str(tmp_path))
    p, plan = _plan("--explain_scaling", kind="gpu")
    explain.prepare(p, plan.facts)
    import os
    path = os.environ["NCCL_DEBUG_FILE"]
    assert (os.environ["NCCL_DEBUG"], os.environ["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
    assert os.path.dirname(path) == str(tmp_path)
    with open(path, "w") as handle:   # what NCCL 2.21 writes on one host with P2P over NVLink
        handle.write("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                     "h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    assert nccl_log.describe(explain._nccl_log()) == "NCCL 2.21.5+cuda12.4: within a host P2P/IPC"
    assert not os.path.exists(path)   # read once, then removed


def test_a_users_own_nccl_debug_is_left_alone(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    monkeypatch.delenv(explain.NCCL_LOG_ENV, raising=False)
    p, plan = _plan("--explain_scaling", kind="gpu")
    explain.prepare(p, plan.facts)
    import os
    assert os.environ["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_FILE" not in os.environ
    assert explain._nccl_log() is None


@pytest.mark.parametrize("subsys,notices", [
    ("INIT,GRAPH", []),
    ("COLL", ["--explain_scaling: your NCCL_DEBUG_SUBSYS=COLL leaves out INIT, where NCCL names "
              "the transport it uses: the transport is not read"])])
def test_a_users_nccl_debug_subsys_is_kept(monkeypatch, tmp_path, subsys, notices):
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_FILE", explain.NCCL_LOG_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NCCL_DEBUG_SUBSYS", subsys)
    monkeypatch.setattr(explain.tempfile, "gettempdir", lambda: str(tmp_path))
    p, plan = _plan("--explain_scaling", kind="gpu")
    assert explain.prepare(p, plan.facts) == notices
    assert (os.environ["NCCL_DEBUG"], os.environ["NCCL_DEBUG_SUBSYS"]) == ("INFO", subsys)
    assert os.environ["NCCL_DEBUG_FILE"] == os.environ[explain.NCCL_LOG_ENV]


# What NCCL writes before a failed connection (NVIDIA/nccl-tests#166), and the message
# TensorFlow's NcclManager raises for it (NCCL_RETURN_IF_ERROR: "NCCL: " + ncclGetErrorString).
NCCL_WARNINGS = (
    "ubuntu:39964:40075 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    "\nubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
    "10.0.0.2<45763> failed : Software caused connection abort\n"
    "ubuntu:39964:40075 [0] NCCL INFO misc/socket.cc:564 -> 2\n"
    "\nubuntu:39964:40075 [0] proxy.cc:1519 NCCL WARN [Proxy Service 0] Failed to execute "
    "operation Connect from rank 0, retcode 2\n")
TF_NCCL_ERROR = ("NCCL: unhandled system error (run with NCCL_DEBUG=INFO for details). Set "
                 "NCCL_DEBUG=WARN for detail.")


def _nccl_log(monkeypatch, tmp_path, text):
    """The log prepare() has NCCL write on GPUs, with `text` in it."""
    path = tmp_path / "tfbench-nccl-1.log"
    path.write_text(text)
    monkeypatch.setenv(explain.NCCL_LOG_ENV, str(path))
    return path


@pytest.mark.parametrize("text,failure,kept", [
    (NCCL_WARNINGS, "anything", "NCCL's log (2 warnings) is kept in %s"),
    (NCCL_WARNINGS.split("\n\n")[0] + "\n", TF_NCCL_ERROR, "NCCL's log is kept in %s"),
    (NCCL_WARNINGS.split("\n\n")[0] + "\n", "OOM when allocating tensor", ""),
])
def test_a_failed_runs_nccl_log_is_kept_when_it_helps(monkeypatch, tmp_path, text, failure,
                                                     kept):
    path = _nccl_log(monkeypatch, tmp_path, text)
    assert explain.keep_nccl_log(failure) == (kept % path if kept else "")
    explain.discard_nccl_log()   # what the runner does after every run
    assert path.exists() is bool(kept)


@pytest.mark.slow
def test_the_error_line_names_the_kept_nccl_log(monkeypatch, tmp_path):
    from tfbench.engine import steps

    def failing_step(self, from_iterator=False):
        def step(inputs):
            raise tf.errors.InternalError(None, None, TF_NCCL_ERROR)
        return step
    monkeypatch.setattr(steps.Steps, "train_step", failing_step)
    path = _nccl_log(monkeypatch, tmp_path, NCCL_WARNINGS)
    code, _ = run_inprocess(["--device=cpu", "--model=trivial", "--image_size=16",
                             "--batch_size=2", "--num_batches=2", "--csv_file=r.csv",
                             "--json_dir="], tmp_path)
    assert code == 1
    row = only_row(tmp_path / "r.csv")
    assert row["error"] == (
        "TensorFlow's runtime failed running trivial on CPU (fp32, batch size 2 per device): "
        "%s; NCCL's log (2 warnings) is kept in %s" % (TF_NCCL_ERROR, path))
    assert path.read_text() == NCCL_WARNINGS


# A child that runs the CLI with every all-reduce probe failing as NCCL fails.
_PROBE_FAILS = """
import sys
import tensorflow as tf
from tfbench.distribute import allreduce_probe

def time_all_reduce(*args, **kwargs):
    raise tf.errors.InternalError(None, None, %r)

allreduce_probe.time_all_reduce = time_all_reduce
from tfbench.cli import entry_point
sys.argv = ["tfbench"] + sys.argv[1:]
entry_point()
""" % TF_NCCL_ERROR
TWO_DEVICES = ["--device=cpu", "--num_gpus=2", "--model=trivial", "--image_size=16",
               "--batch_size=2"]


def _run_probe_failing(tmp_path, args):
    path = tmp_path / "tfbench-nccl-1.log"
    path.write_text(NCCL_WARNINGS)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **{explain.NCCL_LOG_ENV: str(path)},
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = zygote.run(args, tmp_path, env, 300, merged=False, code=_PROBE_FAILS)
    return proc, path


@pytest.mark.slow
def test_probes_stopped_by_nccl_keep_its_log_and_the_runs_figures(tmp_path):
    proc, path = _run_probe_failing(tmp_path, TWO_DEVICES + [
        "--num_batches=2", "--num_warmup_batches=1", "--explain_scaling", "--csv_file=r.csv",
        "--json_dir="])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip("\n").split("\n")[-1] == "-" * 64
    row = only_row(tmp_path / "r.csv")
    assert float(row["images_per_sec"]) > 0
    assert ("--explain_scaling: the probes stopped, TensorFlow failed: %s; NCCL's log "
            "(2 warnings) is kept in %s; the run's own figures stand" % (TF_NCCL_ERROR, path)
            ) in row["notices"]
    assert path.read_text() == NCCL_WARNINGS


@pytest.mark.slow
def test_tfbench_allreduce_failed_by_nccl_is_one_line_naming_its_log(tmp_path):
    proc, path = _run_probe_failing(tmp_path, ["allreduce"] + TWO_DEVICES)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.rstrip("\n").split("\n")[-1] == (
        "tfbench: error: TensorFlow's runtime failed in the all-reduce probe: %s; NCCL's log "
        "(2 warnings) is kept in %s" % (TF_NCCL_ERROR, path))
    assert path.read_text() == NCCL_WARNINGS


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
    assert explain.device_label(plan.with_facts(device=device), 1) == label


def test_each_device_probe_keeps_its_own_cuda_index():
    """A probe's plan names the GPU it runs on (what reads the plan's GPUs, such as the NVML
    monitors, then watches that one), not the run's first."""
    from tfbench.engine.train import TrainRunner
    p, plan = _plan("--num_gpus=2", "--device=cpu")
    plan = plan.with_facts(device=dataclasses.replace(plan.device, gpu_indices=(5, 7)))
    runner = TrainRunner(p=p, plan=plan, strategy=None)
    probes = [explain.one_device_runner(runner, name, i)
              for i, name in enumerate(plan.device.names)]
    assert [r.plan.device.gpu_indices for r in probes] == [(5,), (7,)]
    assert [r.plan.device.names for r in probes] == [(n,) for n in plan.device.names]


def _recorded_host(name):
    import json
    import os
    from helpers import FakeNvml
    from paths import DATA
    with open(os.path.join(DATA, "nvml_links.json")) as handle:
        host = json.load(handle)["hosts"][name]
    return FakeNvml(host["gpus"], topology=host["topology"])


# NCCL 2.21's log on a worker of two, one InfiniBand port between the hosts.
ONE_NIC = """\
h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
h:1:9 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:192.168.11.1<0>
h:1:9 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA
h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
"""


@pytest.fixture
def gpu_host(monkeypatch, tmp_path):
    """A run's GPU links read from a recorded host, NCCL's log where prepare() puts it, and a
    sysfs tree with one 100 Gb/s EDR port."""
    from tfbench.measure import links, nics
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    port = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "rate").write_text("100 Gb/sec (4X EDR)\n")
    monkeypatch.setattr(nics, "SYSFS", str(tmp_path / "sys"))

    read = links.gpu_links

    def use(name, log=None):
        fake = _recorded_host(name)
        monkeypatch.setattr(links, "gpu_links", lambda gpus: read(gpus, fake))
        if log is not None:
            (tmp_path / "nccl.log").write_text(log)
            monkeypatch.setenv(explain.NCCL_LOG_ENV, str(tmp_path / "nccl.log"))
        else:
            monkeypatch.delenv(explain.NCCL_LOG_ENV, raising=False)
        _, plan = _plan("--num_gpus=8", "--device=cpu", kind="gpu")
        return plan
    return use


def _links_of(plan, workers, **figures):
    import json
    res = _probed_result(**figures)
    res.num_workers = workers
    found = {}
    explain._links(plan, found, res, workers)
    json.dumps(found)   # the JSON manifest holds it
    return res


def test_a_dgx1_expects_its_nvlink_rings_not_pcie(gpu_host):
    res = _links_of(gpu_host("dgx1_v100"), 1, allreduce_busbw_gbs=120.0)
    assert res.extra["expected_busbw_gbs"] == pytest.approx(150.0)
    assert res.extra["link"] == ("NVLink 2.0 x6; joined up to SYS (GPU 0 and GPU 4: the link "
                                 "between CPU sockets); expected busbw from NVLink rings "
                                 "through every GPU")
    verdict = explain.explain_run(res)["verdict"]
    assert "bus bandwidth 120 GB/s on NVLink 2.0 x6, where up to 150 is expected; the link " \
           "is the limit" in verdict


def test_several_workers_expect_the_slowest_hop_not_nvlink(gpu_host):
    # DGX A100s (300 GB/s over NVSwitch) joined by one 100 Gb/s port: 12.5 GB/s.
    res = _links_of(gpu_host("dgx_a100", ONE_NIC), 2, allreduce_busbw_gbs=11.0)
    assert res.extra["expected_busbw_gbs"] == 12.5
    assert res.extra["link"] == (
        "NVLink 3.0 x12; joined up to SYS (GPU 0 and GPU 4: the link between CPU sockets); "
        "NCCL 2.21.5+cuda12.4: between hosts NET/IB (InfiniBand mlx5_0) with GPUDirect RDMA; "
        "within a host P2P/IPC; expected busbw from the NICs between hosts (InfiniBand mlx5_0 "
        "at 100 Gb/s)")
    verdict = explain.explain_run(res)["verdict"]
    assert "well below" not in verdict
    assert verdict.endswith(
        "bus bandwidth 11 GB/s across 2 workers, where up to 12 is expected from the NICs "
        "between hosts (InfiniBand mlx5_0 at 100 Gb/s); the network between the hosts is the "
        "limit: send fewer bytes (fp16 gradients: --precision=fp16 with "
        "--compact_gradient_transfer), a larger batch per device, or faster NICs")
    # The same host alone: its NVLink.
    assert _links_of(gpu_host("dgx_a100", ONE_NIC), 1).extra["expected_busbw_gbs"] == 300.0


def test_a_cross_host_hop_of_unknown_rate_expects_nothing(gpu_host):
    res = _links_of(gpu_host("dgx_a100", ONE_NIC.replace("mlx5_0", "mlx5_4")), 2,
                    allreduce_busbw_gbs=11.0)
    assert res.extra["expected_busbw_gbs"] is None
    assert "; no expected busbw: the cross-host hop's rate is unknown (mlx5_4: " in \
        res.extra["link"]
    verdict = explain.explain_run(res)["verdict"]
    assert "bus bandwidth 11 GB/s across 2 workers; no expected busbw: the cross-host hop's " \
           "rate is unknown (mlx5_4: " in verdict
    assert verdict.endswith("compare busbw with the rate of the network between the hosts")
    # No NCCL log (NCCL_DEBUG set by the user): no NIC named, no expectation either.
    res = _links_of(gpu_host("dgx_a100"), 2)
    assert res.extra["expected_busbw_gbs"] is None and res.extra["link"].endswith(
        "no expected busbw: the cross-host hop's rate is unknown: no NCCL log of tfbench's names "
        "the NICs between hosts (NCCL_DEBUG was set, or NCCL wrote none)")


def test_the_run_s_own_verdict_knows_its_workers():
    res = _probed_result(link="one CPU device per worker", expected_busbw_gbs=None)
    res.device_kind, res.num_workers = "cpu", 2
    assert "TensorFlow's ring over gRPC" in explain.explain_run(res)["verdict"]


def test_the_run_explains_its_own_step_from_its_rate():
    res = RunResult(global_batch_size=256, images_per_sec=1024.0)
    res.extra.update(one_device_step_ms=200.0)
    got = explain.explain_run(res)
    assert got["step_ms"] == 250.0 and got["efficiency_pct"] == 80.0


def test_a_pcie_ring_across_the_cpu_sockets_is_held_to_nccls_rate_between_them(gpu_host,
                                                                                monkeypatch):
    # 8 L40S on two Sapphire Rapids sockets, NCCL 2.21: NCCL rates the link between the
    # sockets 10 GB/s, under the 31.5 of PCIe 4.0 x16; 9 GB/s busbw is healthy.
    from tfbench.measure import sockets
    monkeypatch.setattr(sockets, "host_cpu", lambda: sockets.HostCpu(
        "x86_64", "GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8462Y+"))
    log = "h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    res = _links_of(gpu_host("l40s_dual_socket", log), 1, allreduce_busbw_gbs=9.0)
    assert res.extra["expected_busbw_gbs"] == 10.0
    hop = ("PCIe, ring crosses the CPU sockets (Intel Sapphire Rapids or newer: NCCL "
           "2.21.5+cuda12.4 models 10 GB/s (22 from 2.26))")
    assert res.extra["link"].startswith("PCIe 4.0 x16; joined up to SYS (GPU 0 and GPU 4: the "
                                        "link between CPU sockets); NCCL 2.21.5+cuda12.4")
    assert res.extra["link"].endswith("; expected busbw from " + hop)
    verdict = explain.explain_run(res)["verdict"]
    assert "well below" not in verdict
    assert verdict.endswith(
        "bus bandwidth 9 GB/s on PCIe 4.0 x16, where up to 10 is expected from %s; the link "
        "between the CPU sockets is the limit: send fewer bytes (fp16 gradients: "
        "--precision=fp16 with --compact_gradient_transfer), a larger batch per device, or "
        "GPUs of one socket (--gpu_indices; nvidia-smi topo -m shows which)" % hop)
    # Truly bad: under half of it
    low = explain.explain_run(_links_of(gpu_host("l40s_dual_socket", log), 1,
                                        allreduce_busbw_gbs=3.0))["verdict"]
    assert "where up to 10 is expected from %s; well below what the link carries" % hop in low
