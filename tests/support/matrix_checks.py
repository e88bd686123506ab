"""The matrix: model variants x --variable_update x precision on 2 logical CPU devices, as
`tfbench --device=cpu --num_gpus=2 ...` runs them; forward-only and --eval once per variant.
Run in a fresh process by test_matrix.py (logical devices exist only if configured before
TensorFlow initialises); one process runs every cell, which is what keeps it cheap.

A cell goes through the CLI's own parsing (parse_settings), the plan and make_strategy. Where a
strategy is built, the mode's runner sets up the model, optimizer and step, and one step runs:
the cell trains (traced, run, its loss finite). A UsageError is a refusal: its one line is what
the CLI prints. Anything else is a failure, reported with its class and first line.

--variable_update values that build the same strategy as another are checked at the strategy:
distributed_replicated, collective_all_reduce and distributed_all_reduce without a cluster run
on one host as replicated (make_strategy's notice says so). Their cell records the strategy
built (class, devices, reduction) and the notice; test_matrix.py asserts that it is the
replicated cell's, whose step ran. horovod is refused before any model is built.

The stepped cells of a variant are a covering grid, not all nine (strategy, precision) pairs:
  - every strategy in fp32: what a layer's state does under a strategy (Dropout's seed state
    and batch norm's statistics are created in the same dtype whatever the precision);
  - every precision under parameter_server: which kernels a precision needs (the same under
    every strategy: variables, gradients and their reductions stay float32);
  - all nine on FULL_GRID, the cheap variant whose step holds a precision-dependent op (LRN) and,
    in fp16, the loss-scale state, which every strategy handles its own way.
`full` as the second argument runs all nine on every variant.

Prints one JSON object: cells (cell -> outcome), state (variant -> the kinds of layer state its
model holds), seconds (wall) and cpu_seconds (this process).

Usage: matrix_checks.py [ci|families|all|NAME[:DATASET],...] [full]
  ci        REPRESENTATIVE: variants holding every kind of layer state tfbench's models hold
  families  one variant of each family (FAMILIES)
  all       every registered model name, with each dataset it has
"""

from __future__ import annotations

import gc
import json
import math
import os
import resource
import sys
import tempfile
import time

import paths  # noqa: F401 - the checkout's root first on sys.path

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfbench.config.argv import parse_settings  # noqa: E402
from tfbench.distribute import strategy as strategy_lib  # noqa: E402
from tfbench.engine import checkpoints  # noqa: E402
from tfbench.engine.resolved import EVAL, resolve  # noqa: E402
from tfbench.engine.runner import RUNNERS  # noqa: E402
from tfbench.errors import UsageError  # noqa: E402
from tfbench.models import catalog  # noqa: E402
from tfbench.results import RunResult  # noqa: E402

NUM_DEVICES = 2
BASE = ("--device=cpu", "--num_gpus=%d" % NUM_DEVICES, "--batch_size=1", "--num_batches=1")
STEPPED = ("parameter_server", "replicated", "independent")
AS_REPLICATED = ("distributed_replicated", "collective_all_reduce", "distributed_all_reduce")
VARIABLE_UPDATES = STEPPED + AS_REPLICATED + ("horovod",)
# fp16 with dynamic loss scaling: the loss-scale optimizer's state is in the step too.
PRECISIONS = {"fp32": (), "fp16": ("--use_fp16", "--fp16_enable_auto_loss_scale"),
              "bf16": ("--precision=bf16",)}
# Forward-only and --eval once per variant, under the legacy default --variable_update; the
# checkpoint --eval reads is the parameter_server fp32 cell's model.
FORWARD = ("parameter_server", "fp16")
EVALUATE = ("parameter_server", "bf16")
CHECKPOINTED = ("parameter_server", "fp32")
# The kinds of layer state all registered models hold (TFBENCH_MATRIX_MODELS=families or all
# checks this claim): Dropout's seed state, batch norm's statistics (FusedBatchNorm), LRN's
# float32 computation in mixed precision (the cifar10 AlexNet). What a Keras application adds
# (Normalization's statistics) is written by no step.
REPRESENTATIVE = ("alexnet", "alexnet:cifar10", "resnet20")
FULL_GRID = ("alexnet:cifar10",)
# One variant per family (the cheapest), and the other network a dataset builds.
FAMILIES = ("trivial", "lenet", "alexnet", "alexnet:cifar10", "vgg11", "overfeat", "googlenet",
            "inception3", "inception4", "resnet50_v1.5", "resnet20", "official_resnet18",
            "densenet40_k12", "densenet121", "mobilenet_v3_small", "efficientnet_b0",
            "efficientnet_v2_s", "convnext_tiny", "nasnet", "xception", "vit_tiny")


def variants(which: str) -> list[str]:
    """Variant labels: the model name, or "name:dataset" for a dataset other than its default."""
    if which == "all":
        return [_label(s.name, s.dataset) for s in catalog.all_specs()]
    if which in ("ci", "families"):
        return list(REPRESENTATIVE if which == "ci" else FAMILIES)
    return which.split(",")


def _label(name: str, dataset: str) -> str:
    return name if catalog.get(name).dataset == dataset else "%s:%s" % (name, dataset)


def _spec(label: str):
    name, _, dataset = label.partition(":")
    return catalog.get(name, dataset or None)


def _strategy_key(sp: strategy_lib.BuiltStrategy) -> tuple:
    return (type(sp.strategy).__name__, tuple(sp.strategy.extended.worker_devices), sp.reduction)


