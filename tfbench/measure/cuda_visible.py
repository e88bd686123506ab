"""CUDA_VISIBLE_DEVICES as the CUDA driver reads it: the one reader tfbench has.

The NVML monitor's GPU mapping and the GPU count (tfbench.measure.nvml: resolve_handles,
cuda_device_count), the evaluation's GPU count (tfbench.sweep.evaluation) and
scripts/scaling_test.sh (`python -m tfbench.measure.nvml` prints the count) read the variable
here. The rules are NVIDIA's (CUDA Programming Guide, "CUDA Environment Variables",
CUDA_VISIBLE_DEVICES) and, where that page says nothing, PyTorch's reading of the driver
(torch.cuda._parse_visible_devices and _transform_uuid_to_ordinals, pytorch/pytorch#84879,
#92315):

* unset: every GPU; set and empty: none;
* the first entry sets the form of the whole list: GPU UUIDs (`GPU-<uuid>` or a prefix of one),
  MIG slices (`MIG-<uuid>`, or `MIG-GPU-<uuid>/<gi>/<ci>` before driver R470), else ordinals;
  an entry of another form ends the list (UUID entries are taken as written);
* ordinals are read as C's strtoul reads them: leading blanks skipped, then digits, the rest
  ignored (` 1` and `1gpu` are 1); an entry without digits, or a negative one, ends the list;
* an entry that names no device (an ordinal past the last GPU, a UUID prefix that matches no GPU
  or several) ends the list: only the devices before it are visible;
* a device named twice leaves none visible.

Pure Python: the devices are looked up by the caller (NVML handles, UUID strings, ...).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Hashable, Optional, Union

VARIABLE = "CUDA_VISIBLE_DEVICES"
GPU_UUID, MIG, ORDINAL = "GPU-", "MIG-", "ordinal"

Entry = Union[int, str]   # an ordinal, or a GPU-/MIG- identifier as written

# C's isspace() blanks, then an optional sign and the digits strtoul converts.
_STRTOUL = re.compile(r"[ \t\n\v\f\r]*([+-]?\d+)")


class NoDevice(Exception):
    """An entry that names no device: CUDA stops reading the list there. The text says why."""


def form(value: str) -> str:
    """GPU_UUID, MIG or ORDINAL: the form of the list, set by its first entry."""
    for prefix in (GPU_UUID, MIG):
        if value.startswith(prefix):
            return prefix
    return ORDINAL


def _ordinal(item: str) -> Optional[int]:
    match = _STRTOUL.match(item)
    if match is None:
        return None
    value = int(match.group(1))
    return value if value >= 0 else None


def entries(value: Optional[str]) -> Optional[list[Entry]]:
    """The entries CUDA reads, before any device is looked up: None when the variable is unset;
    ordinals as ints, UUIDs as written; the list ends at the first entry of another form or
    without an ordinal."""
    if value is None:
        return None
    kind = form(value)
    out: list[Entry] = []
    for item in value.split(","):
        if kind == ORDINAL:
            ordinal = _ordinal(item)
            if ordinal is None:
                break
            out.append(ordinal)
        else:
            if not item.startswith(kind):
                break
            out.append(item)
    return out


@dataclasses.dataclass(frozen=True)
class Visible:
    """The devices CUDA makes visible, in CUDA's order, and why fewer than written."""
    devices: list[Any]
    stopped: str = ""        # the entry that ended the list (or emptied it) and why


def read(value: Optional[str], lookup: Callable[[Entry], Any],
         key: Callable[[Any], Hashable] = lambda device: device) -> Optional[Visible]:
    """The devices `value` (the variable's value) makes visible; None when it is unset.

    lookup(entry) gives the device an entry names or raises NoDevice; key(device) identifies a
    device, so that two entries naming one device (`0,00`, a UUID and its prefix) are seen as a
    repeat."""
    listed = entries(value)
    if listed is None:
        return None
    devices: list[Any] = []
    seen: set[Hashable] = set()
    for entry in listed:
        try:
            device = lookup(entry)
        except NoDevice as exc:
            return Visible(devices, "entry %r: %s" % (entry, exc))
        if key(device) in seen:
            return Visible([], "entry %r names a device listed before it: CUDA then shows "
                           "none" % (entry,))
        seen.add(key(device))
        devices.append(device)
    written = value.split(",")
    if len(listed) < len(written):
        kind = form(value)
        return Visible(devices, "entry %r is not %s" % (
            written[len(listed)], "an ordinal" if kind == ORDINAL else "a %s id" % kind[:3]))
    return Visible(devices)
