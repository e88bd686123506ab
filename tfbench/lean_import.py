"""TensorFlow and Keras imported without the optional libraries they probe for at import time.

Keras imports matplotlib (an image-gallery helper) and pandas (DataFrame slicing for fit()),
TensorFlow's internal TF1 Keras imports scipy (sparse inputs), each inside `try: ... except
ImportError`, whenever they are installed, and tfbench's own report tools install them. A
benchmark run uses none of those paths, and importing them costs ~0.5 s of cold start on a
2-core machine (measured: import tensorflow+keras 2.96 -> 2.41 s). They are hidden only while
the two frameworks import; afterwards importing them works as usual.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Iterator, Sequence

OPTIONAL = ("matplotlib", "pandas", "scipy")


@contextlib.contextmanager
def hidden(modules: Sequence[str] = OPTIONAL) -> Iterator[None]:
    """Within the block, importing one of `modules` (not yet imported) raises ImportError."""
    hide = [m for m in modules if m not in sys.modules]
    for name in hide:
        sys.modules[name] = None   # the import system raises ImportError for a None entry
    try:
        yield
    finally:
        for name in hide:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_lean(names: Sequence[str], optional: Sequence[str] = OPTIONAL) -> None:
    """Imports `names` with `optional` hidden; if one of them needs an optional library after
    all (another version may import it unconditionally), imports them again as usual."""
    try:
        with hidden(optional):
            for name in names:
                importlib.import_module(name)
    except ImportError:
        for name in names:
            importlib.import_module(name)


def import_frameworks() -> None:
    """Imports Keras and TensorFlow (once per process) with OPTIONAL hidden."""
    if "keras" not in sys.modules or "tensorflow" not in sys.modules:
        import_lean(("keras", "tensorflow"))
