"""What a traced training step does, read from its graph: the facts a GPU would show.

`audit(concrete_function, variables)` walks the step's graph and every function it calls
(per-replica functions, XLA-compiled functions, the branches of a cond), each call site on its
own, and reports:

- update kernels per variable copy: the ops the step runs to write one copy of a trainable
  variable and its optimizer slots, from its complete gradient on. Counted backwards from the
  ops that write the copy or its slots; the count stops at the backward pass (ops in the
  `gradient_tape/` name scope), at a cross-device op (a collective, or a sum of values made on
  several devices) and at an op that also feeds another copy's update (the learning rate, a
  pack of gradients being split). Ops that launch no kernel (Identity, Reshape, ReadVariableOp,
  Const, ...) are walked through and not counted. Keras' SGD counts 2 (multiply, subtract),
  its Nesterov momentum 8, a fused training kernel 1;
- all-reduce inputs: each collective op (dtype, bytes, device; one op per pack and device) and
  each cross-device sum (the parameter-server reduction: a sum on one device of values made on
  several);
- bytes of variables each device holds (every copy of every variable and slot);
- which parts of the step sit inside an XLA cluster (a function compiled with jit_compile):
  forward, backward, all-reduce, update;
- overlap: for each gradient reduction (a pack's collective on one device, or a
  parameter-server sum), whether it waits for the backward pass's last gradient, and for how
  many of the step's gradients (see `_Ancestry` for what "waits" follows).

Devices are compared by type and index only ("CPU:3"), so a step traced on logical CPU devices
reads as the same step on GPUs would, device for device.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, Optional

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
# Ops between a gradient and the reduction that carries it (a pack: reshape, concat, cast).
PACKING = FREE | {"Cast", "ConcatV2", "Concat", "Pack"}
FORWARD_COMPUTE = frozenset({
    "Conv2D", "MatMul", "BatchMatMulV2", "BatchMatMulV3", "DepthwiseConv2dNative", "Einsum"})
_CALLS = ("PartitionedCall", "StatefulPartitionedCall")
_CONDS = ("If", "StatelessIf")
BACKWARD_SCOPE = "gradient_tape/"


@dataclasses.dataclass(frozen=True)
class VariableCopy:
    """One resource of the step: a variable, or one device's copy of a replicated one."""
    name: str                 # the variable's path
    owner: str                # the trainable variable it serves (itself, or a slot's); "" if none
    device: str               # "GPU:0", "CPU:3"
    nbytes: int
    dtype: str
    handle_id: int            # id() of its handle tensor, as the traced function captured it


@dataclasses.dataclass(frozen=True)
class Reduction:
    """One cross-device op: a collective (one per pack and device) or a sum on one device."""
    kind: str                 # the op type
    dtype: str
    nbytes: int
    device: str
    in_xla: bool


@dataclasses.dataclass(frozen=True)
class ReductionWait:
    """What one gradient reduction waits for before it can start."""
    kind: str                 # the reduction's op type
    device: str
    carried: int              # gradients it carries (from the devices it reduces)
    waits_for: int            # of the step's gradients on those devices, how many it waits for
    gradients: int            # the step's gradients on those devices
    waits_for_last: bool      # whether the backward pass's last gradient is one of them


