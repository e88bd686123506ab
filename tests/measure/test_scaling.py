"""The step split into causes (tfbench.measure.scaling), against figures worked out by hand."""

import math

import pytest

from tfbench.measure import scaling


def test_step_ms_is_the_global_batch_over_images_per_sec():
    # 2 workers x 4 devices x 32 images = 256 per step at 1,024 images/sec: a step of 250 ms.
    assert scaling.step_ms(256, 1024.0) == 250.0


def test_each_cause_is_attributed_in_order_and_the_parts_add_up():
    # One device 40 ms. All devices at once, the slowest 100 ms (+60 compute); the pipeline
    # needs 130 ms per batch where devices + all-reduce need 100 + 20 = 120 (+10 input wait);
    # the step is 240: the all-reduce shows whole (240 - 100 - 10 > 20), 110 ms unexplained.
    d = scaling.decompose(240.0, 40.0, 100.0, 20.0, 130.0)
    assert d.lost_ms == {"compute": 60.0, "input": 10.0, "allreduce": 20.0,
                         "unexplained": 110.0}
    assert d.efficiency_pct == pytest.approx(100 * 40 / 240)
    assert sum(d.lost_pts.values()) == pytest.approx(100 - d.efficiency_pct)
    assert d.lost_pts["compute"] == pytest.approx(25.0)
    assert d.largest == "unexplained" and d.overlap_ms == 0.0


def test_an_all_reduce_hidden_behind_compute_costs_only_what_shows():
    # The probe's all-reduce takes 30 ms but the step is only 8 ms longer than the devices.
    d = scaling.decompose(58.0, 50.0, 50.0, 30.0)
    assert d.lost_ms["allreduce"] == 8.0 and d.lost_ms["unexplained"] == 0.0
    assert d.overlap_ms == 22.0


def test_parts_never_exceed_the_loss_and_a_negative_remainder_is_kept():
    # The probes saw more than the run lost (the devices together are slower than the step):
    # compute takes the whole loss, nothing is left for the rest.
    d = scaling.decompose(60.0, 50.0, 75.0, 10.0, 5.0)
    assert d.lost_ms == {"compute": 10.0, "input": 0.0, "allreduce": 0.0, "unexplained": 0.0}
    # A reference slower than the step (the row's one-device run was slower): the parts are 0
    # and the remainder, negative, says so.
    d = scaling.decompose(45.0, 50.0, 48.0, 3.0)
    assert d.lost_ms["unexplained"] == -5.0 and d.efficiency_pct > 100


def test_unmeasured_probes_count_as_nothing():
    d = scaling.decompose(80.0, 50.0, None, None, None)
    assert d.lost_ms == {"compute": 0.0, "input": 0.0, "allreduce": 0.0, "unexplained": 30.0}
    assert d.overlap_ms is None
    with pytest.raises(ValueError):
        scaling.decompose(0.0, 50.0, None, None)


def test_a_slow_input_pipeline_is_the_wait_beyond_devices_and_all_reduce():
    d = scaling.decompose(200.0, 10.0, 12.0, 3.0, 205.0)
    assert d.lost_ms["compute"] == 2.0
    assert d.lost_ms["input"] == 188.0      # all that is left once compute took its 2
    assert d.largest == "input"


def test_verdict_names_the_all_reduce_with_its_size_bandwidth_and_the_degraded_link():
    d = scaling.decompose(105.0, 85.0, 86.0, 18.0)
    e = scaling.Evidence(allreduce_mib=97.5, busbw_gbs=9.4, expected_busbw_gbs=15.8,
                         link="PCIe 3.0 x16", degraded="GPU 5's PCIe link runs at x4 of x16")
    line = scaling.verdict(d, e)
    assert line.startswith("Largest cause: the all-reduce of 97.5 MiB takes 18.0 ms of the "
                           "105.0 ms step (17.1 points)")
    assert "bus bandwidth 9.4 GB/s on PCIe 3.0 x16, where up to 16 is expected" in line
    assert "GPU 5's PCIe link runs at x4 of x16: reseat the card" in line


def test_verdict_for_a_slow_device_and_for_devices_slowed_together():
    d = scaling.decompose(300.0, 100.0, 290.0, 5.0)
    named = scaling.verdict(d, scaling.Evidence(slowest_device="GPU 3", slowest_device_ratio=1.9))
    assert "slowest device's extra compute, 190.0 ms" in named
    assert "GPU 3 computes 1.90x the median device's step" in named
    shared = scaling.verdict(d, scaling.Evidence(slowest_device="GPU 3",
                                                 slowest_device_ratio=1.02))
    assert "GPU 3" not in shared and "a limit they share" in shared
    cpu = scaling.verdict(d, scaling.Evidence(device_kind="cpu"))
    assert "logical CPU devices share one CPU's cores" in cpu


