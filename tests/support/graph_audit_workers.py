"""One worker of a localhost MultiWorkerMirroredStrategy cluster tracing tfbench's training step
(benchmarks/graph_audit.py's trace, one CPU device per worker), run as two processes by
gpu_path/test_graph_audit.py:

  python graph_audit_workers.py TASK_INDEX HOST:PORT,HOST:PORT

- "overlap": audit_convs' step (graph_audit_common.py: six convolutions and the logits, 8
  gradients) with the run's flags alone: its collectives, and which wait for the backward
  pass's last gradient (the packing flags on this path: distribute/test_strategy.py);
- "six": sync.reduce_gradients on six float32 tensors in one replica step (the run's flags): its
  collectives and the elements each carries; "six_without_merge_calls": the same all-reduce as
  it goes where XLA compiles each replica's step on GPUs.

Every worker must trace the same steps in the same order: the strategy's variables are created
by collectives. Prints one JSON object on a `RESULT ` line.
"""

from __future__ import annotations

import json
import sys

import paths  # noqa: F401 - the checkout's root first on sys.path

import graph_audit_common as common  # noqa: E402

graph_audit = common.load_graph_audit()

SIX_SHAPES = ((192, 1), (1,), (1, 4096), (4096,), (4096, 11), (11,))   # trivial's, cifar10 8 px


def _flags(task: int, hosts: str, *more: str) -> list[str]:
    return ["--device=cpu", "--model=audit_convs", "--data_name=cifar10", "--batch_size=2",
            "--image_size=8", "--job_name=worker", "--worker_hosts=" + hosts,
            "--task_index=%d" % task, "--variable_update=collective_all_reduce",
            "--cluster_timeout_secs=60", *more]


def _six(strategy, merge_calls: bool) -> dict:
    """The collectives that all-reduce SIX_SHAPES in one replica step: sync.reduce_gradients'
    (merge calls, as on CPU devices), or without merge calls, the call
    ReplicaContext.all_reduce makes where XLA compiles each replica's step on GPUs
    (CollectiveAllReduceExtended._replica_ctx_all_reduce, TF 2.17 to 2.21)."""
    import tensorflow as tf
    from tfbench.distribute import sync

    def replica():
        grads = [tf.ones(shape) for shape in SIX_SHAPES]
        if merge_calls:
            reduced = sync.reduce_gradients(strategy, grads)
        else:
            reduced = strategy.extended._replica_ctx_all_reduce(  # noqa: SLF001
                tf.distribute.ReduceOp.SUM, grads)
        return [tf.reshape(r, [-1])[:1] for r in reduced]

    concrete = tf.function(lambda: strategy.run(replica)).get_concrete_function()
    ops = [op for op in concrete.graph.get_operations() if op.type == "CollectiveReduceV2"]
    return {"collectives": len(ops),
            "elements": sorted(op.inputs[0].shape.num_elements() for op in ops)}


def main() -> None:
    task, hosts = int(sys.argv[1]), sys.argv[2]
    import keras
    common.register_models()
    # One strategy per process: a second MultiWorkerMirroredStrategy in the same process can
    # fail in its first collective (a rendezvous left from the first).
    audit, sp, notices = graph_audit.trace(_flags(task, hosts))
    out = {"overlap": common.summary(audit, sp, notices)}
    keras.backend.clear_session()
    out["six"] = _six(sp.strategy, merge_calls=True)
    out["six_without_merge_calls"] = _six(sp.strategy, merge_calls=False)
    print("RESULT " + json.dumps(out, default=list), flush=True)


if __name__ == "__main__":
    main()