@dataclasses.dataclass
class StepAudit:
    update_kernels: dict[tuple[str, str], tuple[str, ...]]   # (variable, device) -> op types
    reductions: list[Reduction]
    bytes_per_device: dict[str, int]
    largest_variable_bytes: int
    xla: dict[str, str]       # forward/backward/all-reduce/update -> "all" | "none" | "some" | "-"
    num_devices: int
    overlap: list[ReductionWait] = dataclasses.field(default_factory=list)

    # -- summaries ------------------------------------------------------------------------------
    def kernels_per_copy(self) -> tuple[int, int]:
        """(fewest, most) update kernels of any trainable variable copy; (0, 0) if none."""
        counts = [len(ops) for ops in self.update_kernels.values()]
        return (min(counts), max(counts)) if counts else (0, 0)

    def kernel_kinds(self) -> str:
        """The most common update, as its op types ("Mul+AssignSubVariableOp")."""
        kinds = collections.Counter("+".join(ops) for ops in self.update_kernels.values())
        return kinds.most_common(1)[0][0] if kinds else ""

    def collectives(self) -> list[Reduction]:
        return [r for r in self.reductions if r.kind in COLLECTIVES]

    def sums(self) -> list[Reduction]:
        return [r for r in self.reductions if r.kind not in COLLECTIVES]

    def reduced_dtypes(self) -> set[str]:
        return {r.dtype for r in self.reductions}

    def packs_per_device(self) -> int:
        """Collective ops on the busiest device: the packs one step all-reduces."""
        per_device = collections.Counter(r.device for r in self.collectives())
        return max(per_device.values()) if per_device else 0

    def reduced_bytes_per_device(self) -> dict[str, int]:
        """Bytes each device all-reduces (its collectives' inputs) or sums (its sums' output)."""
        out: dict[str, int] = collections.Counter()
        for r in self.reductions:
            out[r.device] += r.nbytes
        return dict(out)

    def fair_share_bytes(self) -> float:
        return sum(self.bytes_per_device.values()) / max(self.num_devices, 1)

    def waiting_per_device(self) -> dict[str, list[bool]]:
        """Per device, whether each of its reductions waits for the backward pass's last
        gradient, in the order the step creates them."""
        out: dict[str, list[bool]] = collections.defaultdict(list)
        for w in self.overlap:
            out[w.device].append(w.waits_for_last)
        return dict(out)


# --- variables -----------------------------------------------------------------------------------

def _components(variable) -> list:
    """The tf.Variable resources behind a Keras or tf.distribute variable."""
    v = getattr(variable, "value", variable) if not isinstance(variable, tf.Variable) else variable
    if hasattr(v, "values") and isinstance(getattr(v, "values"), (tuple, list)):
        return list(v.values)                     # MirroredVariable and friends
    inner = getattr(v, "_v", None)                # AggregatingVariable
    return [inner if inner is not None else v]


def short_device(device: str) -> str:
    """'/job:localhost/replica:0/task:0/device:CPU:3' -> 'CPU:3'; '' stays ''."""
    if not device:
        return ""
    spec = tf.DeviceSpec.from_string(device)
    if spec.device_type is None:
        return ""
    return "%s:%d" % (spec.device_type, spec.device_index or 0)


def describe_variables(trainable: Iterable, others: Iterable) -> list[VariableCopy]:
    """Every copy of the trainable variables and of the other variables (optimizer slots and
    counters, layer state). A slot's owner is the trainable variable whose path Keras put in its
    name (`{path with _}_{slot}`, Keras 3.8 to 3.15)."""
    trainable = list(trainable)
    prefixes = sorted(((v.path.replace("/", "_"), v.path) for v in trainable),
                      key=lambda item: -len(item[0]))
    copies = []
    seen: set[int] = set()
    for variable, is_trainable in [(v, True) for v in trainable] + [(v, False) for v in others]:
        if id(variable) in seen:
            continue
        seen.add(id(variable))
        path = getattr(variable, "path", variable.name)
        owner = path if is_trainable else next(
            (full for prefix, full in prefixes if path.split("/")[-1].startswith(prefix + "_")),
            "")
        for comp in _components(variable):
            nbytes = comp.shape.num_elements() * comp.dtype.size
            copies.append(VariableCopy(path, owner, short_device(comp.device), nbytes,
                                       comp.dtype.name, id(comp.handle)))
    return copies


# --- the graph walk --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Node:
    ctx: tuple            # the call sites leading here (call ops' keys), outermost first
    op: object            # tf.Operation


