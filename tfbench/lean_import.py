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


def import_frameworks() -> None:
    """Imports TensorFlow and Keras (once per process) with OPTIONAL hidden."""
    if "keras" in sys.modules and "tensorflow" in sys.modules:
        return
    with hidden():
        import keras  # noqa: F401
        import tensorflow  # noqa: F401
