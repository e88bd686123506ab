"""The bus bandwidth ring all-reduces can reach over the direct links between GPUs.

NCCL all-reduces within a host over rings: each channel is a ring through every GPU, each GPU
sending to the next over the link that joins the pair, and NCCL runs several channels at once,
as many as the links carry (its search, src/graph/search.cc, takes each channel's bandwidth off
every link the ring crosses, each direction on its own). A ring's busbw is the rate of its
slowest hop, and the channels' rates add up, so what rings over a set of links can reach is the
largest sum of ring rates that no link's capacity is exceeded by: a packing of the rings
(Hamiltonian cycles) into the links, solved here as a linear programme over every ring the
links allow. A link runs both ways at once and a ring and its reverse use opposite directions:
the answer is twice the packing of undirected cycles into the per-direction rates, and on two
GPUs it is the rate of the one link between them.

Standard library and numpy only; GB/s in, GB/s out.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

# Direct meshes of more GPUs than this do not exist (beyond 8, GPUs meet in NVSwitches), and
# the rings to enumerate grow as (n - 1)! / 2.
MAX_MESH = 8


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def rings(nodes: Sequence[int], edges: Mapping[tuple[int, int], float]) -> list[list[int]]:
    """Every ring through all `nodes` over `edges` (pairs with a rate above 0), each once,
    starting at nodes[0], its second node before its last (one of the two directions); on two
    nodes, the pair."""
    nodes = list(nodes)
    joined = {n: {m for m in nodes if m != n and edges.get(_pair(n, m), 0.0) > 0.0}
              for n in nodes}
    first, found = nodes[0], []

    def walk(path: list[int], seen: set[int]) -> None:
        if len(path) == len(nodes):
            if first in joined[path[-1]] and (len(path) == 2 or path[1] < path[-1]):
                found.append(list(path))
            return
        for nxt in sorted(joined[path[-1]] - seen):
            path.append(nxt)
            seen.add(nxt)
            walk(path, seen)
            seen.discard(nxt)
            path.pop()
    walk([first], {first})
    return found


def _max_packing(columns: np.ndarray, capacity: np.ndarray) -> float:
    """max sum(x) subject to columns @ x <= capacity, x >= 0 (capacity >= 0): the simplex
    method on the tableau, Bland's rule (it cannot cycle)."""
    m, k = columns.shape
    table = np.zeros((m + 1, k + m + 1))
    table[:m, :k] = columns
    table[:m, k:k + m] = np.eye(m)
    table[:m, -1] = capacity
    table[m, :k] = -1.0
    basis = list(range(k, k + m))
    eps = 1e-9
    while True:
        entering = next((j for j in range(k + m) if table[m, j] < -eps), None)
        if entering is None:
            return float(table[m, -1])
        rows = [i for i in range(m) if table[i, entering] > eps]
        ratio = min(table[i, -1] / table[i, entering] for i in rows)
        leaving = min((i for i in rows if table[i, -1] / table[i, entering] <= ratio + eps),
                      key=lambda i: basis[i])
        table[leaving] /= table[leaving, entering]
        for i in range(m + 1):
            if i != leaving and table[i, entering] != 0.0:
                table[i] -= table[i, entering] * table[leaving]
        basis[leaving] = entering


def ring_busbw(nodes: Sequence[int], edges: Mapping[tuple[int, int], float]
               ) -> Optional[float]:
    """The most busbw rings through every node reach over `edges` ((a, b) with a < b -> GB/s
    one way), GB/s; None when no ring goes through all of them over these edges."""
    nodes = sorted(nodes)
    if len(nodes) < 2:
        return None
    if len(nodes) == 2:
        rate = edges.get(_pair(*nodes), 0.0)
        return rate if rate > 0.0 else None
    if len(nodes) > MAX_MESH:
        raise ValueError("rings of %d GPUs joined directly: more than %d" % (len(nodes),
                                                                          MAX_MESH))
    found = rings(nodes, edges)
    if not found:
        return None
    used = sorted({_pair(a, b) for ring in found for a, b in zip(ring, ring[1:] + ring[:1])})
    index = {pair: i for i, pair in enumerate(used)}
    columns = np.zeros((len(used), len(found)))
    for j, ring in enumerate(found):
        for a, b in zip(ring, ring[1:] + ring[:1]):
            columns[index[_pair(a, b)], j] = 1.0
    scale = max(edges[pair] for pair in used)
    capacity = np.array([edges[pair] / scale for pair in used])
    return 2.0 * scale * _max_packing(columns, capacity)
