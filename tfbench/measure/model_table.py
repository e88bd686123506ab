"""Parameters and forward FLOPs of every registered model at its default image size, computed
once and shipped as model_stats.csv, so `tfbench models` lists them at once instead of building
71 models (about 3 minutes on a small CPU).

The figures come from tfbench.measure.flops, as a run's `Model stats:` line does; at another
image size they are computed (a few CPU-seconds per model). After a model is added,
`python -m tfbench.measure.model_table` computes the rows the table lacks; after one is changed,
`python -m tfbench.measure.model_table NAME` recomputes its rows; `--all` recomputes every row
(after a TensorFlow or Keras upgrade). The test suite checks that it lists every registered model
and recomputes a sample of its rows.
"""

from __future__ import annotations

import csv
import functools
import os
import sys
from typing import Optional, Sequence

from tfbench.measure import flops
from tfbench.models.registry import ModelSpec

FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_stats.csv")
COLUMNS = ("name", "dataset", "image_size", "params", "flops")
_VERSIONS = "# computed with "


def load() -> tuple[dict[tuple[str, str], tuple[int, int, int]], str]:
    """((name, dataset) -> (image_size, params, FLOPs per image), the versions it was computed
    with, e.g. 'TensorFlow 2.21.0, Keras 3.15.1')."""
    with open(FILE, newline="") as handle:
        first = handle.readline()
        rows = list(csv.DictReader(handle))
    table = {(r["name"], r["dataset"]): (int(r["image_size"]), int(r["params"]), int(r["flops"]))
             for r in rows}
    versions = first[len(_VERSIONS):].split(" by ")[0].strip() if first.startswith(_VERSIONS) \
        else ""
    return table, versions


def stats(spec: ModelSpec, image_size: int = 0) -> tuple[int, int]:
    """(params, forward FLOPs per image) at image_size (0: the model's default): the shipped
    figure at the default size, else computed."""
    size = image_size or spec.image_size
    shipped = _shipped().get((spec.name, spec.dataset))
    if shipped is not None and shipped[0] == size:
        return shipped[1], shipped[2]
    return flops.spec_stats(spec, size)


def names() -> list[str]:
    """Every registered model's name, from the shipped table (no TensorFlow import); empty
    where the table is not shipped."""
    return sorted({name for name, _ in _shipped()})


@functools.lru_cache(maxsize=1)
def _shipped() -> dict[tuple[str, str], tuple[int, int, int]]:
    try:
        return load()[0]
    except OSError:   # not shipped: every figure is computed
        return {}


def compute(spec: ModelSpec) -> dict[str, object]:
    """One row of the file, computed now."""
    params, flop_count = flops.spec_stats(spec, spec.image_size)
    return {"name": spec.name, "dataset": spec.dataset, "image_size": spec.image_size,
            "params": params, "flops": flop_count}


def write(path: Optional[str] = None, names: Optional[Sequence[str]] = None,
          log=sys.stderr) -> int:
    """Writes the table into `path` (default FILE); returns the rows computed. names=None:
    every registered model's row is computed; else the rows of the models named and of
    registered models the file lacks are, the other rows are kept (a model no longer registered
    goes), so adding a model costs its own row, not 70 others'. A partial update refuses a file
    computed with another TensorFlow or Keras (ValueError): its rows would not agree."""
    import keras
    import tensorflow as tf

    from tfbench.models import catalog
    target = path or FILE
    versions = "TensorFlow %s, Keras %s" % (tf.__version__, keras.__version__)
    kept: dict[tuple[str, str], dict[str, object]] = {}
    if names is not None and os.path.exists(target):
        with open(target, newline="") as handle:
            first = handle.readline()
            kept = {(r["name"], r["dataset"]): r for r in csv.DictReader(handle)}
        found = first[len(_VERSIONS):].split(" by ")[0].strip()
        if kept and found != versions:
            raise ValueError("%s was computed with %s, this is %s: recompute every row "
                             "(python -m tfbench.measure.model_table --all)"
                             % (target, found, versions))
    specs = catalog.all_specs()
    unknown = sorted(set(names or ()) - {s.name for s in specs})
    if unknown:
        raise ValueError("no registered model named %s" % ", ".join(unknown))
    rows, computed = [], 0
    for spec in specs:
        key = (spec.name, spec.dataset)
        if names is None or spec.name in names or key not in kept:
            rows.append(compute(spec))
            computed += 1
            print("computed %s (%s)" % key, file=log)
        else:
            rows.append(kept[key])
    with open(target, "w", newline="") as handle:
        handle.write("%s%s by python -m tfbench.measure.model_table\n" % (_VERSIONS, versions))
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return computed


def main(argv: Sequence[str]) -> int:
    """python -m tfbench.measure.model_table [--all | NAME ...]: no argument computes the rows
    of registered models the table lacks; NAMEs recompute those models' rows too; --all every
    row (after a TensorFlow or Keras upgrade)."""
    names = None if list(argv) == ["--all"] else list(argv)
    try:
        count = write(names=names)
    except ValueError as exc:
        print("model_table: %s" % exc, file=sys.stderr)
        return 2
    print("%d row(s) computed into %s" % (count, FILE))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
