"""Parameters and forward FLOPs of every registered model at its default image size, computed
once and shipped as model_stats.csv, so `tfbench models` lists them at once instead of building
71 models (about 3 minutes on a small CPU).

The figures come from tfbench.measure.flops, as a run's `Model stats:` line does; at another
image size they are computed (a few CPU-seconds per model). The file is regenerated with
`python -m tfbench.measure.model_table` after a model is added or changed; the test suite checks
that it lists every registered model and recomputes a sample of its rows.
"""

from __future__ import annotations

import csv
import functools
import os
import sys
from typing import Optional

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


def write(path: Optional[str] = None) -> int:
    """Recomputes every registered model's row into `path` (default FILE); returns the count."""
    import keras
    import tensorflow as tf

    from tfbench.models import catalog
    specs = catalog.all_specs()
    rows = []
    for i, spec in enumerate(specs):
        rows.append(compute(spec))
        print("[%d/%d] %s (%s)" % (i + 1, len(specs), spec.name, spec.dataset), file=sys.stderr)
    with open(path or FILE, "w", newline="") as handle:
        handle.write("%sTensorFlow %s, Keras %s by python -m tfbench.measure.model_table\n"
                     % (_VERSIONS, tf.__version__, keras.__version__))
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


if __name__ == "__main__":
    print("%d models written to %s" % (write(), FILE))
