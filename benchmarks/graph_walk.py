"""A traced step's graph as one graph: every op of the function and of the functions it calls
(per-replica functions, XLA-compiled functions, the branches of a cond), one node per call site,
and each input resolved to the op that makes it across calls. What step_graph and step_overlap
read a step with.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

COLLECTIVES = frozenset({
    "CollectiveReduce", "CollectiveReduceV2", "CollectiveReduceV3", "CollectiveReduceScatterV2",
    "NcclAllReduce", "NcclReduce", "XlaAllReduce", "HorovodAllreduce"})
ASSIGNS = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})
WRITE_PREFIXES = ("ResourceApply", "ResourceSparseApply", "ResourceScatter")
# Ops that launch no kernel of their own: walked through, not counted.
FREE = frozenset({
    "Identity", "IdentityN", "Reshape", "ReadVariableOp", "Const", "NoOp", "Placeholder",
    "Squeeze", "ExpandDims", "StopGradient", "Snapshot", "PreventGradient", "VarHandleOp",
    "Shape", "Size", "Rank"})
SUMS = frozenset({"AddN", "AddV2", "Add"})
CALLS = ("PartitionedCall", "StatefulPartitionedCall")
CONDS = ("If", "StatelessIf")
BACKWARD_SCOPE = "gradient_tape/"


def short_device(device: str) -> str:
    """'/job:localhost/replica:0/task:0/device:CPU:3' -> 'CPU:3'; '' stays ''."""
    if not device:
        return ""
    spec = tf.DeviceSpec.from_string(device)
    if spec.device_type is None:
        return ""
    return "%s:%d" % (spec.device_type, spec.device_index or 0)


@dataclasses.dataclass(frozen=True)
class Node:
    ctx: tuple            # the call sites leading here (call ops' keys), outermost first
    op: object            # tf.Operation


class Graph:
    """Every op of a traced function and of the functions it calls, one node per call site."""

    def __init__(self, concrete):
        self.top = concrete.graph
        self.functions: dict[str, object] = {}
        self._collect(self.top)
        self.nodes: list[Node] = []
        self.device: dict[Node, str] = {}
        self.in_xla: dict[Node, bool] = {}
        self.callee: dict[Node, list] = {}      # call node -> [(graph, input offset)]
        self.parent: dict[tuple, Node] = {}     # ctx -> the call node that opened it
        self.inputs_of: dict[Node, list] = {}   # data_inputs' answers
        definition = getattr(concrete, "function_def", None)
        compiled = bool(definition is not None and definition.attr["_XlaMustCompile"].b)
        self._expand(self.top, (), "", compiled)

    def _collect(self, graph) -> None:
        for name, fn in getattr(graph, "_functions", {}).items():
            if name not in self.functions:
                self.functions[name] = fn
                inner = getattr(fn, "graph", None)
                if inner is not None:
                    self._collect(inner)

    def _graph_of(self, name: str):
        fn = self.functions.get(name)
        return getattr(fn, "graph", None) if fn is not None else None

    def _compiled(self, op, name: str) -> bool:
        try:
            if op.get_attr("_XlaMustCompile"):
                return True
        except (ValueError, TypeError):
            pass
        fn = self.functions.get(name)
        definition = getattr(fn, "definition", None)
        return bool(definition is not None and definition.attr["_XlaMustCompile"].b)

    def _callees(self, op) -> list[tuple[object, int, bool]]:
        """(graph, offset of its first argument among the op's inputs, compiled) per callee."""
        names = []
        if op.type in CALLS:
            names = [(op.get_attr("f").name, 0)]
        elif op.type in CONDS:
            names = [(op.get_attr("then_branch").name, 1), (op.get_attr("else_branch").name, 1)]
        elif op.type in self.functions:
            names = [(op.type, 0)]
        out = []
        for name, offset in names:
            graph = self._graph_of(name)
            if graph is not None:
                out.append((graph, offset, self._compiled(op, name)))
        return out

    def _expand(self, graph, ctx: tuple, device: str, in_xla: bool) -> None:
        for op in graph.get_operations():
            node = Node(ctx, op)
            self.nodes.append(node)
            self.device[node] = short_device(op.device) or device
            self.in_xla[node] = in_xla
            callees = self._callees(op)
            if callees:
                self.callee[node] = [(g, offset) for g, offset, _ in callees]
                inner_ctx = ctx + (id(op),)
                self.parent[inner_ctx] = node
                for g, _, compiled in callees:
                    self._expand(g, inner_ctx, self.device[node], in_xla or compiled)

    def producers(self, node: Node, tensor) -> list[tuple[Node, int]]:
        """The nodes (and output index) that make `tensor`, an input of `node`, across calls."""
        return self._resolve(node.ctx, tensor)

    def _resolve(self, ctx: tuple, tensor) -> list[tuple[Node, int]]:
        op = tensor.op
        node = Node(ctx, op)
        if node in self.callee:                      # a call's output: the callee's output
            out = []
            for graph, _ in self.callee[node]:
                out += self._resolve(ctx + (id(op),), graph.outputs[tensor.value_index])
            return out
        if op.type == "Placeholder" and ctx:         # an argument: the call site's input
            call = self.parent[ctx]
            for graph, offset in self.callee[call]:
                if op.graph is graph:
                    index = next(i for i, t in enumerate(graph.inputs) if t is tensor)
                    return self._resolve(call.ctx, call.op.inputs[offset + index])
        if op.type == "Identity" and tensor.dtype == tf.resource:
            return self._resolve(ctx, op.inputs[0])
        return [(node, tensor.value_index)]


def data_inputs(graph: Graph, node: Node) -> list[tuple[Node, int]]:
    # Once per node: the update slices walk the same nodes once per variable.
    out = graph.inputs_of.get(node)
    if out is None:
        out = []
        for tensor in node.op.inputs:
            if tensor.dtype != tf.resource:
                out += graph.producers(node, tensor)
        graph.inputs_of[node] = out
    return out


def nbytes(tensor) -> int:
    n = tensor.shape.num_elements()
    return (n or 0) * tensor.dtype.size


def backward(op) -> bool:
    name = op.name
    return name.startswith(BACKWARD_SCOPE) or ("/" + BACKWARD_SCOPE) in name


def in_backward(graph: Graph, node: Node) -> bool:
    """Whether `node` is the backward pass's: an op of the tape's name scope, or the sum the tape
    makes of a variable's several gradient contributions (outside that scope)."""
    return backward(node.op) or (node.op.type in SUMS and any(
        backward(p.op) for p, _ in data_inputs(graph, node)))
