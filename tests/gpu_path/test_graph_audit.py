"""Properties of the GPU path's step, read from its traced graph on 2 logical CPU
devices answering as GPUs (tests/support/graph_audit_checks.py, benchmarks/graph_audit.py).

- fp16 runs all-reduce their gradients in fp16 (--compact_gradient_transfer, the legacy
  default), bf16 runs in bf16 where XLA compiles the all-reduce (NCCL outside XLA takes no bf16);
- --gradient_repacking=N and the `#N` of --all_reduce_spec make N packs per device;
- the default --variable_update=parameter_server spreads the variables: no device holds more
  than its fair share plus the largest variable, and each gradient is summed on its variable's
  device;
- with --xla the update sits inside the XLA cluster: each replica's whole step on several GPUs,
  and the whole step on one GPU when the batch comes from an iterator (real data); where XLA
  compiles forward and backward only (dynamic loss scaling; RING collectives, as on virtual
  GPUs) the all-reduce runs outside with the algorithm asked for, and a notice says why;
- each gradient reduction waits for its own gradients only, so the packs that do not hold the
  backward pass's last gradient overlap it: on every path of one host, and under
  MultiWorkerMirroredStrategy on two localhost workers (graph_audit_workers.py), which packs
  as one host does.
"""

import json
import os

import pytest

import zygote
from helpers import SUPPORT, free_ports, run_check_script

pytestmark = pytest.mark.slow

ALL_IN_XLA = {"forward": "all", "backward": "all", "all-reduce": "all", "update": "all"}


@pytest.fixture(scope="module")
def audit():
    return run_check_script("graph_audit_checks.py")


@pytest.mark.parametrize("config,dtype", [
    ("fp16", "float16"), ("fp16_xla", "float16"), ("bf16_xla", "bfloat16"),
    # NCCL outside XLA takes no bfloat16 (nccl_manager.cc kValidDataTypes).
    ("bf16_3_packs", "float32"), ("fp16_not_compact", "float32")])
def test_gradients_travel_in_the_compute_dtype(audit, config, dtype):
    assert {dt for _, dt in audit[config]["collectives"]} == {dtype}


def test_fp16_all_reduce_moves_half_the_bytes_of_fp32(audit):
    fp16, fp32 = audit["fp16"]["reduced_bytes"], audit["fp16_not_compact"]["reduced_bytes"]
    assert set(fp16) == set(fp32) == {"CPU:0", "CPU:1"}
    # The float32 gradients of 4*4*3 -> 6 x 32 -> 11 Dense layers (the legacy script's 11
    # cifar10 logits).
    params = 48 * 32 + 32 + 5 * (32 * 32 + 32) + 32 * 11 + 11
    assert fp32 == {"CPU:0": 4 * params, "CPU:1": 4 * params}
    assert fp16 == {"CPU:0": 2 * params, "CPU:1": 2 * params}


@pytest.mark.parametrize("config,packs", [("fp16", 1), ("bf16_3_packs", 3), ("fp16_xla", 2),
                                          ("fp16_xla_virtual", 2)])
def test_packs_follow_gradient_repacking_and_the_spec(audit, config, packs):
    assert audit[config]["packs_per_device"] == packs


def test_parameter_server_spreads_variables_over_the_devices(audit):
    ps = audit["parameter_server"]
    assert ps["ran"] == "parameter_server"
    assert set(ps["held"]) == {"CPU:0", "CPU:1"}
    assert max(ps["held"].values()) <= ps["fair_share"] + ps["largest"]


def test_parameter_server_sums_each_gradient_where_its_variable_lives(audit):
    ps = audit["parameter_server"]
    assert ps["collectives"] == []
    assert ps["sums"] == [["float32", "CPU:0"], ["float32", "CPU:1"]]
    # One copy of each trainable variable, updated once.
    assert ps["copies"] == 14


@pytest.mark.parametrize("config", ["fp16_xla", "bf16_xla"])
def test_xla_compiles_each_replicas_whole_step(audit, config):
    assert audit[config]["xla"] == ALL_IN_XLA


def test_xla_runs_an_all_reduce_spec_as_collectives_inside_xla_and_says_so(audit):
    got = audit["fp16_xla"]
    assert got["collectives"] == [["CollectiveReduceV2", "float16"]]
    assert got["all_reduce_label"] == "collective (nccl, inside XLA)"
    assert got["reduction"] == "collective (nccl, inside XLA); gradients float16, 2 packs"
    assert got["notices"] == [
        "--xla compiles each replica's step with its all-reduce, which TensorFlow runs as NCCL "
        "collectives inside XLA: the algorithm of --all_reduce_spec=nccl#2 is not used"]


FORWARD_BACKWARD_ONLY = ("--xla compiles each replica's forward and backward passes, not its "
                         "all-reduce and update: ")


def test_dynamic_loss_scaling_compiles_each_replicas_whole_step(audit):
    # The step all-reduces before the finite check, so the check's cond holds the update only
    # (no collective in an XLA conditional): the whole replica step compiles, as without it.
    got = audit["fp16_xla_dynamic"]
    assert got["xla"] == ALL_IN_XLA
    assert got["collectives"] == [["CollectiveReduceV2", "float16"]]
    assert got["notices"] == []


