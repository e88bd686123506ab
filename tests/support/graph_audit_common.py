"""What the graph audit's check scripts share (graph_audit_checks.py on logical devices,
graph_audit_workers.py on localhost workers): benchmarks/graph_audit.py as a module, the small
models they trace (register_models) and the summary of one traced step as JSON.

Importing it starts nothing: the logical devices must be set up before TensorFlow's runtime
starts, so register_models imports Keras only when called.
"""

from __future__ import annotations

import importlib.util
import os

from paths import BENCHMARKS


def load_graph_audit():
    """benchmarks/graph_audit.py as a module (a script, not a package's module)."""
    spec = importlib.util.spec_from_file_location(
        "graph_audit", os.path.join(BENCHMARKS, "graph_audit.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def register_models() -> None:
    """Registers, for cifar10:
    - audit_mlp: a stack of equal Dense layers: many variables of similar size, so a placement
      that puts them all on one device is visible, and tracing 2 replicas takes a second;
    - audit_convs: six convolutions and the logits: the backward pass makes the first
      convolution's gradient last, so packs cut from the last layers' gradients can be
      all-reduced before it."""
    import keras

    from tfbench.config.datasets import CIFAR10
    from tfbench.models import layers as L
    from tfbench.models.registry import ModelSpec, register

    def build_audit_mlp(num_classes: int, image_size: int, data_format: str) -> keras.Model:
        inputs, x = L.image_input(image_size, data_format)
        x = L.flatten(x)
        for _ in range(6):
            x = L.affine(x, 32)
        return keras.Model(inputs, L.logits(x, num_classes), name="audit_mlp")

    def build_audit_convs(num_classes: int, image_size: int, data_format: str) -> keras.Model:
        inputs, x = L.image_input(image_size, data_format)
        for _ in range(6):
            x = keras.layers.Conv2D(8, 3, padding="same", use_bias=False,
                                    data_format=L.channels(data_format))(x)
        return keras.Model(inputs, L.logits(L.flatten(x), num_classes), name="audit_convs")

    register(ModelSpec("audit_mlp", CIFAR10, build_audit_mlp, 4, 2, 0.1, family="trivial"))
    register(ModelSpec("audit_convs", CIFAR10, build_audit_convs, 8, 2, 0.1, family="trivial"))


def summary(audit, sp, notices) -> dict:
    """One traced step (graph_audit.trace's StepAudit, BuiltStrategy and notices) as JSON."""
    return {"update_kernels": sorted(set(audit.update_kernels.values())),
            "copies": len(audit.update_kernels),
            "collectives": sorted({(r.kind, r.dtype) for r in audit.collectives()}),
            "sums": sorted({(r.dtype, r.device) for r in audit.sums()}),
            "packs_per_device": audit.packs_per_device(),
            "reduced_bytes": audit.reduced_bytes_per_device(),
            "held": audit.bytes_per_device,
            "fair_share": audit.fair_share_bytes(),
            "largest": audit.largest_variable_bytes,
            "xla": audit.xla, "ran": sp.variables_label, "notices": notices,
            "all_reduce_label": sp.all_reduce_label, "reduction": sp.reduction,
            "waiting": audit.waiting_per_device(),
            "waits_for": [[w.kind, w.device, w.carried, w.waits_for, w.gradients]
                          for w in audit.overlap]}
