"""Traces the steps a GPU run builds, on the CPU, and lists the ops that have no GPU kernel.

Run in a fresh process by test_gpu_kernels.py (several replicas need logical CPU devices, which
exist only if configured before TensorFlow initialises). Each configuration goes through the
runner exactly as `--device=gpu` does (devices, model, optimizer, step config, inputs); only
the strategy's devices are logical CPU devices, which changes no op of the step. The kernel
registry of the full `tensorflow` wheel lists GPU kernels on any machine, so an op that a GPU
could not run shows here. Prints one JSON object: configuration -> missing ops.

Usage: gpu_kernel_checks.py [quick|all]   (quick: one small model only; all: every variant)

A model variant is what one set of flags builds: every registered (name, dataset) pair (the
cifar10 AlexNet, with LRN, is another network than the ImageNet one), in the GPU's default
channels-first layout and, with --data_format=NHWC, channels-last; each in training (fp16 with
dynamic loss scaling, bf16) and forward-only (folded batch norm) steps.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import sys
import tempfile
import time

import paths  # noqa: F401 - the checkout's root first on sys.path

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import types_pb2  # noqa: E402
from tensorflow.python.framework import kernels  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

import step_graph  # noqa: E402 - benchmarks/, on sys.path by paths
from helpers import FakeGpu  # noqa: E402
from tfbench.distribute import devices, strategy as strategy_lib
from tfbench.engine import train  # noqa: E402
from tfbench.engine.resolved import resolve  # noqa: E402
from tfbench.data.fake_imagenet import write_fake_imagenet  # noqa: E402
from tfbench.models import catalog
from tfbench.config.settings import make_settings  # noqa: E402
from tfbench.results import RunResult  # noqa: E402

NUM_DEVICES = 2
DATA_DIR = os.path.join(tempfile.gettempdir(), "tfbench-gpu-kernels-%d" % os.getpid())
# The variant steps that hold every (op, dtype) pair that the steps of all variants hold
# (TFBENCH_GPU_KERNEL_MODELS=all checks that claim, tracing every variant): what the test suite
# traces, to stay fast. The cheapest such set of (variant, training precision), computed from the
# op kinds each step holds: LeNet's and AlexNet's ops all appear in others' steps, ConvNeXt's
# bfloat16 step and ResNet-50's float16 one add none. "name:dataset" names a variant of another
# dataset than the default.
BOTH = ("fp16_dynamic", "bf16")
REPRESENTATIVE = {"alexnet:cifar10": ("fp16_dynamic",), "resnet50_v1.5": ("bf16",),
                  "mobilenet_v3_large": BOTH, "efficientnet_b0": BOTH, "inception3": BOTH,
                  "convnext_tiny": ("fp16_dynamic",), "vit_tiny": BOTH}
# Forward-only steps add one op type over training (the folded convolution's bias): traced for
# one model unless every variant is, and once unfolded (--nofold_batch_norm).
FORWARD = ("resnet50_v1.5",)
# Attributes through which an op calls a function.
_FUNC_ATTRS = ("f", "then_branch", "else_branch", "body", "cond", "branches")


# --- the kernel registry ---------------------------------------------------------------------

_GPU_KERNELS: dict[str, list] = {}


def _gpu_kernels(op: str) -> list:
    if op not in _GPU_KERNELS:
        _GPU_KERNELS[op] = [k for k in kernels.get_registered_kernels_for_op(op).kernel
                            if k.device_type in ("GPU", "DEFAULT")]
    return _GPU_KERNELS[op]


def _attr_types(node, name: str) -> list[int]:
    if name in node.attr:
        value = node.attr[name]
        return list(value.list.type) if value.HasField("list") else [value.type]
    op_def = op_def_registry.get(node.op)
    for attr in op_def.attr if op_def else ():
        if attr.name == name and attr.HasField("default_value"):
            value = attr.default_value
            return list(value.list.type) if value.HasField("list") else [value.type]
    return []


def _matches(kernel, node) -> bool:
    for constraint in kernel.constraint:
        allowed = set(constraint.allowed_values.list.type)
        if not all(t in allowed for t in _attr_types(node, constraint.name)):
            return False
    return True


def op_kind(node) -> str:
    """'Op(T=half)': the op and the types its GPU kernels are registered by."""
    types = ",".join(sorted({"%s=%s" % (c.name, types_pb2.DataType.Name(t)[3:].lower())
                             for k in _gpu_kernels(node.op) for c in k.constraint
                             for t in _attr_types(node, c.name)}))
    return "%s(%s)" % (node.op, types) if types else node.op


def missing_gpu_kernel(node) -> str | None:
    """'Op(T=half)' when no GPU kernel takes this node's op and types, else None."""
    found = _gpu_kernels(node.op)
    if found and any(_matches(k, node) for k in found):
        return None
    return op_kind(node)


