"""The matrix: model variants x --variable_update x precision, one training step each on 2 logical
CPU devices, as `tfbench --device=cpu --num_gpus=2 ...` runs them; forward-only and --eval once
per variant. Run in a fresh process by test_matrix.py (logical devices exist only if configured
before TensorFlow initialises); one process runs every cell, which is what keeps it cheap.

Each cell goes through the CLI's own parsing (parse_params), the plan, make_strategy and the
mode's runner, then runs one step: it either trains (the step is traced and runs, its loss is
finite) or is refused with a UsageError, whose one line is what the CLI prints. Anything else is
a failure, reported with its class. Prints one JSON object: cell -> outcome, and seconds.

Usage: matrix_checks.py [ci|all|MODEL[:DATA_NAME],...]
  ci   the representative variants (REPRESENTATIVE): every kind of layer state tfbench builds
  all  every model name, and both datasets where a name has two
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfbench.config.argv import parse_params  # noqa: E402
from tfbench.distribute import strategy as strategy_lib  # noqa: E402
from tfbench.engine.plan import EVAL, resolve  # noqa: E402
from tfbench.engine.runner import RUNNERS  # noqa: E402
from tfbench.errors import UsageError  # noqa: E402
from tfbench.models import catalog  # noqa: E402
from tfbench.results import RunResult  # noqa: E402

NUM_DEVICES = 2
BASE = ("--device=cpu", "--num_gpus=%d" % NUM_DEVICES, "--batch_size=1", "--num_batches=1")
# Every value; the multi-host ones run on one host as replicated (with a notice), horovod runs
# one device per process.
VARIABLE_UPDATES = ("parameter_server", "replicated", "independent", "distributed_replicated",
                    "collective_all_reduce", "distributed_all_reduce", "horovod")
# fp16 with dynamic loss scaling: the loss-scale optimizer's state is in the step too.
PRECISIONS = {"fp32": (), "fp16": ("--use_fp16", "--fp16_enable_auto_loss_scale"),
              "bf16": ("--precision=bf16",)}
# Forward-only and --eval once per variant, under the legacy default --variable_update.
FORWARD = ("parameter_server", "fp16")
EVALUATE = ("parameter_server", "bf16")
# Variants whose layers hold every kind of layer state and dtype-sensitive op the registry's
# models hold: Dropout (a seed state written every step), batch norm's statistics
# (FusedBatchNorm), layer norm, LRN (the cifar10 AlexNet), Keras' Normalization and
# Rescaling stem and squeeze-excite (EfficientNet), patch embedding and attention (ViT), and
# the trivial and LeNet models. TFBENCH_MATRIX_MODELS=all checks every model name.
REPRESENTATIVE = ("trivial", "lenet", "alexnet", "alexnet:cifar10", "resnet20",
                  "mobilenet_v3_small", "efficientnet_b0", "vit_tiny")


def variants(which: str) -> list[tuple[str, str]]:
    """(model, dataset) pairs: every dataset a name is registered for, when `which` is 'all'."""
    if which == "all":
        return [(s.name, s.dataset) for s in catalog.all_specs()]
    names = REPRESENTATIVE if which == "ci" else which.split(",")
    out = []
    for item in names:
        name, _, dataset = item.partition(":")
        out.append((name, catalog.get(name, dataset or None).dataset))
    return out


def _label(model: str, dataset: str) -> str:
    default = catalog.get(model).dataset
    return model if dataset == default else "%s:%s" % (model, dataset)


def _image_size(spec) -> int:
    # The smallest size each architecture takes (tiny inputs: the step, not its speed, counts).
    return max(spec.min_image_size, 8)


# One strategy object per kind, shared by the cells that build that kind: TensorFlow numbers
# collective instances per strategy object, so a second MirroredStrategy in one process reuses
# the first one's instance keys and its collectives meet the wrong shapes (a harness artefact: a
# run builds one strategy). make_strategy builds the same kind from the same flags, so the
# cell's step runs on an equal strategy; the key holds everything that makes them differ.
_STRATEGIES: dict[tuple, tf.distribute.Strategy] = {}


def _shared(sp: strategy_lib.StrategyPlan) -> tf.distribute.Strategy:
    key = (type(sp.strategy), tuple(sp.strategy.extended.worker_devices), sp.reduction)
    return _STRATEGIES.setdefault(key, sp.strategy)


def run_cell(args: list[str], checkpoint: str | None = None) -> dict:
    """One cell: {"ran": strategy, "notices": [...]} or {"refused": line} or {"failed": ...}."""
    start = time.perf_counter()
    out: dict = {}
    try:
        p = parse_params(["tfbench", *BASE, *args])
        plan = resolve(p)
        sp = strategy_lib.make_strategy(p, plan.device)
        runner = RUNNERS[plan.mode](p=p, plan=plan, strategy=_shared(sp))
        if plan.mode == EVAL:
            res = RunResult()
            runner.run(res)
            finite = math.isfinite(res.top_1_accuracy) and bool(res.step_times)
        else:
            setup = runner.setup(RunResult())
            step = setup.step_fn(setup.inputs).numpy()
            finite = bool(np.all(np.isfinite(step[:2])))
            if checkpoint:
                tf.train.Checkpoint(model=setup.model).write(checkpoint)
        out = {"ran": type(sp.strategy).__name__, "finite": finite,
               "notices": list(plan.notices) + list(sp.notices)}
    except UsageError as exc:
        out = {"refused": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a failed cell is the finding
        text = str(exc).strip().splitlines()
        out = {"failed": "%s: %s" % (type(exc).__name__, text[0] if text else ""), "text": str(exc)[:3000]}
    out["seconds"] = round(time.perf_counter() - start, 2)
    return out


def cells(model: str, dataset: str, scratch: str) -> dict[str, dict]:
    spec = catalog.get(model, dataset)
    label = _label(model, dataset)
    flags = ["--model=%s" % model, "--data_name=%s" % dataset,
             "--image_size=%d" % _image_size(spec)]
    checkpoint = os.path.join(scratch, label.replace(":", "_"), "model.ckpt-1")
    out = {}
    for vu in VARIABLE_UPDATES:
        for precision, extra in PRECISIONS.items():
            save = checkpoint if (vu, precision) == (EVALUATE[0], "fp32") else None
            out["%s/train/%s/%s" % (label, vu, precision)] = run_cell(
                [*flags, "--variable_update=%s" % vu, *extra], save)
    vu, precision = FORWARD
    out["%s/forward/%s/%s" % (label, vu, precision)] = run_cell(
        [*flags, "--variable_update=%s" % vu, "--forward_only",
         *[f for f in PRECISIONS[precision] if "loss_scale" not in f]])
    vu, precision = EVALUATE
    out["%s/eval/%s/%s" % (label, vu, precision)] = run_cell(
        [*flags, "--variable_update=%s" % vu, "--eval", "--train_dir=%s" % checkpoint,
         *PRECISIONS[precision]])
    return out


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "ci"
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_DEVICES)
    start = time.perf_counter()
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tfbench-matrix-") as scratch:
        for model, dataset in variants(which):
            out.update(cells(model, dataset, scratch))
            keras.backend.clear_session()
            gc.collect()
            print("# %s:%s done at %.0f s" % (model, dataset, time.perf_counter() - start),
                  file=sys.stderr, flush=True)
    print("RESULT " + json.dumps({"cells": out,
                                  "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
