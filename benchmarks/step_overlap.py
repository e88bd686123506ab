"""Whether each gradient reduction of a traced step can start while the backward pass runs.

For each reduction (a pack's collective on one device, a parameter-server sum on its variable's
device) `overlap` finds the gradients it carries and everything it must wait for
(`Ancestry`), and says whether the backward pass's last gradient is among them: a reduction that
waits for it cannot overlap the backward pass, whatever the hardware does.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Optional

from graph_walk import (
    CONDS, FREE, Graph, Node, data_inputs, in_backward)

# Ops between a gradient and the reduction that carries it (a pack: reshape, concat, cast).
PACKING = FREE | {"Cast", "ConcatV2", "Concat", "Pack"}


@dataclasses.dataclass(frozen=True)
class ReductionWait:
    """What one gradient reduction waits for before it can start."""
    kind: str                 # the reduction's op type
    device: str
    carried: int              # gradients it carries (from the devices it reduces)
    waits_for: int            # of the step's gradients on those devices, how many it waits for
    gradients: int            # the step's gradients on those devices
    waits_for_last: bool      # whether the backward pass's last gradient is one of them



def _carried(graph: Graph, reduction: Node) -> list[Node]:
    """The gradients a reduction carries: for each, the backward pass's op that completes it
    (its own kernel, or the sum of several contributions, as of the weight decay), reached
    through whatever lies between (packing, casts, the loss scale's division, a cond)."""
    found, seen = [], set()
    pending = list(data_inputs(graph, reduction))
    while pending:
        node, index = pending.pop()
        if (node, index) in seen:
            continue
        seen.add((node, index))
        op = node.op
        if op.type == "IdentityN":          # output k is input k
            pending += graph.producers(node, op.inputs[index])
        elif op.type not in FREE and in_backward(graph, node):
            found.append(node)
        elif not (op.type == "Placeholder" and not node.ctx):
            pending += data_inputs(graph, node)
    return list(dict.fromkeys(found))


class Ancestry:
    """What must have run before a node can start, as TensorFlow's executor and XLA order it:

    - data inputs, across call sites;
    - control inputs, outside XLA only: tf2xla builds each XLA op from its data edges alone
      (graph_compiler.cc skips control edges), so inside a compiled function a control edge
      orders nothing;
    - a function call's control inputs, for every op of the function (its inlined body waits
      for them), and a cond's predicate for the ops of its branches;
    - a compiled function is one launch: it starts once all its inputs are there, and every one
      of its outputs exists only when all of it has run.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.members: dict[tuple, list[Node]] = collections.defaultdict(list)
        for node in graph.nodes:
            self.members[node.ctx].append(node)
        self.position = {node: i for i, node in enumerate(graph.nodes)}

    def _region(self, node: Node) -> Optional[Node]:
        """The outermost compiled call that holds `node` (None outside any, or when the whole
        step is one compiled function)."""
        for depth in range(1, len(node.ctx) + 1):
            call = self.graph.parent[node.ctx[:depth]]
            inner = self.members[node.ctx[:depth]]
            if not self.graph.in_xla[call] and inner and self.graph.in_xla[inner[0]]:
                return call
        return None

    def _body(self, call: Node) -> list[Node]:
        out, pending = [], [call.ctx + (id(call.op),)]
        while pending:
            ctx = pending.pop()
            for node in self.members.get(ctx, ()):
                out.append(node)
                if node in self.graph.callee:
                    pending.append(ctx + (id(node.op),))
        return out

    def of(self, start: Node) -> set[Node]:
        graph = self.graph
        seen: set[Node] = set()
        opened: set[Node] = set()
        pending = [start]

        def finished(call: Node) -> None:
            # Every op of a call that must have finished (a control input, a compiled call's
            # output) has run.
            if call not in opened:
                opened.add(call)
                pending.extend(self._body(call))

        while pending:
            node = pending.pop()
            if node in seen:
                continue
            seen.add(node)
            region = self._region(node)
            for producer, _ in data_inputs(graph, node):
                other = self._region(producer)
                if other is not None and other != region:
                    finished(other)
                pending.append(producer)
            if not graph.in_xla[node]:
                for op in node.op.control_inputs:
                    control = Node(node.ctx, op)
                    pending.append(control)
                    if control in graph.callee:
                        finished(control)
            if node.ctx:
                call = graph.parent[node.ctx]
                if not graph.in_xla[call]:
                    for op in call.op.control_inputs:
                        pending.append(Node(call.ctx, op))
                if call.op.type in CONDS:
                    pending += [p for p, _ in graph.producers(call, call.op.inputs[0])]
                if call == region:
                    pending += [p for p, _ in data_inputs(graph, call)]
        seen.discard(start)
        return seen

    def depth(self) -> dict[Node, int]:
        """Each node's longest chain of data inputs: the backward pass's last gradient is the
        one at the end of the longest chain (the first layer's, after every layer above it)."""
        depth: dict[Node, int] = {}
        for root in self.graph.nodes:
            if root in depth:
                continue
            stack = [(root, False)]
            while stack:
                node, expanded = stack.pop()
                if node in depth:
                    continue
                inputs = [p for p, _ in data_inputs(self.graph, node)]
                if expanded:
                    depth[node] = 1 + max((depth.get(p, 0) for p in inputs), default=0)
                    continue
                stack.append((node, True))
                stack += [(p, False) for p in inputs if p not in depth]
        return depth


def overlap(graph: Graph, reductions: list[Node]) -> list[ReductionWait]:
    """For each gradient reduction, whether it waits for the backward pass's last gradient."""
    if not reductions:
        return []
    ancestry = Ancestry(graph)
    carried = {r: _carried(graph, r) for r in reductions}
    per_device: dict[str, set[Node]] = collections.defaultdict(set)
    for nodes in carried.values():
        for node in nodes:
            per_device[graph.device[node]].add(node)
    depth = ancestry.depth()
    last = {d: max(nodes, key=lambda n: (depth[n], ancestry.position[n]))
            for d, nodes in per_device.items()}
    out = []
    for reduction in reductions:
        devices = sorted({graph.device[n] for n in carried[reduction]})
        step_gradients = set().union(*(per_device[d] for d in devices)) if devices else set()
        before = ancestry.of(reduction)
        out.append(ReductionWait(
            kind=reduction.op.type, device=graph.device[reduction],
            carried=len(carried[reduction]), waits_for=len(step_gradients & before),
            gradients=len(step_gradients),
            waits_for_last=any(last[d] in before for d in devices)))
    return out