_LOOKED_UP: dict[tuple, tuple] = {}


def _looked_up(node) -> tuple:
    """(missing_gpu_kernel, op_kind) of the node, once per op and types its kernels are
    registered by: a model's step holds thousands of nodes of a few dozen kinds."""
    names = sorted({c.name for k in _gpu_kernels(node.op) for c in k.constraint})
    key = (node.op,) + tuple(tuple(_attr_types(node, name)) for name in names)
    if key not in _LOOKED_UP:
        _LOOKED_UP[key] = (missing_gpu_kernel(node), op_kind(node))
    return _LOOKED_UP[key]


# --- the graph walk --------------------------------------------------------------------------

def _callees(node, library: dict) -> list[str]:
    names = [node.op] if node.op in library else []
    for attr in _FUNC_ATTRS:
        if attr in node.attr:
            value = node.attr[attr]
            names += [f.name for f in value.list.func] if value.HasField("list") \
                else [value.func.name]
    return [n for n in names if n in library]


def ops_without_gpu_kernel(graph_def, kinds: set | None = None) -> list[str]:
    """Every op of the graph and of the functions it calls, XLA-compiled functions excepted
    (XLA compiles those; its own op coverage is exercised by the --xla runs on CPU). `kinds`,
    when given, collects each op's "Op(T=type,...)" as the kernel lookup sees it."""
    library = {f.signature.name: f for f in graph_def.library.function}
    missing: set[str] = set()
    seen: set[str] = set()
    pending = list(graph_def.node)
    while pending:
        node = pending.pop()
        if node.op not in library:
            why, kind = _looked_up(node)
            if why:
                missing.add(why)
            if kinds is not None:
                kinds.add(kind)
        for name in _callees(node, library):
            function = library[name]
            if name in seen or function.attr["_XlaMustCompile"].b:
                continue
            seen.add(name)
            pending.extend(function.node_def)
    return sorted(missing)


# --- the steps a GPU run builds ----------------------------------------------------------------

def gpu_step_graph(flags: dict):
    """The graph of the step function `tfbench --device=gpu FLAGS` would build and run."""
    return gpu_step(flags)[0].graph.as_graph_def()


def gpu_runner(flags: dict) -> train.TrainRunner:
    """The runner of `tfbench --device=gpu FLAGS`, on logical CPU devices."""
    p = make_settings(dict(device="gpu", **flags))
    resolved = resolve(p)
    plan = resolved.device
    assert plan.kind == "gpu", plan
    # The same strategy type on logical CPU devices (make_strategy decides by flags and count).
    cpu_plan = devices.DeviceSet("cpu", plan.num_devices,
                                 tuple("/cpu:%d" % i for i in range(plan.num_devices)),
                                 plan.data_format)
    strategy = strategy_lib.make_strategy(p, cpu_plan, resolved.facts.model_xla).strategy
    return train.TrainRunner(p=p, plan=resolved, strategy=strategy)


def gpu_step(flags: dict):
    """(concrete step function, train.Setup) of `tfbench --device=gpu FLAGS`."""
    setup = gpu_runner(flags).setup(RunResult())
    return setup.step_fn.function.get_concrete_function(setup.inputs), setup


