"""Lines TensorFlow's C++ runtime writes to the process's stderr that tfbench knows to be noise,
kept out of the classic log.

TensorFlow logs from C++ straight to file descriptor 2, past Python's sys.stderr, so the only
way to drop one known line is to hold descriptor 2 in a temporary file while the call that
logs it runs, then write back everything else in order.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator

# MultiDeviceIterator (how tf.distribute feeds each replica's device from the input pipeline)
# wraps the pipeline in one GeneratorDataset per device, which tf.data cannot serialise, so its
# graph rewrites skip that small per-device buffer and say so once per iterator (TensorFlow
# 2.17-2.21, dataset.cc). The input pipeline itself is optimised when the iterator is created.
PER_DEVICE_BUFFER_NOT_OPTIMIZED = "Input of GeneratorDatasetOp::Dataset will not be optimized"


@contextlib.contextmanager
def without_lines(*needles: str) -> Iterator[None]:
    """Runs the block with descriptor 2 held aside; then writes back its lines except those
    holding one of `needles`. The holding file has no name, so nothing is left behind."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    held = tempfile.TemporaryFile()
    try:
        os.dup2(held.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        held.seek(0)
        for line in held.read().splitlines(keepends=True):
            if not any(n.encode() in line for n in needles):
                os.write(2, line)
        held.close()
