"""Which host drags the ring (tfbench.launch.halving): the groups each step runs and what the
search names, on made-up efficiencies, every expectation worked out by hand in the comments."""

import pytest

from tfbench.launch.halving import HOST, HOSTS, LINK, NONE, Finding, halves, next_step


def _oracle(slow_hosts=None, slow_links=None, fine=90.0):
    """A ring's efficiency: `fine` %, or the lowest figure of a slow host (or link: both its
    hosts) among its members."""
    slow_hosts, slow_links = slow_hosts or {}, slow_links or {}

    def efficiency(group):
        figures = [fine] + [e for h, e in slow_hosts.items() if h in group]
        figures += [e for (a, b), e in slow_links.items() if a in group and b in group]
        return min(figures)
    return efficiency


def _search(hosts, efficiency, expected=80.0):
    """Runs the search as validate_hosts does: every host together first, then each step's
    groups; the Finding and the groups run after the first, in order."""
    measured = {tuple(hosts): efficiency(hosts)}
    runs = []
    while True:
        step = next_step(hosts, measured, expected)
        if isinstance(step, Finding):
            return step, runs
        assert step and all(g not in measured for g in step)
        for group in step:
            runs.append(group)
            measured[group] = efficiency(group)


def test_two_hosts_are_a_pair_already_the_link_or_one_of_them():
    finding, runs = _search(["a", "b"], _oracle({"b": 50.0}))
    assert runs == [] and (finding.kind, finding.hosts) == (LINK, ("a", "b"))


def test_three_hosts_run_their_pairs_and_the_host_of_both_failing_pairs_drags():
    # a,b 90 (pass); a,c 45 and b,c 45 (fail): c is in both failing pairs.
    finding, runs = _search(["a", "b", "c"], _oracle({"c": 45.0}))
    assert runs == [("a", "b"), ("a", "c"), ("b", "c")]
    assert (finding.kind, finding.hosts) == (HOST, ("c",))


def test_three_hosts_with_one_failing_pair_name_the_link():
    finding, runs = _search(["a", "b", "c"], _oracle(slow_links={("a", "c"): 40.0}))
    assert len(runs) == 3 and (finding.kind, finding.hosts) == (LINK, ("a", "c"))


def test_three_hosts_whose_pairs_all_pass_have_no_culprit():
    # Together 70 (fail), every pair 90: slow only all three together.
    def efficiency(group):
        return 70.0 if len(group) == 3 else 90.0
    finding, runs = _search(["a", "b", "c"], efficiency)
    assert len(runs) == 3 and (finding.kind, finding.hosts) == (NONE, ("a", "b", "c"))


def test_four_hosts_halve_then_test_the_failing_pair_against_a_host_of_the_good_half():
    # a,b 90 pass; c,d 45 fail -> search c,d with a (good): a,c 45 fail, a,d 90 pass -> c.
    finding, runs = _search(["a", "b", "c", "d"], _oracle({"c": 45.0}))
    assert runs == [("a", "b"), ("c", "d"), ("a", "c"), ("a", "d")]
    assert (finding.kind, finding.hosts) == (HOST, ("c",))


def test_four_hosts_where_the_failing_pair_passes_with_a_reference_name_their_link():
    # a,b 90; c,d 40 (their link); a,c 90 and a,d 90: the link c-d.
    finding, runs = _search(["a", "b", "c", "d"], _oracle(slow_links={("c", "d"): 40.0}))
    assert runs[2:] == [("a", "c"), ("a", "d")]
    assert (finding.kind, finding.hosts) == (LINK, ("c", "d"))


def test_four_hosts_with_both_of_a_pair_slow_name_both():
    # a,b 90; c,d 45; a,c 45 and a,d 45: each fails with the reference a.
    finding, _ = _search(["a", "b", "c", "d"], _oracle({"c": 45.0, "d": 45.0}))
    assert (finding.kind, finding.hosts) == (HOSTS, ("c", "d"))