def test_verdict_for_input_and_unexplained_and_nothing_lost():
    d = scaling.decompose(200.0, 10.0, 12.0, 3.0, 205.0)
    assert scaling.verdict(d, scaling.Evidence(global_batch=256)).startswith(
        "Largest cause: input wait, 188.0 ms of the 200.0 ms step (94.0 points): the input "
        "pipeline alone delivers a step's batch of 256 images")
    unexplained = scaling.verdict(scaling.decompose(80.0, 50.0, 50.0, 0.0),
                                  scaling.Evidence(host_ms_between_steps=4.25))
    assert "unexplained, 30.0 ms of the 80.0 ms step (37.5 points)" in unexplained
    assert "host time between steps is 4.2 ms of it" in unexplained
    assert "nothing lost" in scaling.verdict(scaling.decompose(50.0, 50.0, 50.0, 0.0))


def test_parameter_server_exchange_suggests_an_all_reduce():
    d = scaling.decompose(100.0, 40.0, 40.0, 50.0)
    line = scaling.verdict(d, scaling.Evidence(allreduce_mib=15.7))
    assert "gradient exchange of --variable_update=parameter_server" in line
    assert "--variable_update=replicated" in line


def test_evidence_reads_a_csv_row_with_empty_cells():
    row = {"allreduce_mib": "97.5", "allreduce_busbw_gbs": "9.4", "expected_busbw_gbs": "",
           "link": "PCIe 3.0 x16; GPU 5's PCIe link runs at x4 of x16; GPU 2 sits in a x8 slot",
           "slowest_device": math.nan, "slowest_device_ratio": "1.01"}
    e = scaling.evidence(row, "gpu", 512)
    assert (e.allreduce_mib, e.busbw_gbs, e.expected_busbw_gbs) == (97.5, 9.4, None)
    assert e.link == "PCIe 3.0 x16" and e.degraded == "GPU 5's PCIe link runs at x4 of x16"
    assert e.slowest_device == "" and e.slowest_device_ratio == 1.01


def test_cpu_workers_all_reduce_over_the_network():
    d = scaling.decompose(100.0, 60.0, 60.0, 30.0)
    row = {"allreduce_mib": "1.03", "allreduce_busbw_gbs": "0.0293", "num_workers": "2"}
    line = scaling.verdict(d, scaling.evidence(row, "cpu"))
    assert "bus bandwidth 0.0293 GB/s" in line and "ring over gRPC" in line
    assert "host memory" in scaling.verdict(d, scaling.evidence(dict(row, num_workers=1), "cpu"))


NIC_LINK = ("NVLink 4.0 x18; NCCL 2.21.5+cuda12.4: between hosts NET/IB (InfiniBand mlx5_0); "
            "expected busbw from the NICs between hosts (InfiniBand mlx5_0 at 100 Gb/s)")


def test_several_gpu_workers_are_held_against_the_slowest_hop():
    d = scaling.decompose(100.0, 60.0, 60.0, 30.0)
    row = {"allreduce_mib": "97.5", "allreduce_busbw_gbs": "4.1", "expected_busbw_gbs": "12.5",
           "link": NIC_LINK, "num_workers": "4"}
    e = scaling.evidence(row, "gpu")
    assert e.expected_from == ("expected busbw from the NICs between hosts (InfiniBand mlx5_0 "
                               "at 100 Gb/s)")
    line = scaling.verdict(d, e)
    assert ("bus bandwidth 4.1 GB/s across 4 workers, where up to 12 is expected from the NICs "
            "between hosts (InfiniBand mlx5_0 at 100 Gb/s); well below what the slowest hop "
            "carries: check the transport NCCL chose") in line
    # Within the host slower than the NICs: the link is the limit, named as on one host.
    pcie = dict(row, link="PCIe 3.0 x16; expected busbw from PCIe", expected_busbw_gbs="15.8",
                allreduce_busbw_gbs="14")
    assert scaling.verdict(d, scaling.evidence(pcie, "gpu")).endswith(
        "bus bandwidth 14 GB/s across 4 workers, where up to 16 is expected from PCIe; the link "
        "is the limit: send fewer bytes (fp16 gradients: --precision=fp16 with "
        "--compact_gradient_transfer), a larger batch per device, or a faster interconnect")


def test_no_expectation_claims_no_limit():
    d = scaling.decompose(100.0, 60.0, 60.0, 30.0)
    row = {"allreduce_mib": "97.5", "allreduce_busbw_gbs": "700", "expected_busbw_gbs": "",
           "link": "NVLink 6.0 x18; no expected busbw: the rate of GPU 0's NVLink 6.0 links is "
                   "not known"}
    line = scaling.verdict(d, scaling.evidence(row, "gpu"))
    assert line.endswith("bus bandwidth 700 GB/s on NVLink 6.0 x18; no expected busbw: the rate "
                         "of GPU 0's NVLink 6.0 links is not known; compare busbw with the rate "
                         "of the GPUs' links (nvidia-smi topo -m)")
