#!/usr/bin/env python
"""The GPU path's training step, traced on logical CPU devices, and what it does on each device.

For every configuration (device count x precision x --variable_update x --xla) this builds the
step exactly as `tfbench --device=gpu ...` does (flags, Resolved, strategy, model, optimizer, step),
with the strategy's devices replaced by logical CPU devices and TensorFlow's GPU test
(`_is_gpu_device` in mirrored_strategy and mirrored_run, TF 2.17 to 2.21) answering yes for
them, so TensorFlow takes the branches it takes on GPUs. It only traces the step (an XLA
collective cannot run on a CPU) and prints, per configuration (step_graph.py, beside it):

  update kernels   per copy of a trainable variable: fewest-most, and the most common kind
  all-reduce       collective packs per device, their dtypes and bytes per device; or, for
                   parameter_server, the sums on the devices that hold the variables
  held (MiB)       bytes of variables (and slots) on the busiest device / a fair share
                   (total / devices) + the largest variable
  XLA              the parts of the step inside XLA clusters
  overlap          the gradient reductions (packs on the busiest device, or parameter-server
                   sums) that do not wait for the backward pass's last gradient, of all

  python benchmarks/graph_audit.py                       # resnet50, 1 and 8 devices, 16 rows
  python benchmarks/graph_audit.py --model=trivial --devices=2 --json=audit.json
  python benchmarks/graph_audit.py --devices=1 --xla=1 --iterator  # as with real data
  python benchmarks/graph_audit.py --devices=8 --xla=1 --virtual_gpus  # RING collectives

It needs the full `tensorflow` wheel (the same TensorFlow that runs on GPUs); it builds every
replica's variables in host memory (ResNet-50 on 8 devices: about 1 GiB) and takes minutes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 2.0 ** 20
# The collectives MirroredStrategy takes on the stand-in GPUs: NCCL, as on physical GPUs; RING,
# as on virtual GPUs (one GPU split into several: mirrored_strategy, TF 2.17 to 2.21).
COLLECTIVES = "NCCL"
PRECISIONS = {"fp32": (), "fp16": ("--use_fp16",), "bf16": ("--precision=bf16",)}


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--devices", default="1,8", help="device counts, e.g. 1,8")
    parser.add_argument("--precisions", default="fp32,fp16", help="of fp32, fp16, bf16")
    parser.add_argument("--variable_updates", default="replicated,parameter_server")
    parser.add_argument("--xla", default="0,1", help="0 (off), 1 (--xla) or both")
    parser.add_argument("--batch_size", type=int, default=2)
    parser.add_argument("--image_size", type=int, default=0, help="0: the model's own")
    parser.add_argument("--extra", default="", help="more tfbench flags for every row")
    parser.add_argument("--iterator", action="store_true",
                        help="the step reads its batch from an iterator, as with real data")
    parser.add_argument("--virtual_gpus", action="store_true",
                        help="the GPUs are virtual (one split into several): RING collectives")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args(argv)
    args.devices = [int(n) for n in _csv(args.devices)]
    args.precisions = _csv(args.precisions)
    args.variable_updates = _csv(args.variable_updates)
    args.xla = [bool(int(x)) for x in _csv(args.xla)]
    bad = [p for p in args.precisions if p not in PRECISIONS]
    if bad or not args.devices or min(args.devices) < 1:
        parser.error("--precisions takes fp32, fp16, bf16; --devices positive counts")
    return args


def configurations(args) -> list[dict]:
    rows = []
    for n in args.devices:
        for precision in args.precisions:
            for vu in args.variable_updates:
                for xla in args.xla:
                    flags = ["--device=gpu", "--num_gpus=%d" % n, "--model=%s" % args.model,
                             "--batch_size=%d" % args.batch_size,
                             "--variable_update=%s" % vu, *PRECISIONS[precision]]
                    if args.image_size:
                        flags.append("--image_size=%d" % args.image_size)
                    if xla:
                        flags.append("--xla")
                    flags += args.extra.split()
                    rows.append({"devices": n, "precision": precision, "variable_update": vu,
                                 "xla": xla, "flags": flags})
    return rows


def setup_devices(n: int) -> None:
    """n logical CPU devices standing in for n GPUs (before TensorFlow starts)."""
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    from tensorflow.python.distribute import mirrored_run, mirrored_strategy
    # TensorFlow runs a replica's XLA-compiled step without merge calls, its all-reduce inside
    # the cluster, only when every device is a GPU: answer as on GPUs.
    mirrored_strategy._is_gpu_device = lambda device: True  # noqa: SLF001
    mirrored_run._is_gpu_device = lambda device: True  # noqa: SLF001
    # and the collectives MirroredStrategy takes there (COLLECTIVES; on CPUs it takes RING).
    from tensorflow.python.distribute import collective_util
    make_ops = mirrored_strategy.MirroredExtended._make_collective_ops_with_fallbacks  # noqa: SLF001

    def _as_on_gpus(extended):
        ops = make_ops(extended)
        options = collective_util.Options(implementation=getattr(
            collective_util.CommunicationImplementation, COLLECTIVES))
        extended._communication_options = ops._options = options  # noqa: SLF001
        return ops

    mirrored_strategy.MirroredExtended._make_collective_ops_with_fallbacks = _as_on_gpus  # noqa: SLF001

    from tfbench.distribute import devices

    class _Gpu:
        def __init__(self, index):
            self.name = "/physical_device:GPU:%d" % index

    devices.visible_gpus = lambda: [_Gpu(i) for i in range(n)]


def _iterator_inputs(runner):
    """The runner's inputs as real data arrives, through a distributed iterator (of synthetic
    batches: the step's graph is the same, and no files are needed)."""
    import tensorflow as tf
    from tfbench.distribute import pipelines

    def inputs(batch_per_replica, train):
        images = runner.images(batch_per_replica)
        first = runner.strategy.experimental_local_results(images)[0]
        labels = tf.zeros([batch_per_replica], tf.int32)
        return pipelines.distribute_inputs(
            runner.strategy,
            lambda index, count: tf.data.Dataset.from_tensors((first, labels)).repeat()), True
    return inputs