def test_four_hosts_whose_halves_both_pass_have_no_culprit():
    def efficiency(group):
        return 60.0 if len(group) == 4 else 90.0
    finding, runs = _search(["a", "b", "c", "d"], efficiency)
    assert runs == [("a", "b"), ("c", "d")]
    assert (finding.kind, finding.hosts) == (NONE, ("a", "b", "c", "d"))


HOSTS8 = ["h%d" % i for i in range(8)]


def test_eight_hosts_take_six_runs_to_name_one_slow_host():
    # h0-h3 90 pass, h4-h7 45 fail -> h4,h5 45 fail, h6,h7 90 pass -> h4,h5 with h0:
    # h0,h4 90 pass, h0,h5 45 fail -> h5.
    finding, runs = _search(HOSTS8, _oracle({"h5": 45.0}))
    assert runs == [("h0", "h1", "h2", "h3"), ("h4", "h5", "h6", "h7"), ("h4", "h5"),
                    ("h6", "h7"), ("h0", "h4"), ("h0", "h5")]
    assert (finding.kind, finding.hosts) == (HOST, ("h5",))


def test_eight_hosts_with_two_slow_halves_follow_the_lower_one():
    # h0-h3 (h1) 45 and h4-h7 (h6) 30 both fail -> the lower, h4-h7: h4,h5 90 pass,
    # h6,h7 30 fail -> h6,h7 with h4 (the passing half's first): h4,h6 30 fail, h4,h7 90 -> h6.
    finding, runs = _search(HOSTS8, _oracle({"h1": 45.0, "h6": 30.0}))
    assert runs == [("h0", "h1", "h2", "h3"), ("h4", "h5", "h6", "h7"), ("h4", "h5"),
                    ("h6", "h7"), ("h4", "h6"), ("h4", "h7")]
    assert (finding.kind, finding.hosts) == (HOST, ("h6",))


def test_eight_hosts_whose_halves_fail_all_the_way_down_end_at_a_pair():
    # Every group with any of h0, h2, h4, h6 is slow: both halves fail at every level, the
    # lower (ties: the first) is followed, no host is ever known to be fine.
    finding, runs = _search(HOSTS8, _oracle({"h0": 40.0, "h2": 40.0, "h4": 40.0, "h6": 40.0}))
    assert runs == [("h0", "h1", "h2", "h3"), ("h4", "h5", "h6", "h7"), ("h0", "h1"),
                    ("h2", "h3")]
    assert (finding.kind, finding.hosts) == (LINK, ("h0", "h1"))


def test_six_hosts_split_into_triangles_whose_failing_pairs_are_tested_with_a_reference():
    # h0-h2 90 pass; h3-h5 40 fail -> its pairs: h3,h4 40, h3,h5 40, h4,h5 40 all fail ->
    # each with h0: h0,h3 40 fail, h0,h4 40 fail, h0,h5 90 pass -> h3 and h4.
    finding, runs = _search(["h%d" % i for i in range(6)], _oracle({"h3": 40.0, "h4": 40.0}))
    assert runs[-3:] == [("h0", "h3"), ("h0", "h4"), ("h0", "h5")]
    assert (finding.kind, finding.hosts) == (HOSTS, ("h3", "h4"))


def test_a_group_at_the_expectation_passes():
    # 80 is not below 80: the pair a,b passes, a,c and b,c fail.
    finding, _ = _search(["a", "b", "c"], _oracle({"c": 79.9}, fine=80.0))
    assert finding.hosts == ("c",)


def test_halves_of_an_odd_group_put_the_extra_host_last():
    assert halves(("a", "b", "c", "d", "e")) == (("a", "b"), ("c", "d", "e"))


@pytest.mark.parametrize("hosts,measured", [
    (["a"], {("a",): 10.0}),
    (["a", "b"], {}),
    (["a", "b"], {("a", "b"): 85.0}),
])
def test_the_search_starts_only_from_a_failing_ring_of_two_or_more(hosts, measured):
    with pytest.raises(ValueError):
        next_step(hosts, measured, 80.0)