def configurations(models: str = "") -> dict[str, dict]:
    """name -> flags: every optimizer, precision, mode and replica count on a small model, then
    the model families ("quick": none; "all": every family; else the representative ones)."""
    small = {"model": "trivial", "image_size": 16, "batch_size": 4}
    configs: dict[str, dict] = {}
    precisions = {"fp32": {}, "fp16": {"use_fp16": True},
                  "fp16_dynamic": {"use_fp16": True, "fp16_enable_auto_loss_scale": True},
                  "bf16": {"precision": "bf16"}}
    for optimizer in ("sgd", "momentum", "rmsprop", "adam"):
        for precision, extra in precisions.items():
            for n in (1, NUM_DEVICES):
                configs["trivial/train/%s/%s/%dgpu" % (optimizer, precision, n)] = dict(
                    small, optimizer=optimizer, num_gpus=n, **extra)
    for precision, extra in precisions.items():
        if precision != "fp16_dynamic":
            for n in (1, NUM_DEVICES):
                configs["trivial/forward/%s/%dgpu" % (precision, n)] = dict(
                    small, forward_only=True, num_gpus=n, **extra)
    for n in (1, NUM_DEVICES):
        configs["trivial/train/accum2/%dgpu" % n] = dict(small, accum_steps=2, num_gpus=n)
        configs["trivial/train/weight_decay0/%dgpu" % n] = dict(small, weight_decay=0.0,
                                                                 num_gpus=n)
        configs["trivial/train/clip/%dgpu" % n] = dict(small, gradient_clip=1.0, num_gpus=n)
    for variable_update in ("replicated", "independent"):
        configs["trivial/train/%s/%dgpu" % (variable_update, NUM_DEVICES)] = dict(
            small, variable_update=variable_update, num_gpus=NUM_DEVICES)
    for n in (1, NUM_DEVICES):   # real data: the step reads its per-replica batch itself
        configs["trivial/train/real_data/%dgpu" % n] = dict(small, data_dir=DATA_DIR, num_gpus=n,
                                                            data_name="imagenet")
    # Adam's bias corrections reach each replica's update through the merge call.
    configs["trivial/train/adam/replicated/%dgpu" % NUM_DEVICES] = dict(
        small, optimizer="adam", variable_update="replicated", num_gpus=NUM_DEVICES,
        use_fp16=True, fp16_enable_auto_loss_scale=True)
    configs["trivial/train/xla_per_replica/%dgpu" % NUM_DEVICES] = dict(
        small, xla=True, variable_update="replicated", num_gpus=NUM_DEVICES, use_fp16=True,
        fp16_enable_auto_loss_scale=True)
    if models == "quick":
        return configs
    # Each variant's op types, in fp16 (with dynamic loss scaling) and bf16.
    every = models == "all"
    traced = list(REPRESENTATIVE) + [label for label in FORWARD if label not in REPRESENTATIVE]
    for label in variants() if every else traced:
        name, _, dataset = label.partition(":")
        spec = catalog.get(name, dataset or None)
        size = max(32, spec.min_image_size)
        base = {"model": name, "data_name": spec.dataset, "image_size": size, "batch_size": 2}
        fp16 = dict(base, use_fp16=True, fp16_enable_auto_loss_scale=True)
        precisions = BOTH if every else REPRESENTATIVE.get(label, ())
        if "fp16_dynamic" in precisions:
            configs["%s/train/fp16_dynamic/1gpu" % label] = fp16
        if "bf16" in precisions:
            configs["%s/train/bf16/1gpu" % label] = dict(base, precision="bf16")
        if every and spec.channels_first:
            configs["%s/train/fp16_dynamic/nhwc/1gpu" % label] = dict(fp16, data_format="NHWC")
        if every or label in FORWARD:
            configs["%s/forward/fp16/1gpu" % label] = dict(base, forward_only=True,
                                                           use_fp16=True)
        if label in FORWARD:
            configs["%s/forward/fp16/unfolded/1gpu" % label] = dict(
                base, forward_only=True, use_fp16=True, fold_batch_norm=False)
    return configs


