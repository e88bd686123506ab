"""--explain_scaling finds a cost injected into a real run (tests/support/explain_inject.py): a
slowed all-reduce, one slowed device, a slow input pipeline. Each must come out as the largest
cause, and the parts must add up to the measured step, the remainder stated. --validate_devices
finds a slowed device and one that computes wrong gradients.

The injected wait (0.25 s) is far above what anything else costs here (trivial's cifar10
variant: 56k parameters, a few ms per step on 2 logical CPU devices), so the attribution holds
on a loaded 2-core machine; the timing assertions are only these, about the injected cost.
"""

import json
import os
import pickle

import numpy as np
import pytest

import zygote
from helpers import SUPPORT, only_row

pytestmark = pytest.mark.slow

WAIT = 0.25
FLAGS = ["--device=cpu", "--num_gpus=2", "--model=trivial", "--data_name=cifar10",
         "--batch_size=4", "--num_batches=6", "--num_warmup_batches=2",
         "--variable_update=replicated", "--explain_scaling", "--monitor_interval_ms=0"]


def _cifar10(directory):
    """Six tiny CIFAR-10 pickle batches (the reader's format: data N x 3072 uint8, labels)."""
    rng = np.random.default_rng(0)
    for name in ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]:
        with open(os.path.join(directory, name), "wb") as handle:
            pickle.dump({b"data": rng.integers(0, 256, (8, 3072)).astype(np.uint8),
                         b"labels": list(rng.integers(0, 10, 8))}, handle)


