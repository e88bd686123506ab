"""CPU-only speed-ups, chosen in one place by the kind of device a run computes on.

The GPU path is TensorFlow's and Keras' standard one, so every op it builds has a GPU kernel
(tests/gpu_path/test_gpu_kernels.py traces the GPU steps and checks each op against the kernel
registry). Its optimizer update is one TensorFlow training kernel per variable on every device kind
(ResourceApplyGradientDescent, -KerasMomentum, -RMSProp, -Adam: tfbench.engine.update_kernels),
as the legacy script's. On the CPU three rewrites are faster, and only the CPU takes them:

  sgd_decay_in_update  plain SGD on one replica applies the weight decay inside its update
                       kernel (ResourceApplyProximalGradientDescent, registered for the CPU
                       only) instead of differentiating the L2 term
  dense_input_grad     a wide fully connected layer's input gradient as (W @ dy^T)^T
                       (models/affine_grad), which spares oneDNN a transposed-weight matmul
  frozen_weights       a forward-only process lets oneDNN keep its weights in its own layout
                       (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS)

Steps carry their FastPaths in StepConfig; layers read the selection that is active while a step
is traced (`using`), per thread, because MirroredStrategy traces each replica on its own thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Iterator


@dataclasses.dataclass(frozen=True)
class FastPaths:
    sgd_decay_in_update: bool = False
    dense_input_grad: bool = False
    frozen_weights: bool = False


STANDARD = FastPaths()
CPU = FastPaths(sgd_decay_in_update=True, dense_input_grad=True, frozen_weights=True)


def for_device(kind: str) -> FastPaths:
    """The speed-ups for a device kind ("cpu" or "gpu"): all on the CPU, none elsewhere."""
    return CPU if kind.lower() == "cpu" else STANDARD


_local = threading.local()


def active() -> FastPaths:
    """The selection of the step being traced on this thread; STANDARD outside any step."""
    return getattr(_local, "paths", STANDARD)


@contextlib.contextmanager
def using(paths: FastPaths) -> Iterator[None]:
    previous = active()
    _local.paths = paths
    try:
        yield
    finally:
        _local.paths = previous