class _Graph:
    """Every op of a traced function and of the functions it calls, one node per call site."""

    def __init__(self, concrete):
        self.top = concrete.graph
        self.functions: dict[str, object] = {}
        self._collect(self.top)
        self.nodes: list[_Node] = []
        self.device: dict[_Node, str] = {}
        self.in_xla: dict[_Node, bool] = {}
        self.callee: dict[_Node, list] = {}      # call node -> [(graph, input offset)]
        self.parent: dict[tuple, _Node] = {}     # ctx -> the call node that opened it
        self.inputs_of: dict[_Node, list] = {}   # _data_inputs' answers
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
        if op.type in _CALLS:
            names = [(op.get_attr("f").name, 0)]
        elif op.type in _CONDS:
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
            node = _Node(ctx, op)
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

    def producers(self, node: _Node, tensor) -> list[tuple[_Node, int]]:
        """The nodes (and output index) that make `tensor`, an input of `node`, across calls."""
        return self._resolve(node.ctx, tensor)

    def _resolve(self, ctx: tuple, tensor) -> list[tuple[_Node, int]]:
        op = tensor.op
        node = _Node(ctx, op)
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


def _data_inputs(graph: _Graph, node: _Node) -> list[tuple[_Node, int]]:
    # Once per node: the update slices walk the same nodes once per variable.
    out = graph.inputs_of.get(node)
    if out is None:
        out = []
        for tensor in node.op.inputs:
            if tensor.dtype != tf.resource:
                out += graph.producers(node, tensor)
        graph.inputs_of[node] = out
    return out


def _written(graph: _Graph, node: _Node) -> list[_Node]:
    """The resource leaves (top-level placeholders) a write op writes."""
    op = node.op
    if op.type in ASSIGNS:
        tensors = [op.inputs[0]]
    elif op.type.startswith(WRITE_PREFIXES):
        tensors = [t for t in op.inputs if t.dtype == tf.resource]
    else:
        return []
    return [leaf for t in tensors for leaf, _ in graph.producers(node, t)]


def _nbytes(tensor) -> int:
    n = tensor.shape.num_elements()
    return (n or 0) * tensor.dtype.size


def _backward(op) -> bool:
    name = op.name
    return name.startswith(BACKWARD_SCOPE) or ("/" + BACKWARD_SCOPE) in name


def held_bytes(variables: Iterable[VariableCopy]) -> dict[str, int]:
    """Bytes of variables (every copy, every slot) each device holds."""
    per_device: dict[str, int] = collections.Counter()
    for v in variables:
        per_device[v.device] += v.nbytes
    return dict(per_device)


