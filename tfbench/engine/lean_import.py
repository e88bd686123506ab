"""TensorFlow and Keras imported without the optional libraries they probe for at import time.

Keras imports matplotlib (an image-gallery helper) and pandas (DataFrame slicing for fit()),
TensorFlow's internal TF1 Keras imports scipy (sparse inputs), each inside `try: ... except
ImportError`, whenever they are installed, and tfbench's own report tools install them. A
benchmark run uses none of those paths, and importing them costs ~0.5 s of cold start on a
2-core machine (measured: import tensorflow+keras 2.96 -> 2.41 s). They are hidden only while
the two frameworks import; afterwards importing them works as usual.

The cyclic garbage collector is paused while they import and the objects they leave are then
frozen (gc.freeze): the import creates ~280,000 tracked objects, the collector ran ~640 times
during it (0.39 s), and every later full collection walked them all, a 0.12-0.16 s pause that can
land inside a timed step. Module-level objects live as long as the process, so no garbage is kept.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sys
from typing import Iterator, Sequence

OPTIONAL = ("matplotlib", "pandas", "scipy", "IPython")


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


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block; the objects alive at its end are frozen
    (never scanned again) and the collector is left as it was found."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def import_frameworks() -> None:
    """Imports Keras and TensorFlow (once per process) with OPTIONAL hidden and the garbage
    collector paused. InstallError, before importing, when the installed numpy is one the
    installed TensorFlow cannot import with."""
    if "keras" not in sys.modules or "tensorflow" not in sys.modules:
        from tfbench import errors, pins
        problem = pins.numpy_mismatch()
        if problem is not None:
            raise errors.InstallError(problem)
        with collector_paused():
            import_lean(("keras", "tensorflow"))
