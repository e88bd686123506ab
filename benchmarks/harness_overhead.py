#!/usr/bin/env python3
"""Harness overhead: tfbench's timed loop against a bare tf.function loop running the same step.

Both sides run in fresh processes, alternately, on the same model, batch and image size:
  tfbench: `python -m tfbench ...`, its `total images/sec` (per-step host sync, Step lines,
           monitors sampling in the background);
  bare:    the same compiled step (tfbench.engine.steps) called N times in a plain Python loop with
           one `.numpy()` at the end, timed with perf_counter.
Prints the medians and overhead = 1 - tfbench / bare (the target is under 2% for resnet50).

  python benchmarks/harness_overhead.py [--model=resnet50] [--batch_size=32] [--image_size=224]
      [--num_batches=20] [--repeats=3] [--precision=fp32]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bare_loop(model: str, batch: int, size: int, steps_n: int, warmup: int,
              precision: str) -> float:
    """images/sec of the bare loop (runs in this process)."""
    sys.path.insert(0, ROOT)
    import tensorflow as tf

    from tfbench.config import fast_paths
    from tfbench.engine import optimizers, steps
    from tfbench.models import catalog
    from tfbench.config.settings import make_settings
    spec = catalog.get(model)
    optimizers.set_policy(precision)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        net = spec.build(size, "NHWC")
        opt = optimizers.make_optimizer(make_settings({"optimizer": "sgd"}), 0.001)
        opt.build(net.trainable_variables)
    config = steps.StepConfig(spec.num_classes - 1, 4e-5, fast_paths=fast_paths.for_device("cpu"))
    step = steps.Steps(net, opt, strategy, config).train_step()
    images = steps.synthetic_images(strategy, batch, size, optimizers.compute_dtype(precision))
    for _ in range(warmup):
        step(images).numpy()
    start = time.perf_counter()
    for _ in range(steps_n):
        out = step(images)
    out.numpy()
    return steps_n * batch / (time.perf_counter() - start)


def _run(cmd: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, check=True, cwd="/tmp").stdout
    line = out.rstrip("\n").split("\n")[-2]
    return float(line.split(" ")[-1])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--image_size", type=int, default=224)
    ap.add_argument("--num_batches", type=int, default=20)
    ap.add_argument("--num_warmup_batches", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--bare", action="store_true", help="internal: run the bare loop only")
    args = ap.parse_args(argv)
    if args.bare:
        ips = bare_loop(args.model, args.batch_size, args.image_size, args.num_batches,
                        args.num_warmup_batches, args.precision)
        print("-" * 64 + "\ntotal images/sec: %.2f\n" % ips + "-" * 64)
        return 0
    common = ["--model=%s" % args.model, "--batch_size=%d" % args.batch_size,
              "--image_size=%d" % args.image_size, "--num_batches=%d" % args.num_batches,
              "--num_warmup_batches=%d" % args.num_warmup_batches,
              "--precision=%s" % args.precision]
    tfbench_cmd = [sys.executable, "-m", "tfbench", "--device=cpu", "--csv_file=",
                   "--json_dir="] + common
    bare_cmd = [sys.executable, os.path.abspath(__file__), "--bare"] + common
    results = {"tfbench": [], "bare": []}
    for i in range(args.repeats):
        order = [("tfbench", tfbench_cmd), ("bare", bare_cmd)]
        for name, cmd in (order if i % 2 == 0 else order[::-1]):
            results[name].append(_run(cmd))
            print("%-8s %.2f images/sec" % (name, results[name][-1]), flush=True)
    t, b = np.median(results["tfbench"]), np.median(results["bare"])
    print("median tfbench %.2f, bare %.2f images/sec: harness overhead %.2f%%"
          % (t, b, 100 * (1 - t / b)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
