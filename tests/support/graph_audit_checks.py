"""The GPU path's training step traced on 2 logical CPU devices answering as GPUs
(benchmarks/graph_audit.py), run in a fresh process by test_graph_audit.py.

The model is a small stack of equal Dense layers registered here ("audit_mlp", cifar10): many
variables of similar size, so a placement that puts them all on one device is visible, and
tracing 2 replicas takes a second. Prints one JSON object on a `RESULT ` line.
"""

from __future__ import annotations

import importlib.util
import json
import os

from paths import ROOT  # importing it puts ROOT first on sys.path

_spec = importlib.util.spec_from_file_location(
    "graph_audit", os.path.join(ROOT, "benchmarks", "graph_audit.py"))
graph_audit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_audit)

DEVICES = 2
graph_audit.setup_devices(DEVICES)

import keras  # noqa: E402

from tfbench.config.datasets import CIFAR10  # noqa: E402
from tfbench.models import layers as L  # noqa: E402
from tfbench.models.registry import ModelSpec, register  # noqa: E402


def build_audit_mlp(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    inputs, x = L.image_input(image_size, data_format)
    x = L.flatten(x)
    for _ in range(6):
        x = L.affine(x, 32)
    return keras.Model(inputs, L.logits(x, num_classes), name="audit_mlp")


def build_audit_convs(num_classes: int, image_size: int, data_format: str) -> keras.Model:
    """Six convolutions and the logits: the backward pass makes the first convolution's
    gradient last, so packs cut from the last layers' gradients can be all-reduced before it."""
    inputs, x = L.image_input(image_size, data_format)
    for _ in range(6):
        x = keras.layers.Conv2D(8, 3, padding="same", use_bias=False,
                                data_format=L.channels(data_format))(x)
    return keras.Model(inputs, L.logits(L.flatten(x), num_classes), name="audit_convs")


register(ModelSpec("audit_mlp", CIFAR10, build_audit_mlp, 4, 2, 0.1, family="trivial"))
register(ModelSpec("audit_convs", CIFAR10, build_audit_convs, 8, 2, 0.1, family="trivial"))

BASE = ["--device=gpu", "--model=audit_mlp", "--data_name=cifar10", "--batch_size=2",
        "--image_size=4"]
CONFIGS = {
    "fp16": ["--use_fp16"],
    # With an algorithm XLA does not use: its collectives run inside XLA, in 2 packs.
    "fp16_xla": ["--use_fp16", "--xla", "--all_reduce_spec=nccl#2"],
    "fp16_xla_dynamic": ["--use_fp16", "--xla", "--fp16_enable_auto_loss_scale"],
    "fp16_not_compact": ["--use_fp16", "--compact_gradient_transfer=false"],
    "bf16_3_packs": ["--precision=bf16", "--gradient_repacking=3"],
    "bf16_xla": ["--precision=bf16", "--xla"],
    "parameter_server": ["--variable_update=parameter_server"],
}
# The overlap of each gradient reduction with the backward pass, on every path a multi-device
# step takes: merge calls (NCCL outside XLA), each replica's step in XLA, dynamic loss scaling,
# the spread parameter server (alone and with dynamic loss scaling).
CONVS = ["--device=gpu", "--model=audit_convs", "--data_name=cifar10", "--batch_size=2",
         "--image_size=8"]
OVERLAP_CONFIGS = {
    "overlap_merge_call": ["--variable_update=replicated", "--gradient_repacking=3"],
    "overlap_xla": ["--variable_update=replicated", "--gradient_repacking=3", "--xla"],
    "overlap_fp16_dynamic": ["--variable_update=replicated", "--gradient_repacking=3",
                             "--use_fp16", "--fp16_enable_auto_loss_scale"],
    "overlap_xla_fp16_dynamic": ["--variable_update=replicated", "--gradient_repacking=3",
                                 "--use_fp16", "--fp16_enable_auto_loss_scale", "--xla"],
    "overlap_spread": ["--variable_update=parameter_server"],
    "overlap_spread_fp16_dynamic": ["--variable_update=parameter_server", "--use_fp16",
                                    "--fp16_enable_auto_loss_scale"],
}
# As on virtual GPUs (one GPU split): MirroredStrategy takes RING collectives, which XLA does not
# compile, so the all-reduce stays outside XLA, with the algorithm asked for.
VIRTUAL_GPU_CONFIGS = {"fp16_xla_virtual": ["--use_fp16", "--xla", "--all_reduce_spec=nccl#2"]}


def summary(audit, sp, notices) -> dict:
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


def main() -> None:
    out = {}
    for collectives, configs in (("NCCL", CONFIGS), ("RING", VIRTUAL_GPU_CONFIGS)):
        graph_audit.COLLECTIVES = collectives
        for name, flags in configs.items():
            vu = [] if any(f.startswith("--variable_update") for f in flags) \
                else ["--variable_update=replicated"]
            out[name] = summary(*graph_audit.trace(
                BASE + ["--num_gpus=%d" % DEVICES] + vu + flags))
            keras.backend.clear_session()
    graph_audit.COLLECTIVES = "NCCL"
    for name, flags in OVERLAP_CONFIGS.items():
        out[name] = summary(*graph_audit.trace(CONVS + ["--num_gpus=%d" % DEVICES] + flags))
        keras.backend.clear_session()
    out["one_device_iterator_xla"] = summary(*graph_audit.trace(
        BASE + ["--num_gpus=1", "--xla"], iterator=True))
    print("RESULT " + json.dumps(out, default=list))


if __name__ == "__main__":
    main()