def test_ring_collectives_keep_the_all_reduce_outside_xla_as_asked(audit):
    # Virtual GPUs: MirroredStrategy takes RING collectives, which XLA does not compile. The
    # all-reduce runs outside XLA with the algorithm asked for, still in fp16 and 2 packs.
    got = audit["fp16_xla_virtual"]
    assert got["xla"] == {"forward": "all", "backward": "all", "all-reduce": "none",
                          "update": "none"}
    assert got["collectives"] == [["NcclAllReduce", "float16"]]
    assert got["all_reduce_label"] == "nccl"
    assert got["reduction"] == "nccl; gradients float16, 2 packs"
    assert got["notices"] == [FORWARD_BACKWARD_ONLY + "XLA does not compile the RING "
                              "collectives TensorFlow chose for these devices"]


def test_without_xla_nothing_is_compiled(audit):
    assert set(audit["fp16"]["xla"].values()) == {"none"}


def test_xla_compiles_the_whole_step_on_one_device_with_an_iterator(audit):
    assert audit["one_device_iterator_xla"]["xla"] == {
        "forward": "all", "backward": "all", "all-reduce": "-", "update": "all"}


@pytest.mark.parametrize("config", ["overlap_merge_call", "overlap_xla", "overlap_fp16_dynamic",
                                    "overlap_xla_fp16_dynamic"])
def test_each_pack_is_all_reduced_while_the_backward_pass_runs(audit, config):
    """Three packs of six convolutions' and the logits' gradients, cut from the last layers
    down: only the last pack, which holds the first convolution's gradient (the backward
    pass's last), waits for it. A dependency on every gradient around the all-reduce made all
    three wait (on the merge-call path TensorFlow runs a merge call under the union of every
    replica's control dependencies); inside XLA a control edge orders nothing."""
    got = audit[config]
    assert got["waiting"] == {"CPU:0": [False, False, True], "CPU:1": [False, False, True]}
    # Pack by pack, the gradients each collective waits for: its own, and those of the packs
    # before it where the collectives run in a chain (outside XLA, one after another).
    # Floats per gradient, last first: logits bias 11 and kernel 8*8*8*11 = 5632, five 3x3x8x8
    # convolutions of 576, the first 3x3x3x8 = 216; of 8739 in all, a pack closes at a third:
    # [bias, logits] (5643), [conv 5] (6219 >= 5826), the five others.
    chained = "xla" not in config
    for device in ("CPU:0", "CPU:1"):
        packs = [w for w in got["waits_for"] if w[1] == device]
        assert [w[2] for w in packs] == [2, 1, 5]
        assert [w[3] for w in packs] == ([2, 3, 8] if chained else [2, 1, 5])
        assert {w[4] for w in packs} == {8}


@pytest.mark.parametrize("config", ["overlap_spread", "overlap_spread_fp16_dynamic"])
def test_the_parameter_server_sums_each_gradient_as_soon_as_it_exists(audit, config):
    """Each of the 8 sums takes the 2 replicas' gradients of one variable and waits for those
    alone; only the first convolution's waits for the backward pass's last gradient. With
    dynamic loss scaling the sums come before the finite check, not inside its cond."""
    got = audit[config]
    assert len(got["waits_for"]) == 8
    assert all(w[2] == 2 and w[3] == 2 and w[4] == 16 for w in got["waits_for"])
    assert sum(sum(flags) for flags in got["waiting"].values()) == 1


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """Two localhost workers, each tracing its step (tests/support/graph_audit_workers.py)."""
    hosts = ",".join("127.0.0.1:%d" % port for port in free_ports(2))
    env = dict({k: v for k, v in os.environ.items() if k != "TF_CONFIG"},
               TF_CPP_MIN_LOG_LEVEL="2")
    cwd = tmp_path_factory.mktemp("graph_audit_workers")
    script = os.path.join(SUPPORT, "graph_audit_workers.py")
    procs = [zygote.start([str(i), hosts], cwd, env, script=script) for i in range(2)]
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=180)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    results = []
    for proc, out in zip(procs, outs):
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        assert proc.returncode == 0 and lines, "\n=====\n".join(o[-2500:] for o in outs)
        results.append(json.loads(lines[-1][len("RESULT "):]))
    return results


def test_multi_worker_gradients_go_in_packs_not_one_collective(workers):
    """Six gradients (trivial's at 8 px), all-reduced by the strategy a run of two workers
    builds: one CollectiveReduceV2 each, as on one host's CPU devices (each gradient alone),
    not one over all 53,452 elements (MultiWorkerMirroredStrategy's own default,
    bytes_per_pack 0); the same where XLA compiles each replica's step (no merge calls)."""
    each = sorted([192, 1, 4096, 4096, 45056, 11])
    for got in workers:
        assert got["six"] == {"collectives": 6, "elements": each}
        assert got["six_without_merge_calls"] == {"collectives": 6, "elements": each}


def test_multi_worker_packs_overlap_the_backward_pass(workers):
    """audit_convs' step on each worker: its 8 gradients each alone (the run's flags), only the
    first convolution's waits for the backward pass's last gradient; each collective also
    waits for those before it (TensorFlow's collectives run in a chain)."""
    for got in workers:
        overlap = got["overlap"]
        assert overlap["reduction"].endswith("; gradients as computed, each gradient alone")
        assert overlap["waiting"] == {"CPU:0": [False] * 7 + [True]}
        assert [w[2:] for w in overlap["waits_for"]] == [[1, k, 8] for k in range(1, 9)]
