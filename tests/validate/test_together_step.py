"""The devices together (tfbench.validate.together_step): the all-reduce's busbw against the
links' by hand, every case without an expectation, and the efficiency's split in words."""

import pytest

from tfbench.validate import together_step

LINK = "NVLink 4.0 x18; expected busbw from NVLink rings through every GPU"


def _probe(*busbw, expected=450.0, link=LINK):
    return {"ranks": 8, "link": link, "expected_busbw_gbs": expected,
            "timings": [{"label": "%d MiB" % (i + 1), "busbw_gbs": b}
                        for i, b in enumerate(busbw)]}


def test_busbw_is_the_largest_size_against_half_the_links_rate():
    # 450 GB/s the links carry: the floor is 225; the best of 120, 310 and 290 is 310 (69%)
    row = together_step.busbw_check(_probe(120.0, 310.0, 290.0), "h", "gpu")
    assert (row.status, row.reason, row.value, row.expected) == ("PASS", "ok", 310.0, 225.0)
    assert row.figure == "busbw 310 GB/s (2 MiB, 8 ranks) (69% of the links')"
    assert row.expectation == ("at least 225 GB/s, 50% of the up to 450 GB/s the links carry "
                               "(" + LINK + ")")
    low = together_step.busbw_check(_probe(150.0, 224.0), "h", "gpu")
    assert (low.status, low.reason) == ("FAIL", "busbw_below_expected")


@pytest.mark.parametrize("probe, kind, figure, expectation", [
    (_probe(3.0), "cpu", "busbw 3 GB/s (1 MiB, 8 ranks)",
     "none: CPU devices all-reduce through host memory, no link to judge"),
    (_probe(30.0, expected=None, link="PCIe 4.0 x16; no expected busbw: NVLink 6.0 not known"),
     "gpu", "busbw 30 GB/s (1 MiB, 8 ranks); PCIe 4.0 x16; no expected busbw: NVLink 6.0 not "
            "known", "no expected busbw: NVLink 6.0 not known"),
    (_probe(None), "gpu", "no all-reduce: the gradients are summed at the variables' devices "
                          "(--variable_update=parameter_server)", "an all-reduce to time")])
def test_no_expectation_is_a_skip_with_the_figure(probe, kind, figure, expectation):
    row = together_step.busbw_check(probe, "h", kind)
    assert (row.status, row.reason, row.figure, row.expectation) == (
        "SKIP", "no_expectation", figure, expectation)


def test_the_efficiency_split_names_each_cause_in_points():
    explained = {"efficiency_pct": 61.04, "lost_pts": {
        "compute": 4.0, "input": 0.0, "allreduce": 30.0, "unexplained": 4.96}}
    assert together_step.efficiency_split(explained) == (
        "61.0% (slowest device's extra compute 4.0 pts, input wait 0.0 pts, all-reduce (not "
        "overlapped) 30.0 pts, unexplained 5.0 pts)")
