"""Which host (or link between two hosts) drags a ring of hosts that are each fine alone: the
groups of hosts to run together next, from the scaling efficiencies measured so far.

The search starts from every host together, measured and below the expectation, and narrows:
  * a group of 4 or more is split into halves (the first n//2 hosts, the rest), each run as a
    cluster of its own; the search goes on in the half below the expectation, or in the
    lower one when both are; a passing half's hosts become references (hosts known to be
    fine in a ring);
  * a group of 3 runs its three pairs: the host of the two failing pairs (the pair without it
    passes) drags the ring; one failing pair is the link between its two hosts;
  * a failing pair runs each of its hosts with a reference: the host whose pair with the
    reference fails drags the ring, and when both pass, it is the link between the two.
    Without a reference (two hosts in all, or halves that all failed) the pair is the answer:
    the link, or one of its two hosts, which nothing here can tell apart.
It ends without a culprit when every half (or pair) passes while the group does not: then
the hosts are slow only all together (the network between the halves, the ring's length).

`next_step` is pure: given the hosts and every group's efficiency measured so far, it replays
the search from the start and returns the groups still to run, or the Finding. A group is a
tuple of hosts in the order of `hosts`.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence, Union

Group = tuple[str, ...]

HOST, LINK, HOSTS, NONE = "host", "link", "hosts", "none"


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str          # HOST: hosts[0] drags the ring; LINK: the link between the 2 hosts;
                       # HOSTS: each of the hosts does; NONE: no one host or link
    hosts: Group       # the hosts named (NONE: the group the search ended in)
    why: str           # one phrase, the rule that decided


def _canon(hosts: Sequence[str], group: Sequence[str]) -> Group:
    order = {h: i for i, h in enumerate(hosts)}
    return tuple(sorted(set(group), key=order.__getitem__))


def halves(group: Group) -> tuple[Group, Group]:
    cut = len(group) // 2
    return group[:cut], group[cut:]


def next_step(hosts: Sequence[str], measured: Mapping[Group, float],
              expected: float) -> Union[list[Group], Finding]:
    """The groups to run next (each a cluster of its own, in this order), or the Finding.

    `measured`: efficiency (%) of each group run so far, every host together included (it
    must be below `expected`: the search starts from a failing ring). A group fails when its
    efficiency is below `expected`."""
    group = tuple(hosts)
    if len(group) < 2:
        raise ValueError("halving needs 2 or more hosts, not %d" % len(group))
    if group not in measured or measured[group] >= expected:
        raise ValueError("halving starts from every host together, measured and failing")

    def fails(g: Group) -> bool:
        return measured[g] < expected

    good: list[str] = []        # hosts of groups that passed: references for a pair
    while True:
        if len(group) >= 4:
            a, b = halves(group)
            missing = [g for g in (a, b) if g not in measured]
            if missing:
                return missing
            if fails(a) and not fails(b):
                good += b
                group = a
            elif fails(b) and not fails(a):
                good += a
                group = b
            elif fails(a) and fails(b):
                group = a if measured[a] <= measured[b] else b
            else:
                return Finding(NONE, group, "each half passes alone; the hosts are slow only "
                                            "all together")
        elif len(group) == 3:
            return _triangle(hosts, group, measured, fails, good)
        else:
            return _pair(hosts, group, measured, fails, good)


def _triangle(hosts, group, measured, fails, good) -> Union[list[Group], Finding]:
    pairs = [_canon(hosts, p) for p in ((group[0], group[1]), (group[0], group[2]),
                                        (group[1], group[2]))]
    missing = [p for p in pairs if p not in measured]
    if missing:
        return missing
    failing = [p for p in pairs if fails(p)]
    if not failing:
        return Finding(NONE, group, "each pair of them passes; the three are slow only "
                                    "together")
    if len(failing) == 1:
        return Finding(LINK, failing[0], "the only pair of the three that fails")
    if len(failing) == 2:
        (host,) = set(failing[0]) & set(failing[1])
        return Finding(HOST, (host,), "both pairs with it fail, the pair without it passes")
    if not good:
        return Finding(NONE, group, "every pair of them fails, and no host is known to be "
                                    "fine in a ring to tell which")
    return _with_reference(hosts, group, measured, fails, good[0])


def _pair(hosts, group, measured, fails, good) -> Union[list[Group], Finding]:
    if not good:
        return Finding(LINK, group, "the pair fails and no third host is known to be fine in "
                                    "a ring: the link between them, or one of the two")
    return _with_reference(hosts, group, measured, fails, good[0])


def _with_reference(hosts, group, measured, fails, reference) -> Union[list[Group], Finding]:
    """Each host of `group` (every pair of which fails) with a host known to be fine."""
    pairs = [_canon(hosts, (h, reference)) for h in group]
    missing = [p for p in pairs if p not in measured]
    if missing:
        return missing
    dragging = tuple(h for h, p in zip(group, pairs) if fails(p))
    if len(dragging) == 1:
        return Finding(HOST, dragging, "its pair with %s fails, the other host's passes"
                       % reference)
    if dragging:
        return Finding(HOSTS, dragging, "each fails in a pair with %s" % reference)
    if len(group) == 2:
        return Finding(LINK, group, "each passes in a pair with %s; together they fail"
                       % reference)
    return Finding(NONE, group, "each passes in a pair with %s; only pairs among them fail"
                   % reference)