def audit(concrete, variables: list[VariableCopy],
          num_devices: Optional[int] = None) -> StepAudit:
    """What the step `concrete` (a traced tf.function) does with `variables` (from
    describe_variables). num_devices, for the fair share: the devices the variables are on
    unless given (a replica may hold none, as under a parameter server)."""
    graph = _Graph(concrete)
    handle_to_copy = {v.handle_id: v for v in variables}
    leaf_copy: dict[object, VariableCopy] = {}
    for external, internal in concrete.graph.captures:
        copy = handle_to_copy.get(id(external))
        if copy is not None:
            leaf_copy[internal.op] = copy

    # Writes of each trainable copy and its slots.
    writes: dict[tuple[str, str], list[_Node]] = collections.defaultdict(list)
    trainable_devices = {(v.name, v.device) for v in variables if v.owner == v.name}
    for node in graph.nodes:
        for leaf in _written(graph, node):
            copy = leaf_copy.get(leaf.op)
            if copy is None or not copy.owner:
                continue
            key = (copy.owner, copy.device)
            if key not in trainable_devices:     # a slot on another device than its variable
                key = (copy.owner, next(d for n, d in sorted(trainable_devices)
                                        if n == copy.owner))
            if node not in writes[key]:
                writes[key].append(node)

    # Cross-device ops: collectives, and the sums of values made on several devices that feed
    # an update (not the step's output, the mean of the replicas' losses).
    reductions: list[Reduction] = []
    boundary: set[_Node] = set()
    feeding = _ancestors(graph, [n for nodes in writes.values() for n in nodes])
    for node in graph.nodes:
        op = node.op
        if op.type in COLLECTIVES:
            t = op.inputs[0]
            reductions.append(Reduction(op.type, t.dtype.name, _nbytes(t), graph.device[node],
                                        graph.in_xla[node]))
            boundary.add(node)
        elif op.type in SUMS and node in feeding:
            sources = {graph.device[p] for p, _ in _data_inputs(graph, node)}
            if len(sources - {""}) > 1:
                t = op.outputs[0]
                reductions.append(Reduction(op.type, t.dtype.name, _nbytes(t),
                                            graph.device[node], graph.in_xla[node]))
                boundary.add(node)

    def walk(starts: list[_Node], stop: set) -> set[_Node]:
        seen: set[_Node] = set()
        pending = list(starts)
        while pending:
            node = pending.pop()
            if node in seen or node in stop or node in boundary or _backward(node.op):
                continue
            if node.op.type == "Placeholder" and not node.ctx:
                continue
            seen.add(node)
            pending += [p for p, _ in _data_inputs(graph, node)]
        return seen

    reached: dict[_Node, int] = collections.Counter()
    slices = {key: walk(nodes, set()) for key, nodes in writes.items()}
    for found in slices.values():
        for node in found:
            reached[node] += 1
    shared = {node for node, n in reached.items() if n > 1}
    update_kernels = {}
    for key, nodes in writes.items():
        own = walk(nodes, shared)
        update_kernels[key] = tuple(sorted(n.op.type for n in own if n.op.type not in FREE))

    per_device = held_bytes(variables)
    xla = _xla_coverage(graph, boundary, writes)
    return StepAudit(update_kernels=update_kernels, reductions=reductions,
                     bytes_per_device=per_device,
                     largest_variable_bytes=max((v.nbytes for v in variables), default=0),
                     xla=xla, num_devices=num_devices or len(per_device),
                     overlap=_overlap(graph, [n for n in graph.nodes
                                              if n in boundary and n in feeding]))


def _ancestors(graph: _Graph, starts: list[_Node]) -> set[_Node]:
    seen: set[_Node] = set()
    pending = list(starts)
    while pending:
        node = pending.pop()
        if node not in seen:
            seen.add(node)
            pending += [p for p, _ in _data_inputs(graph, node)]
    return seen


def _coverage(flags: list[bool]) -> str:
    if not flags:
        return "-"
    return "all" if all(flags) else ("none" if not any(flags) else "some")


def _xla_coverage(graph: _Graph, boundary: set, writes: dict) -> dict[str, str]:
    forward = [graph.in_xla[n] for n in graph.nodes
               if n.op.type in FORWARD_COMPUTE and not _backward(n.op)]
    backward = [graph.in_xla[n] for n in graph.nodes
                if _backward(n.op) and n.op.type not in FREE]
    reduction = [graph.in_xla[n] for n in boundary]
    update = [graph.in_xla[n] for nodes in writes.values() for n in nodes]
    return {"forward": _coverage(forward), "backward": _coverage(backward),
            "all-reduce": _coverage(reduction), "update": _coverage(update)}


def xla_label(xla: dict[str, str]) -> str:
    """'forward+backward+all-reduce+update' for the parts wholly inside XLA clusters."""
    inside = [part for part, where in xla.items() if where == "all"]
    partly = [part + "(part)" for part, where in xla.items() if where == "some"]
    return "+".join(inside + partly) or "none"


# --- overlap ---------------------------------------------------------------------------------