def trace(flags: list[str], iterator: bool = False):
    """(step_graph.StepAudit, BuiltStrategy, notices) for `tfbench FLAGS` on logical devices;
    iterator: the step reads its batch from an iterator, as with real data."""
    import dataclasses
    from tfbench.config.argv import parse_settings
    from tfbench.distribute import strategy as strategy_lib
    from tfbench.engine import train
    from tfbench.engine.resolved import resolve
    from tfbench.results import RunResult

    import step_graph   # beside this script

    p = parse_settings(["tfbench", *flags])
    resolved = resolve(p)
    n = resolved.device.num_devices
    device_set = dataclasses.replace(resolved.device,
                                     names=tuple("/cpu:%d" % i for i in range(n)))
    sp = strategy_lib.make_strategy(p, device_set)
    runner = train.TrainRunner(p=p, plan=resolved, strategy=sp.strategy)
    if iterator:
        runner.inputs = _iterator_inputs(runner)
    setup = runner.setup(RunResult())
    concrete = setup.step_fn.function.get_concrete_function(setup.inputs)
    model, opt = setup.model, setup.optimizer
    variables = step_graph.describe_variables(
        model.trainable_variables, list(model.non_trainable_variables) + list(opt.variables))
    return step_graph.audit(concrete, variables, n), sp, list(resolved.notices + sp.notices)


def summarize(row: dict, audit, sp) -> dict:
    import step_graph
    low, high = audit.kernels_per_copy()
    collectives, sums = audit.collectives(), audit.sums()
    per_device = audit.reduced_bytes_per_device()
    busiest = max(per_device.values()) if per_device else 0
    if collectives:
        reduce = "%d packs/device, %s, %.1f MiB/device" % (
            audit.packs_per_device(), "+".join(sorted(audit.reduced_dtypes())), busiest / MIB)
    elif sums:
        devices = sorted({r.device for r in sums})
        reduce = "%d sums on %d device(s), %s, busiest %.1f MiB" % (
            len(sums), len(devices), "+".join(sorted(audit.reduced_dtypes())), busiest / MIB)
    else:
        reduce = "none"
    held = max(audit.bytes_per_device.values())
    return dict(
        row, ran=sp.variables_label, reduction=sp.reduction,
        update_kernels=[low, high], update_kind=audit.kernel_kinds(),
        reduce=reduce, reduced_dtypes=sorted(audit.reduced_dtypes()),
        packs_per_device=audit.packs_per_device(), reduced_bytes_busiest=busiest,
        held_bytes_max=held, fair_share_bytes=audit.fair_share_bytes(),
        largest_variable_bytes=audit.largest_variable_bytes,
        bytes_per_device=audit.bytes_per_device, xla_parts=audit.xla,
        xla_label=step_graph.xla_label(audit.xla), overlap=overlap_label(audit))


def overlap_label(audit) -> str:
    """'2 of 3 packs overlap' on the device with the most reductions; '-' without any."""
    waiting = audit.waiting_per_device()
    if not waiting:
        return "-"
    if audit.collectives():
        flags = max(waiting.values(), key=len)
        return "%d of %d packs overlap" % (flags.count(False), len(flags))
    flags = [f for device_flags in waiting.values() for f in device_flags]
    return "%d of %d sums overlap" % (flags.count(False), len(flags))


def markdown(rows: list[dict]) -> str:
    lines = ["| devices | precision | variable_update (ran) | XLA | update kernels per variable "
             "| all-reduce | overlap with the backward pass | held MiB: busiest / fair + largest "
             "| inside XLA |",
             "|---:|---|---|---|---|---|---|---|---|"]
    for r in rows:
        low, high = r["update_kernels"]
        kernels = ("%d" % low if low == high else "%d-%d" % (low, high)) + \
            (" (%s)" % r["update_kind"] if r["update_kind"] else "")
        ran = r["variable_update"] + ("" if r["ran"] == r["variable_update"]
                                      else " (%s)" % r["ran"])
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %.1f / %.1f + %.1f | %s |" % (
            r["devices"], r["precision"], ran, "on" if r["xla"] else "off", kernels, r["reduce"],
            r["overlap"],
            r["held_bytes_max"] / MIB, r["fair_share_bytes"] / MIB,
            r["largest_variable_bytes"] / MIB,
            r["xla_label"] if r["xla"] else "-"))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, REPO_ROOT)
    global COLLECTIVES
    COLLECTIVES = "RING" if args.virtual_gpus else "NCCL"
    setup_devices(max(args.devices))
    import keras
    rows = []
    for row in configurations(args):
        start = time.perf_counter()
        audit, sp, notices = trace(row["flags"], iterator=args.iterator)
        out = summarize(row, audit, sp)
        out["notices"] = notices
        out["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(out)
        print("# %s: %.0f s" % (" ".join(row["flags"]), out["seconds"]), file=sys.stderr,
              flush=True)
        keras.backend.clear_session()
        gc.collect()
    print(markdown(rows))
    notices = sorted({n for r in rows for n in r["notices"]})
    for text in notices:
        print("notice: %s" % text)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
