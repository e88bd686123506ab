"""The all-reduce probe on 3 logical CPU devices, in a fresh process (the CPU splits only before
TensorFlow starts); run by test_allreduce_probe.py, prints one `RESULT {json}` line.

Each strategy is the one a run of the flags builds (strategy.make_strategy): replicated fp16
(gradients sent as fp16 by packing.PackedAllReduce), the spread parameter server, independent
replicas.
"""

from __future__ import annotations

import json

import paths  # noqa: F401 - the checkout's root first on sys.path

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfbench.config.argv import parse_settings  # noqa: E402
from tfbench.distribute import allreduce_probe, devices, sync, variables  # noqa: E402
from tfbench.distribute import strategy as strategy_lib  # noqa: E402

FLAGS = ["tfbench", "--device=cpu", "--num_gpus=3", "--model=trivial"]


def _strategy(*flags):
    p = parse_settings(FLAGS + list(flags))
    plan = devices.select_devices(p)
    devices.prepare_runtime(p, plan)
    return strategy_lib.make_strategy(p, plan).strategy


def main() -> None:
    out = {}
    tensors = allreduce_probe.TensorSet("two", ((1000,), (4, 6)), ("float32", "float32"))
    replicated = _strategy("--variable_update=replicated", "--precision=fp16")
    out["transfer"] = allreduce_probe.transfer(replicated).dtype
    out["sent_bytes"] = allreduce_probe.sent_bytes(tensors, replicated)
    out["not_probed_replicated"] = allreduce_probe.not_probed(replicated)
    # Count the all-reduces of a call: when it is traced (sync.reduce_gradients, once per
    # replica and all-reduce on this merge-call path), and when it runs, after grappler (a
    # stateless counter on each result, which runs only where the all-reduce does). The clock
    # advances 1 s at each reading: every timed call lasts exactly 1 s.
    traced, ran, reduce_gradients = [], [], sync.reduce_gradients

    def count(x):
        ran.append(1)
        return x

    def counted(*args, **kwargs):
        traced.append(1)
        out = reduce_gradients(*args, **kwargs)
        return [tf.numpy_function(count, [x], x.dtype, stateful=False) for x in out]
    sync.reduce_gradients = counted
    ticks = iter(range(10 ** 6))
    timing = allreduce_probe.time_all_reduce(replicated, tensors, repeats=3, warmup=1,
                                             clock=lambda: float(next(ticks)))
    calls = 1 + 3   # the warm-up and the timed ones
    sync.reduce_gradients = reduce_gradients
    out["timing"] = {"count": timing.count, "nbytes": timing.nbytes, "dtype": timing.dtype,
                     "ranks": timing.ranks, "times": len(timing.times),
                     "median_ms": timing.time_ms, "algbw": timing.algbw_gbs,
                     "busbw": timing.busbw_gbs, "per_sync": timing.per_sync,
                     "all_reduces_traced": len(traced) / timing.ranks,
                     "all_reduces_run": len(ran) / (timing.ranks * tensors.count * calls)}
    # What a call returns, on ones: every replica's sum of each result's first element, after 3
    # all-reduces each of the one before's results (x3 each).
    step = allreduce_probe._step(replicated, compiled=False, per_sync=3)  # noqa: SLF001
    ones = allreduce_probe._values(replicated, tensors, fill=1.0)  # noqa: SLF001
    out["step_value"] = float(step(ones))

    # Sizes every rank has room for: replica 1 says no to the second, every replica to the last.
    out["agreed"] = allreduce_probe.agreed(
        replicated, lambda replica: [True, replica != 1, True, False])
    out["held_copies"] = {
        "replicated": allreduce_probe.held_copies(replicated),
        "pscpu": allreduce_probe.held_copies(_strategy("--variable_update=replicated",
                                                       "--all_reduce_spec=pscpu"))}

    spread = _strategy("--variable_update=parameter_server")
    with variables.scope(spread):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                                  keras.layers.Dense(2)])
    model_set = allreduce_probe.gradient_set("m", model.trainable_variables)
    out["model_set"] = {"shapes": model_set.shapes, "dtypes": model_set.dtypes,
                        "nbytes": model_set.nbytes}
    out["spread_at_variables"] = allreduce_probe.at_variables(spread)
    ps = allreduce_probe.time_all_reduce(spread, model_set, repeats=2, warmup=1,
                                         variables=model.trainable_variables, per_sync=2)
    out["ps"] = {"at_variables": ps.at_variables, "busbw": ps.busbw_gbs, "nbytes": ps.nbytes,
                 "times": len(ps.times), "per_sync": ps.per_sync}
    try:
        allreduce_probe.time_all_reduce(spread, model_set, repeats=1, warmup=1)
    except ValueError as exc:
        out["ps_without_variables"] = str(exc)
    out["not_probed_independent"] = allreduce_probe.not_probed(
        _strategy("--variable_update=independent"))
    out["not_probed_one"] = allreduce_probe.not_probed(tf.distribute.OneDeviceStrategy("/cpu:0"))
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
