"""What a traced training step does, read from its graph: the facts a GPU would show.

`audit(concrete_function, variables)` walks the step's graph and every function it calls
(per-replica functions, XLA-compiled functions, the branches of a cond), each call site on its
own, and reports:

- update kernels per variable copy: the ops the step runs to write one copy of a trainable
  variable and its optimizer slots, from its complete gradient on. Counted backwards from the
  ops that write the copy or its slots; the count stops at the backward pass (ops in the
  `gradient_tape/` name scope, and the tape's sums of a variable's several gradients), at a
  cross-device op (a collective, or a sum of values made on
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
  many of the step's gradients (step_overlap.py).

Devices are compared by type and index only ("CPU:3"), so a step traced on logical CPU devices
reads as the same step on GPUs would, device for device.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, Optional

import tensorflow as tf

import step_overlap
from graph_walk import (
    ASSIGNS, COLLECTIVES, FREE, SUMS, WRITE_PREFIXES, Graph, Node, backward, data_inputs,
    in_backward, nbytes, short_device)
from step_overlap import ReductionWait

__all__ = ["VariableCopy", "Reduction", "ReductionWait", "StepAudit", "describe_variables",
           "held_bytes", "audit", "xla_label", "short_device", "COLLECTIVES"]

FORWARD_COMPUTE = frozenset({
    "Conv2D", "MatMul", "BatchMatMulV2", "BatchMatMulV3", "DepthwiseConv2dNative", "Einsum"})


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


def _written(graph: Graph, node: Node) -> list[Node]:
    """The resource leaves (top-level placeholders) a write op writes."""
    op = node.op
    if op.type in ASSIGNS:
        tensors = [op.inputs[0]]
    elif op.type.startswith(WRITE_PREFIXES):
        tensors = [t for t in op.inputs if t.dtype == tf.resource]
    else:
        return []
    return [leaf for t in tensors for leaf, _ in graph.producers(node, t)]


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
    graph = Graph(concrete)
    handle_to_copy = {v.handle_id: v for v in variables}
    leaf_copy: dict[object, VariableCopy] = {}
    for external, internal in concrete.graph.captures:
        copy = handle_to_copy.get(id(external))
        if copy is not None:
            leaf_copy[internal.op] = copy

    # Writes of each trainable copy and its slots.
    writes: dict[tuple[str, str], list[Node]] = collections.defaultdict(list)
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
    boundary: set[Node] = set()
    feeding = _ancestors(graph, [n for nodes in writes.values() for n in nodes])
    for node in graph.nodes:
        op = node.op
        if op.type in COLLECTIVES:
            t = op.inputs[0]
            reductions.append(Reduction(op.type, t.dtype.name, nbytes(t), graph.device[node],
                                        graph.in_xla[node]))
            boundary.add(node)
        elif op.type in SUMS and node in feeding:
            sources = {graph.device[p] for p, _ in data_inputs(graph, node)}
            if len(sources - {""}) > 1:
                t = op.outputs[0]
                reductions.append(Reduction(op.type, t.dtype.name, nbytes(t),
                                            graph.device[node], graph.in_xla[node]))
                boundary.add(node)

    def walk(starts: list[Node], stop: set) -> set[Node]:
        seen: set[Node] = set()
        pending = list(starts)
        while pending:
            node = pending.pop()
            if node in seen or node in stop or node in boundary or in_backward(graph, node):
                continue
            if node.op.type == "Placeholder" and not node.ctx:
                continue
            seen.add(node)
            pending += [p for p, _ in data_inputs(graph, node)]
        return seen

    reached: dict[Node, int] = collections.Counter()
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
                     overlap=step_overlap.overlap(graph, [n for n in graph.nodes
                                              if n in boundary and n in feeding]))


def _ancestors(graph: Graph, starts: list[Node]) -> set[Node]:
    seen: set[Node] = set()
    pending = list(starts)
    while pending:
        node = pending.pop()
        if node not in seen:
            seen.add(node)
            pending += [p for p, _ in data_inputs(graph, node)]
    return seen


def _coverage(flags: list[bool]) -> str:
    if not flags:
        return "-"
    return "all" if all(flags) else ("none" if not any(flags) else "some")


def _xla_coverage(graph: Graph, boundary: set, writes: dict) -> dict[str, str]:
    forward = [graph.in_xla[n] for n in graph.nodes
               if n.op.type in FORWARD_COMPUTE and not backward(n.op)]
    backward_ops = [graph.in_xla[n] for n in graph.nodes
                    if backward(n.op) and n.op.type not in FREE]
    reduction = [graph.in_xla[n] for n in boundary]
    update = [graph.in_xla[n] for nodes in writes.values() for n in nodes]
    return {"forward": _coverage(forward), "backward": _coverage(backward_ops),
            "all-reduce": _coverage(reduction), "update": _coverage(update)}


def xla_label(xla: dict[str, str]) -> str:
    """'forward+backward+all-reduce+update' for the parts wholly inside XLA clusters."""
    inside = [part for part, where in xla.items() if where == "all"]
    partly = [part + "(part)" for part, where in xla.items() if where == "some"]
    return "+".join(inside + partly) or "none"


