"""Whether two devices computed the same numbers: a digest of a pass's loss and gradients, and
how far one device's are from a reference device's (--validate_devices' numeric check).

Each device ran one forward and backward pass on the same inputs from the same weights. With
TensorFlow's op determinism on, devices of one model run the same kernels in the same order and
give the same bytes; a device that does not is computing wrong results. Where determinism is
not available the difference must stay within a bound per compute dtype (BOUNDS).
"""

from __future__ import annotations

import hashlib
import math
from typing import Optional, Sequence

import numpy as np

# The largest difference allowed without op determinism, relative to the largest magnitude of
# the reference's tensor (max_rel_diff). Without determinism the same kernels may sum in
# another order (atomics, another algorithm), and each reordered sum is off by a few units in
# the last place of its accumulator; the backward pass carries such differences through every
# layer. fp32 (and TF32, whose products round the same way on every device) carries 24 bits:
# 1e-5 is about 80 units in the last place of the tensor's largest element. fp16 and bf16
# round every activation to 11 and 8 bits (units of 4.9e-4 and 3.9e-3): one activation that
# rounds the other way moves the gradients by that much, and 1e-2 is a few of bf16's units.
# A device that computes wrong results (a flipped bit, a faulty unit) is off by far more, or
# by a non-finite value.
BOUNDS = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 1e-2}


def digest(arrays: Sequence[Optional[np.ndarray]]) -> str:
    """sha256 (hex) of every array's dtype, shape and bytes in order; None (a variable the
    loss does not reach) counts as its own mark."""
    h = hashlib.sha256()
    for array in arrays:
        if array is None:
            h.update(b"none;")
            continue
        array = np.ascontiguousarray(array)
        h.update(("%s%s;" % (array.dtype.name, array.shape)).encode())
        h.update(array.tobytes())
    return h.hexdigest()


def bit_exact(arrays: Sequence[Optional[np.ndarray]],
              reference: Sequence[Optional[np.ndarray]]) -> bool:
    """The same dtypes, shapes and bytes, array by array."""
    return len(arrays) == len(reference) and all(
        (a is None and b is None) or (a is not None and b is not None and a.dtype == b.dtype
                                      and a.shape == b.shape and a.tobytes() == b.tobytes())
        for a, b in zip(arrays, reference))


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |b| over one tensor, b the reference's: 0.0 where every element has
    the same bits (NaNs included); inf where an element differs and either is not finite.
    When b is all zeros the difference is taken relative to max |a| (1.0 for any non-zero a)."""
    if a.shape != b.shape:
        return math.inf
    if a.tobytes() == b.tobytes():
        return 0.0
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    bits = np.dtype("u%d" % a.dtype.itemsize)
    same = a.ravel().view(bits) == b.ravel().view(bits) if a.dtype == b.dtype \
        else np.zeros(x.shape, bool)
    differ = ~same
    if not (np.all(np.isfinite(x[differ])) and np.all(np.isfinite(y[differ]))):
        return math.inf
    scale = _max_abs(y) or _max_abs(x)
    if not scale:
        return 0.0
    return float(np.max(np.abs(x[differ] - y[differ]))) / scale


def _max_abs(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.max(np.abs(finite))) if finite.size else 0.0


def max_rel_diff(arrays: Sequence[Optional[np.ndarray]],
                 reference: Sequence[Optional[np.ndarray]]) -> float:
    """The largest rel_diff over the tensors (inf when one device has a tensor the other does
    not, or a different count)."""
    if len(arrays) != len(reference):
        return math.inf
    worst = 0.0
    for a, b in zip(arrays, reference):
        if a is None or b is None:
            if a is not b:
                return math.inf
            continue
        worst = max(worst, rel_diff(a, b))
    return worst


def compare(arrays: Sequence[Optional[np.ndarray]],
            reference: Sequence[Optional[np.ndarray]], bound: float,
            deterministic: bool) -> dict:
    """A device's agreement with the reference, as the JSON manifest holds it: bit_exact,
    max_rel_diff (None when infinite: a non-finite value where the other has another, or a
    tensor missing), within_bound, and agrees: bit-exact under op determinism, within the bound
    without it."""
    exact = bit_exact(arrays, reference)
    diff = 0.0 if exact else max_rel_diff(arrays, reference)
    within = exact or (math.isfinite(diff) and diff <= bound)
    return {"bit_exact": exact, "max_rel_diff": diff if math.isfinite(diff) else None,
            "within_bound": within, "agrees": exact if deterministic else within}
