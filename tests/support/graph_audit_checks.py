"""The GPU path's training step traced on 2 logical CPU devices answering as GPUs
(benchmarks/graph_audit.py), run in a fresh process by test_graph_audit.py.

The models are graph_audit_common.py's: a small stack of equal Dense layers ("audit_mlp") and
six convolutions ("audit_convs"). Prints one JSON object on a `RESULT ` line.
"""

from __future__ import annotations

import json

import paths  # noqa: F401 - the checkout's root first on sys.path

import graph_audit_common as common  # noqa: E402

graph_audit = common.load_graph_audit()
DEVICES = 2
graph_audit.setup_devices(DEVICES)

import keras  # noqa: E402

common.register_models()

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


def main() -> None:
    out = {}
    for collectives, configs in (("NCCL", CONFIGS), ("RING", VIRTUAL_GPU_CONFIGS)):
        graph_audit.COLLECTIVES = collectives
        for name, flags in configs.items():
            vu = [] if any(f.startswith("--variable_update") for f in flags) \
                else ["--variable_update=replicated"]
            out[name] = common.summary(*graph_audit.trace(
                BASE + ["--num_gpus=%d" % DEVICES] + vu + flags))
            keras.backend.clear_session()
    graph_audit.COLLECTIVES = "NCCL"
    for name, flags in OVERLAP_CONFIGS.items():
        out[name] = common.summary(*graph_audit.trace(CONVS + ["--num_gpus=%d" % DEVICES] + flags))
        keras.backend.clear_session()
    out["one_device_iterator_xla"] = common.summary(*graph_audit.trace(
        BASE + ["--num_gpus=1", "--xla"], iterator=True))
    print("RESULT " + json.dumps(out, default=list))


if __name__ == "__main__":
    main()