def _carried(graph: _Graph, reduction: _Node) -> list[_Node]:
    """The gradients a reduction carries: for each, the backward pass's op that completes it
    (its own kernel, or the sum of several contributions, as of the weight decay), reached
    through whatever lies between (packing, casts, the loss scale's division, a cond)."""
    found, seen = [], set()
    pending = list(_data_inputs(graph, reduction))
    while pending:
        node, index = pending.pop()
        if (node, index) in seen:
            continue
        seen.add((node, index))
        op = node.op
        inputs = _data_inputs(graph, node)
        if op.type == "IdentityN":          # output k is input k
            pending += graph.producers(node, op.inputs[index])
        elif (_backward(op) and op.type not in FREE) or (
                op.type in SUMS and any(_backward(p.op) for p, _ in inputs)):
            found.append(node)
        elif not (op.type == "Placeholder" and not node.ctx):
            pending += inputs
    return list(dict.fromkeys(found))


class _Ancestry:
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

    def __init__(self, graph: _Graph):
        self.graph = graph
        self.members: dict[tuple, list[_Node]] = collections.defaultdict(list)
        for node in graph.nodes:
            self.members[node.ctx].append(node)
        self.position = {node: i for i, node in enumerate(graph.nodes)}

    def _region(self, node: _Node) -> Optional[_Node]:
        """The outermost compiled call that holds `node` (None outside any, or when the whole
        step is one compiled function)."""
        for depth in range(1, len(node.ctx) + 1):
            call = self.graph.parent[node.ctx[:depth]]
            inner = self.members[node.ctx[:depth]]
            if not self.graph.in_xla[call] and inner and self.graph.in_xla[inner[0]]:
                return call
        return None

    def _body(self, call: _Node) -> list[_Node]:
        out, pending = [], [call.ctx + (id(call.op),)]
        while pending:
            ctx = pending.pop()
            for node in self.members.get(ctx, ()):
                out.append(node)
                if node in self.graph.callee:
                    pending.append(ctx + (id(node.op),))
        return out

    def of(self, start: _Node) -> set[_Node]:
        graph = self.graph
        seen: set[_Node] = set()
        opened: set[_Node] = set()
        pending = [start]

        def finished(call: _Node) -> None:
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
            for producer, _ in _data_inputs(graph, node):
                other = self._region(producer)
                if other is not None and other != region:
                    finished(other)
                pending.append(producer)
            if not graph.in_xla[node]:
                for op in node.op.control_inputs:
                    control = _Node(node.ctx, op)
                    pending.append(control)
                    if control in graph.callee:
                        finished(control)
            if node.ctx:
                call = graph.parent[node.ctx]
                if not graph.in_xla[call]:
                    for op in call.op.control_inputs:
                        pending.append(_Node(call.ctx, op))
                if call.op.type in _CONDS:
                    pending += [p for p, _ in graph.producers(call, call.op.inputs[0])]
                if call == region:
                    pending += [p for p, _ in _data_inputs(graph, call)]
        seen.discard(start)
        return seen

    def depth(self) -> dict[_Node, int]:
        """Each node's longest chain of data inputs: the backward pass's last gradient is the
        one at the end of the longest chain (the first layer's, after every layer above it)."""
        depth: dict[_Node, int] = {}
        for root in self.graph.nodes:
            if root in depth:
                continue
            stack = [(root, False)]
            while stack:
                node, expanded = stack.pop()
                if node in depth:
                    continue
                inputs = [p for p, _ in _data_inputs(self.graph, node)]
                if expanded:
                    depth[node] = 1 + max((depth.get(p, 0) for p in inputs), default=0)
                    continue
                stack.append((node, True))
                stack += [(p, False) for p in inputs if p not in depth]
        return depth


def _overlap(graph: _Graph, reductions: list[_Node]) -> list[ReductionWait]:
    """For each gradient reduction, whether it waits for the backward pass's last gradient."""
    if not reductions:
        return []
    ancestry = _Ancestry(graph)
    carried = {r: _carried(graph, r) for r in reductions}
    per_device: dict[str, set[_Node]] = collections.defaultdict(set)
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