# --validate_devices' numeric check: its pass traced under op determinism (other ops than the
# step's: the sparse cross-entropy as log-softmax and gather), in each training precision.
NUMERIC = {"trivial/numeric/%s/1gpu" % name: dict(model="trivial", image_size=16, batch_size=4,
                                                  **flags)
           for name, flags in (("fp32", {}), ("bf16", {"precision": "bf16"}),
                               ("fp16_dynamic", {"use_fp16": True,
                                                 "fp16_enable_auto_loss_scale": True}))}


def gpu_numeric_pass(flags: dict):
    """The concrete pass of --validate_devices' numeric check of `tfbench --device=gpu FLAGS`
    on one GPU, traced as the check traces it: under op determinism."""
    from tfbench.engine import device_checks, optimizers
    runner = gpu_runner(flags)
    setup, plan = runner.setup(RunResult()), runner.plan
    size, batch = plan.image_size, plan.train_batch_size
    with device_checks.op_determinism():
        return device_checks.pass_function(runner, setup).get_concrete_function(
            tf.TensorSpec([batch, size, size, 3], optimizers.compute_dtype(plan.precision)),
            tf.TensorSpec([batch], tf.int32))


def update_kernels(concrete, setup) -> dict:
    """The update of each copy of each trainable variable, as step_graph counts it: how many
    copies the step updates with each list of ops (e.g. {"ResourceApplyKerasMomentum": 8}),
    and how many copies there are."""
    inner = getattr(setup.optimizer, "inner_optimizer", setup.optimizer)
    copies = step_graph.describe_variables(   # describe_variables skips repeated ones
        setup.model.trainable_variables, list(setup.model.non_trainable_variables)
        + list(setup.optimizer.variables) + list(inner.variables))
    audit = step_graph.audit(concrete, copies)
    trained = sum(v.owner == v.name for v in copies)
    return {"copies": trained,
            "kernels": dict(collections.Counter("+".join(ops)
                                                for ops in audit.update_kernels.values()))}


def variants() -> list[str]:
    """Every registered variant: the name, or "name:dataset" for a non-default dataset."""
    return [spec.name if catalog.get(spec.name).dataset == spec.dataset
            else "%s:%s" % (spec.name, spec.dataset) for spec in catalog.all_specs()]


def main() -> None:
    models = sys.argv[1] if len(sys.argv) > 1 else ""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_DEVICES)
    devices.visible_gpus = lambda: [FakeGpu(i) for i in range(NUM_DEVICES)]
    write_fake_imagenet(DATA_DIR, num_train=8, num_validation=4, num_shards=2, seed=1,
                        image_size=16)
    out, times, kinds, updates, numeric_kinds = {}, {}, {}, {}, {}
    try:
        for name, flags in configurations(models).items():
            start = time.perf_counter()
            found: set[str] = set()
            concrete, setup = gpu_step(flags)
            out[name] = ops_without_gpu_kernel(concrete.graph.as_graph_def(), found)
            kinds[name] = sorted(found)
            if setup.optimizer is not None:
                updates[name] = update_kernels(concrete, setup)
            times[name] = round(time.perf_counter() - start, 2)
            keras.backend.clear_session()
            print("# %s: %s (%.0f s)" % (name, ", ".join(out[name]) or "every op has a GPU kernel",
                                        times[name]), file=sys.stderr, flush=True)
        for name, flags in NUMERIC.items():
            found = set()
            out[name] = ops_without_gpu_kernel(gpu_numeric_pass(flags).graph.as_graph_def(),
                                               found)
            numeric_kinds[name] = sorted(found)
            keras.backend.clear_session()
    finally:
        shutil.rmtree(DATA_DIR, ignore_errors=True)
    print("RESULT " + json.dumps({"missing": out, "seconds": times, "op_kinds": kinds,
                                  "update_kernels": updates, "numeric_op_kinds": numeric_kinds}))


if __name__ == "__main__":
    main()