def _run(kind, tmp_path, *flags):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = zygote.run(
        [kind, str(WAIT)] + FLAGS + list(flags) + ["--json_dir=%s" % (tmp_path / "runs"),
                                                   "--csv_file=%s" % (tmp_path / "r.csv")],
        tmp_path, env, timeout=300, script=os.path.join(SUPPORT, "explain_inject.py"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    (name,) = os.listdir(tmp_path / "runs")
    with open(tmp_path / "runs" / name) as handle:
        run = json.load(handle)
    return run, proc.stdout


def _check_parts_add_up(run):
    explained = run["extra"]["scaling_explained"]
    step_ms = 1000.0 * run["global_batch_size"] / run["images_per_sec"]
    assert explained["step_ms"] == pytest.approx(step_ms)
    parts = explained["lost_ms"]
    assert explained["reference_ms"] + sum(parts.values()) == pytest.approx(step_ms)
    # What the probes cannot place stays small next to the injected cost.
    assert abs(parts["unexplained"]) < 0.5 * WAIT * 1000.0, parts
    return explained


def test_a_slowed_all_reduce_is_the_largest_cause(tmp_path):
    run, out = _run("allreduce", tmp_path, "--use_synthetic_data")
    extra = run["extra"]
    assert extra["allreduce_ms"] > 1000.0 * WAIT      # the probe saw the injected wait
    explained = _check_parts_add_up(run)
    assert explained["largest"] == "allreduce"
    assert explained["lost_ms"]["allreduce"] > 0.6 * 1000.0 * WAIT
    assert "Largest cause: the all-reduce of " in out and explained["verdict"] in out


def test_an_all_reduce_hidden_behind_a_long_backward_pass_is_not_lost(tmp_path):
    """The same slowed all-reduce, in 2 packs, with the backward pass WAIT longer after the
    last layers' pack exists: that pack's all-reduce (and its wait) runs while the backward
    pass does, so the step loses far less than the probe's all-reduce time, and the overlapped
    part is most of it. With every pack waiting for the whole backward pass, the wait came on
    top (as in the test above)."""
    # Two packs: the logits' gradients, then the rest; 4 inter-op threads for the 3 waits (the
    # all-reduce's and each replica's backward pass) to run at once.
    run, out = _run("allreduce_backward", tmp_path, "--use_synthetic_data",
                    "--gradient_repacking=2", "--num_inter_threads=4")
    extra = run["extra"]
    assert extra["allreduce_ms"] > 1000.0 * WAIT      # the probe saw the injected wait
    explained = _check_parts_add_up(run)
    assert explained["lost_ms"]["allreduce"] < 0.4 * 1000.0 * WAIT
    assert explained["overlap_ms"] > 0.6 * 1000.0 * WAIT


def test_one_slowed_device_is_named(tmp_path):
    run, out = _run("device", tmp_path, "--use_synthetic_data")
    extra = run["extra"]
    explained = _check_parts_add_up(run)
    assert explained["largest"] == "compute"
    assert explained["lost_ms"]["compute"] > 0.6 * 1000.0 * WAIT
    assert extra["slowest_device"] == "/cpu:1" and extra["slowest_device_ratio"] > 1.5
    alone = {d["device"]: d["alone"]["median_ms"] for d in extra["scaling_probes"]["devices"]}
    assert alone["/cpu:1"] - alone["/cpu:0"] > 0.8 * 1000.0 * WAIT
    assert "/cpu:1 computes " in explained["verdict"]


def test_a_slow_input_pipeline_is_the_largest_cause(tmp_path):
    data_dir = tmp_path / "cifar10"
    data_dir.mkdir()
    _cifar10(str(data_dir))
    run, out = _run("input", tmp_path, "--data_dir=%s" % data_dir)
    extra = run["extra"]
    assert run["data_source"] == "cifar10_pickle"
    assert extra["input_step_ms"] > 1000.0 * WAIT
    explained = _check_parts_add_up(run)
    assert explained["largest"] == "input"
    assert explained["lost_ms"]["input"] > 0.5 * 1000.0 * WAIT
    assert "Largest cause: input wait" in out


def test_validate_devices_finds_the_slow_device_and_the_wrong_one(tmp_path):
    """Three devices: /cpu:1 slowed by WAIT per step and per matmul and convolution of the
    kernel probes, /cpu:2 computing every gradient 2^-10 too large (relatively) in the numeric
    check; with --explain_scaling, whose step times the device checks take as they are."""
    run, out = _run("device+kernels+wrong", tmp_path, "--use_synthetic_data", "--num_gpus=3",
                    "--validate_devices")
    extra = run["extra"]
    entries = {e["device"]: e for e in extra["device_checks"]}
    assert [e["device"] for e in extra["device_checks"]] == ["/cpu:0", "/cpu:1", "/cpu:2"]
    for e, row in zip(extra["device_checks"], extra["scaling_probes"]["devices"]):
        assert (e["alone_ms"], e["together_ms"]) == (row["alone"]["median_ms"],
                                                    row["together"]["median_ms"])
        assert e["errors"] == {} and e["matmul_tflops"] > 0 and e["conv_tflops"] > 0
    assert entries["/cpu:1"]["alone_ms"] - entries["/cpu:0"]["alone_ms"] > 0.8 * 1000.0 * WAIT
    assert extra["slowest_alone_device"] == "/cpu:1" and extra["slowest_alone_ratio"] > 1.5
    # 256^3 x 2 FLOPs in more than WAIT: fewer than 0.14 TFLOP/s
    assert entries["/cpu:1"]["matmul_tflops"] < 2 * 256 ** 3 / WAIT / 1e12
    for kernel in ("matmul", "conv"):
        assert extra["slowest_%s_device" % kernel] == "/cpu:1"
        assert extra["slowest_%s_ratio" % kernel] > 1.5
    # The slow device computes right, the wrong one is found by how much it is off.
    numeric = extra["device_checks_numeric"]
    assert (numeric["reference"], numeric["deterministic"], numeric["bound"]) == (
        "/cpu:0", True, 1e-5)
    for name in ("/cpu:0", "/cpu:1"):
        assert (entries[name]["bit_exact"], entries[name]["max_rel_diff"],
                entries[name]["agrees"]) == (True, 0.0, True), name
    assert entries["/cpu:1"]["digest"] == entries["/cpu:0"]["digest"]
    wrong = entries["/cpu:2"]
    assert (wrong["bit_exact"], wrong["within_bound"], wrong["agrees"]) == (False, False, False)
    assert wrong["max_rel_diff"] == pytest.approx(2.0 ** -10, rel=1e-3)
    assert wrong["digest"] != entries["/cpu:0"]["digest"]
    assert wrong["loss"] == entries["/cpu:0"]["loss"]   # only its gradients are wrong
    assert extra["devices_differing"] == 1
    assert extra["max_grad_rel_diff"] == pytest.approx(2.0 ** -10, rel=1e-3)
    row = only_row(tmp_path / "r.csv")
    assert (row["devices_checked"], row["slowest_alone_device"], row["devices_differing"]) == (
        "3", "/cpu:1", "1")
    lines = out.rstrip("\n").split("\n")
    (line,) = [l for l in lines if l.startswith("Device checks: ")]
    assert line.startswith("Device checks: 3 devices alone; slowest against the median: step "
                           "alone ")
    assert line.endswith("; gradients against /cpu:0 (op determinism on, bit-exact expected): "
                         "differing devices 1 (/cpu:2), largest difference 0.00098 (bound "
                         "1e-05)")
    assert lines.index(line) < lines.index("total images/sec: %.2f" % run["images_per_sec"])
    assert lines[-1] == "-" * 64
