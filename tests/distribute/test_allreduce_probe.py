"""The all-reduce probe (tfbench.distribute.allreduce_probe) and `tfbench allreduce`.

Strategies on 3 logical devices run in a fresh process (tests/support/allreduce_checks.py); the
command's localhost-workers run is in e2e/test_clusters.py.
"""

import pytest

from helpers import run_check_script
from tfbench.distribute import allreduce_probe


@pytest.fixture(scope="module")
def checks():
    return run_check_script("allreduce_checks.py")


@pytest.mark.slow
def test_fp16_runs_send_half_the_bytes_and_busbw_follows_nccl_tests(checks):
    # 1000 + 24 float32 gradients, sent as fp16 by the run's packing: 2 bytes each.
    assert checks["transfer"] == "float16" and checks["sent_bytes"] == 1024 * 2
    t = checks["timing"]
    assert (t["count"], t["nbytes"], t["dtype"], t["ranks"], t["times"]) == (
        2, 2048, "float16", 3, 3)
    assert t["algbw"] == pytest.approx(2048 / (t["median_ms"] / 1000.0) / 1e9)
    assert t["busbw"] == pytest.approx(t["algbw"] * 2 * (3 - 1) / 3)   # 2(n-1)/n


@pytest.mark.slow
def test_each_call_runs_several_all_reduces_and_time_is_one_all_reduces_share(checks):
    """A timed call traces PER_SYNC all-reduces (the step's own reduction, once per replica
    each), and all of them run (a counter on each result, after grappler: a chain that
    grappler cut would run one); the call waits for the host once. The check's clock advances
    1 s at each reading, so a call takes 1 s and one all-reduce 1 s / PER_SYNC, the time
    algbw divides by."""
    t = checks["timing"]
    assert t["per_sync"] == allreduce_probe.PER_SYNC == 10
    assert t["all_reduces_traced"] == 10 and t["all_reduces_run"] == 10
    assert t["median_ms"] == pytest.approx(1000.0 / 10)
    assert t["algbw"] == pytest.approx(2048 / 0.1 / 1e9)


@pytest.mark.slow
def test_the_probe_reduces_for_real(checks):
    # Each of 3 replicas holds ones; 3 all-reduces, each of the one before's results, make each
    # element 3 x 3 x 3 = 27: one after another, not side by side (that would make 3); a
    # replica adds the first elements of its 2 tensors (54), the call the 3 replicas' (162).
    assert checks["step_value"] == 162.0


@pytest.mark.slow
def test_a_size_is_probed_only_where_every_rank_has_room(checks):
    """The ranks' answers are all-reduced with the run's reduction: one rank's no is every
    rank's, so no worker waits in a collective another skipped."""
    assert checks["agreed"] == [True, False, True, False]
    # The tensor, its transfer copy, the result and its cast back; a reduction to one device
    # also holds each of the 3 replicas' copies there.
    assert checks["held_copies"] == {"replicated": 4, "pscpu": 4 + 3}


@pytest.mark.slow
def test_a_parameter_server_exchange_sums_at_the_variables(checks):
    assert checks["spread_at_variables"] and checks["not_probed_replicated"] is None
    assert checks["model_set"] == {"shapes": [[4, 3], [3], [3, 2], [2]],
                                   "dtypes": ["float32"] * 4, "nbytes": (12 + 3 + 6 + 2) * 4}
    assert checks["ps"] == {"at_variables": True, "busbw": None, "nbytes": 92, "times": 2,
                            "per_sync": 2}
    assert checks["ps_without_variables"] == ("a parameter-server exchange needs the variables "
                                              "it sums at")


@pytest.mark.slow
def test_strategies_without_an_exchange_say_why(checks):
    assert checks["not_probed_independent"] == "independent replicas exchange no gradients"
    assert checks["not_probed_one"] == "one device: nothing to all-reduce"


def test_sizes_double_like_all_reduce_perf():
    sets = allreduce_probe.size_sets(1024, 16 * 1024, 4)
    assert [s.label for s in sets] == ["1 KiB", "4 KiB", "16 KiB"]
    assert [s.shapes for s in sets] == [((256,),), ((1024,),), ((4096,),)]
    assert [s.nbytes for s in sets] == [1024, 4096, 16384]
    assert allreduce_probe.size_sets(6, 6, 2, "float16")[0].shapes == ((3,),)
    with pytest.raises(ValueError):
        allreduce_probe.size_sets(8, 4)
    assert allreduce_probe.bus_factor(8) == 1.75 and allreduce_probe.bus_factor(2) == 1.0
    assert allreduce_probe.human_bytes(97.5 * 2 ** 20) == "97.5 MiB"
    assert allreduce_probe.human_bytes(100) == "100 B"


def test_busbw_counts_the_ranks_of_the_whole_cluster_not_one_hosts():
    """2 hosts of 8 GPUs are 16 ranks: busbw = algbw x 2(16-1)/16 = 1.875 algbw; one host's 8
    would give 1.75, 6.7% low. A MultiWorkerMirroredStrategy stand-in (8 devices here, 16
    replicas in sync) and a horovod one (rank 3 of 16, one GPU per process)."""
    import types

    from helpers import FakeHorovod
    from tfbench.distribute.strategies import HorovodStrategy
    two_hosts = types.SimpleNamespace(
        num_replicas_in_sync=16,
        extended=types.SimpleNamespace(worker_devices=tuple("/gpu:%d" % i for i in range(8))))
    horovod = HorovodStrategy("/cpu:0", FakeHorovod(rank=3, size=16, local_rank=3))
    assert allreduce_probe.ranks(two_hosts) == allreduce_probe.ranks(horovod) == 16
    summary = {"median_ms": 10.0}
    t = allreduce_probe.Timing("1 GiB", 1, 1 << 30, "float32", 16, (0.01,), summary)
    assert t.busbw_gbs == pytest.approx((1 << 30) / 0.01 / 1e9 * 2 * 15 / 16)
    per_host = allreduce_probe.Timing("1 GiB", 1, 1 << 30, "float32", 8, (0.01,), summary)
    assert per_host.busbw_gbs / t.busbw_gbs == pytest.approx(1 - 0.0667, abs=1e-4)


@pytest.fixture(scope="module")
def compiled():
    return run_check_script("probe_xla_checks.py")


@pytest.mark.slow
@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("fp16", "float16")])
def test_compiled_replicas_chain_one_jit_call_per_all_reduce_on_their_own_device(
        compiled, precision, dtype):
    """Where XLA compiles each replica's step (2 GPUs, --xla), each of a call's all-reduces is
    one jit-compiled call fed by the one before's result; each replica runs a trace of its own
    whose collective is on its own device (tf.function retraces per device under a strategy of
    several devices), in the run's transfer dtype."""
    got = compiled[precision]
    assert got["compiled"] is True
    assert sorted(got["calls"]) == ["0", "1"]
    for device, calls in got["calls"].items():
        assert len(calls) == 3 and all(c["must_compile"] for c in calls)
        assert len({c["function"] for c in calls}) == 1
        assert [c["fed_by"] for c in calls] == ["Identity", "StatefulPartitionedCall",
                                                 "StatefulPartitionedCall"]
        assert got["functions"][calls[0]["function"]] == [[int(device), dtype]]
