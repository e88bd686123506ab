"""What rings through every GPU reach over direct links (tfbench.measure.rings), against values
worked out by hand (GB/s one way per pair; a ring runs both ways)."""

import pytest

from tfbench.measure import rings


def test_two_gpus_are_their_link():
    assert rings.ring_busbw([0, 1], {(0, 1): 50.0}) == 50.0
    assert rings.ring_busbw([0, 1], {}) is None


def test_a_ring_is_as_fast_as_its_slowest_hop_and_runs_both_ways():
    # The one ring 0-1-2 over 50, 50 and 25: 25 each way.
    assert rings.ring_busbw([0, 1, 2], {(0, 1): 50.0, (1, 2): 50.0, (0, 2): 25.0}) == 50.0


def test_rings_share_the_links():
    # Four GPUs, two links (50 GB/s) between every pair: the three rings 0-1-2-3, 0-1-3-2 and
    # 0-2-1-3 use each pair twice; each at 25 fills every link: 3 x 25, both ways, = 150, all of
    # each GPU's 3 x 50.
    every_pair = {(a, b): 50.0 for a in range(4) for b in range(a + 1, 4)}
    assert rings.ring_busbw(range(4), every_pair) == pytest.approx(150.0)
    assert len(rings.rings(range(4), every_pair)) == 3


def test_no_ring_through_every_gpu():
    # GPU 3 is joined to GPU 0 only.
    assert rings.ring_busbw(range(4), {(0, 1): 25.0, (1, 2): 25.0, (0, 2): 25.0,
                                       (0, 3): 25.0}) is None
    with pytest.raises(ValueError):
        rings.ring_busbw(range(9), {(a, a + 1): 25.0 for a in range(8)})
