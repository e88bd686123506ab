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

from tfbench.config.argv import parse_params  # noqa: E402
from tfbench.distribute import allreduce_probe, devices, variables  # noqa: E402
from tfbench.distribute import strategy as strategy_lib  # noqa: E402

FLAGS = ["tfbench", "--device=cpu", "--num_gpus=3", "--model=trivial"]


def _strategy(*flags):
    p = parse_params(FLAGS + list(flags))
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
    timing = allreduce_probe.time_all_reduce(replicated, tensors, repeats=3, warmup=1)
    out["timing"] = {"count": timing.count, "nbytes": timing.nbytes, "dtype": timing.dtype,
                     "ranks": timing.ranks, "times": len(timing.times),
                     "median_ms": timing.time_ms, "algbw": timing.algbw_gbs,
                     "busbw": timing.busbw_gbs}
    # What one call returns: every replica's sum of each reduced tensor's first element.
    step = allreduce_probe._step(replicated, compiled=False)  # noqa: SLF001
    out["step_value"] = float(step(allreduce_probe._values(replicated, tensors)))  # noqa: SLF001

    spread = _strategy("--variable_update=parameter_server")
    with variables.scope(spread):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                                  keras.layers.Dense(2)])
    model_set = allreduce_probe.gradient_set("m", model.trainable_variables)
    out["model_set"] = {"shapes": model_set.shapes, "dtypes": model_set.dtypes,
                        "nbytes": model_set.nbytes}
    out["spread_at_variables"] = allreduce_probe.at_variables(spread)
    ps = allreduce_probe.time_all_reduce(spread, model_set, repeats=2, warmup=1,
                                         variables=model.trainable_variables)
    out["ps"] = {"at_variables": ps.at_variables, "busbw": ps.busbw_gbs, "nbytes": ps.nbytes,
                 "times": len(ps.times)}
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