# Each cell runs on the strategy make_strategy builds for its flags (the gradient transfer is
# installed on it). TensorFlow numbers collective groups and instances per MirroredStrategy
# object from the class's _collective_key_base, so a second one in the process would reuse the
# first one's keys and its collectives meet the wrong dtypes ("Collective instance 100 expected
# ... data_type 1 but got ... data_type 19"): an artefact of many runs in one process (a run
# builds one strategy). Each strategy gets keys of its own, as TensorFlow's own tests do.
_KEY_SPACING = 10_000


def _fresh_collective_keys() -> None:
    tf.distribute.MirroredStrategy._collective_key_base += _KEY_SPACING  # noqa: SLF001


def _plan(args: list[str]):
    p = parse_settings(["tfbench", *BASE, *args])
    plan = resolve(p)
    _fresh_collective_keys()
    return p, plan, strategy_lib.make_strategy(p, plan.device, plan.facts.model_xla)


def _failure(exc: Exception) -> dict:
    text = str(exc).strip().splitlines()
    return {"failed": "%s: %s" % (type(exc).__name__, text[0] if text else "")}


def strategy_cell(args: list[str]) -> dict:
    """What make_strategy builds for these flags: {"strategy": key, "notices"} or a refusal."""
    try:
        p, plan, sp = _plan(args)
    except UsageError as exc:
        return {"refused": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a failed cell is the finding
        return _failure(exc)
    return {"strategy": list(_strategy_key(sp)), "notices": list(plan.notices + sp.notices)}


def step_cell(args: list[str], checkpoint: str | None = None, state: dict | None = None) -> dict:
    """One step of the mode the flags ask for: {"ran": strategy, "finite"} or a refusal."""
    start = time.perf_counter()
    try:
        p, plan, sp = _plan(args)
        runner = RUNNERS[plan.mode](p=p, plan=plan, strategy=sp.strategy)
        if plan.mode == EVAL:
            res = RunResult()
            runner.run(res)
            finite = math.isfinite(res.top_1_accuracy) and len(res.step_times) == 1
        else:
            setup = runner.setup(RunResult())
            out = setup.step_fn(setup.inputs).numpy()
            finite = bool(np.all(np.isfinite(out[:2])))
            if checkpoint:
                checkpoints.checkpoint(setup.model).write(checkpoint)   # as --train_dir saves
            if state is not None:
                state.update(state_kinds(setup.model))
        out = {"ran": list(_strategy_key(sp)), "finite": finite,
               "notices": list(plan.notices + sp.notices)}
    except UsageError as exc:
        out = {"refused": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a failed cell is the finding
        out = _failure(exc)
    out["seconds"] = round(time.perf_counter() - start, 2)
    return out


def state_kinds(model) -> dict[str, list[str]]:
    """Layer class -> the state it holds that a step may write: its own non-trainable
    variables (by name) and random seed states."""
    kinds: dict[str, set] = {}
    for layer in model._flatten_layers(include_self=False):  # noqa: SLF001
        own = [v.name for v in getattr(layer, "_non_trainable_variables", [])]
        own += ["seed_generator_state" for _ in getattr(layer, "_seed_generators", [])]
        if own:
            kinds.setdefault(type(layer).__name__, set()).update(own)
    return {name: sorted(names) for name, names in kinds.items()}


def stepped(label: str, full: bool = False) -> set[tuple[str, str]]:
    """The (variable_update, precision) cells of `label` whose step runs (the covering grid)."""
    if full or label in FULL_GRID:
        return {(vu, precision) for vu in STEPPED for precision in PRECISIONS}
    return ({(vu, "fp32") for vu in STEPPED}
            | {("parameter_server", precision) for precision in PRECISIONS})


def cells(label: str, scratch: str, state: dict, full: bool = False) -> dict[str, dict]:
    spec = _spec(label)
    flags = ["--model=%s" % spec.name, "--data_name=%s" % spec.dataset,
             "--image_size=%d" % max(spec.min_image_size, 8)]
    checkpoint = os.path.join(scratch, label.replace(":", "_"), "model.ckpt-1")
    out = {}
    for vu in VARIABLE_UPDATES:
        for precision, extra in PRECISIONS.items():
            args = [*flags, "--variable_update=%s" % vu, *extra]
            name = "%s/train/%s/%s" % (label, vu, precision)
            if (vu, precision) in stepped(label, full):
                keep = (vu, precision) == CHECKPOINTED
                out[name] = step_cell(args, checkpoint if keep else None,
                                      state.setdefault(label, {}) if keep else None)
            elif vu not in STEPPED:
                out[name] = strategy_cell(args)
    vu, precision = FORWARD
    out["%s/forward/%s/%s" % (label, vu, precision)] = step_cell(
        [*flags, "--variable_update=%s" % vu, "--forward_only",
         *[f for f in PRECISIONS[precision] if "loss_scale" not in f]])
    vu, precision = EVALUATE
    out["%s/eval/%s/%s" % (label, vu, precision)] = step_cell(
        [*flags, "--variable_update=%s" % vu, "--eval", "--train_dir=%s" % checkpoint,
         *PRECISIONS[precision]])
    return out


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "ci"
    full = sys.argv[2:] == ["full"]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_DEVICES)
    start = time.perf_counter()
    out: dict[str, dict] = {}
    state: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tfbench-matrix-") as scratch:
        for label in variants(which):
            done = cells(label, scratch, state, full)
            out.update(done)
            keras.backend.clear_session()
            gc.collect()
            failed = sorted(name for name, cell in done.items()
                            if "failed" in cell or cell.get("finite") is False)
            print("# %s: %d cells, failed: %s (%.0f s)" % (
                label, len(done), ", ".join(failed) or "none", time.perf_counter() - start),
                file=sys.stderr, flush=True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print("RESULT " + json.dumps({"cells": out, "state": state,
                                  "seconds": round(time.perf_counter() - start, 1),
                                  "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1)}))


if __name__ == "__main__":
    main()
