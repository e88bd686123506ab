"""The all-reduce probe's call where XLA compiles each replica's step (allreduce_probe._step with
compiled=True), traced as on 2 GPUs: 2 logical CPU devices answering as GPUs
(benchmarks/graph_audit.py's setup_devices), the strategy `tfbench --device=gpu --num_gpus=2
--variable_update=replicated --xla` builds, per precision. An XLA collective cannot run on a
CPU: only the trace is read. For each precision it prints, per replica, the jit-compiled
function each of its calls runs and what feeds each call, and per function the device and dtype
of its CollectiveReduceV2. Prints one JSON object on a `RESULT ` line.
"""

from __future__ import annotations

import dataclasses
import json

import paths  # noqa: F401 - the checkout's root first on sys.path

import graph_audit_common as common  # noqa: E402

PER_SYNC = 3

graph_audit = common.load_graph_audit()
graph_audit.setup_devices(2)

import tensorflow as tf  # noqa: E402

from tfbench.config.argv import parse_settings  # noqa: E402
from tfbench.distribute import allreduce_probe, strategies  # noqa: E402
from tfbench.distribute import strategy as strategy_lib  # noqa: E402
from tfbench.engine.resolved import resolve  # noqa: E402


def traced(precision: str) -> dict:
    p = parse_settings(["tfbench", "--device=gpu", "--num_gpus=2", "--model=trivial",
                      "--variable_update=replicated", "--xla", "--precision=" + precision])
    plan = resolve(p)
    device_set = dataclasses.replace(plan.device, names=("/cpu:0", "/cpu:1"))
    strategy = strategy_lib.make_strategy(p, device_set).strategy
    compiled, _ = strategies.replica_step_compilation(strategy, xla=True)
    tensors = allreduce_probe.size_sets(1024, 1024, 2, "float32")[0]
    step = allreduce_probe._step(strategy, compiled, PER_SYNC)  # noqa: SLF001
    graph = step.get_concrete_function(allreduce_probe._values(strategy, tensors)).graph  # noqa: SLF001
    calls: dict[str, list] = {}
    for op in graph.get_operations():
        if op.type == "StatefulPartitionedCall":
            device = tf.DeviceSpec.from_string(op.device).device_index
            calls.setdefault(str(device), []).append({
                "function": op.get_attr("f").name,
                "must_compile": bool(op.get_attr("_XlaMustCompile")),
                "fed_by": op.inputs[0].op.type})
    functions = {}
    for function in graph.as_graph_def().library.function:
        collectives = [(tf.DeviceSpec.from_string(n.device).device_index,
                        tf.as_dtype(n.attr["T"].type).name)
                       for n in function.node_def if n.op == "CollectiveReduceV2"]
        if collectives:
            functions[function.signature.name] = collectives
    return {"compiled": compiled, "calls": calls, "functions": functions}


def main() -> None:
    out = {precision: traced(precision) for precision in ("fp32", "fp16")}
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
