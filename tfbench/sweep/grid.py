"""The grid of a sweep: its axes (--sweep=KEY=V1,V2,...), the points they make, and the flags
each point's child runs with.

What a point runs is read with the benchmark's own parser (tfbench.config.argv, no TensorFlow
import), never from the raw flags, so a point its child would refuse stops the sweep before any
process starts.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Sequence

from tfbench import errors
from tfbench.config import flagdefs
from tfbench.config import settings as settings_lib
from tfbench.config.argv import settings_of_flags, strip_flags

# Flags the sweep sets for every child itself.
RESERVED_KEYS = ("csv_file", "json_dir", "flagfile")

_TRUE = ("1", "true", "t", "yes", "y")
_FALSE = ("0", "false", "f", "no", "n")


@dataclasses.dataclass(frozen=True)
class Axis:
    """One --sweep: a key (or keys zipped with '+') and its values."""

    keys: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]


def _check_value(key: str, value: str) -> str:
    """The value as the child should receive it; UsageError when it cannot be valid."""
    spec = flagdefs.BY_NAME[key]
    if value == "":
        return value  # '' leaves the flag at its default
    try:
        if spec.kind == "int":
            int(value)
        elif spec.kind == "float":
            float(value)
    except ValueError:
        raise errors.UsageError("--sweep=%s: %r is not a%s %s" % (
            key, value, "n" if spec.kind == "int" else "", spec.kind)) from None
    if spec.kind == "bool":
        if value.lower() in _TRUE:
            return "true"
        if value.lower() in _FALSE:
            return "false"
        raise errors.UsageError("--sweep=%s: %r is not true/false" % (key, value))
    if spec.kind == "enum" and value not in spec.enum_values:
        raise errors.UsageError("--sweep=%s: %r is not one of %s"
                                % (key, value, flagdefs.choices(spec)))
    return value


def parse_axis(text: str) -> Axis:
    """`KEY=V1,V2,...`, or zipped keys `K1+K2=a1+a2,b1+b2` (e.g. precision+xla=fp32+0,fp16+1).

    An empty value leaves the flag at its default (e.g. data_dir=,/data/imagenet).
    """
    if "=" not in text:
        raise errors.UsageError("--sweep=%s: expected KEY=V1,V2,..." % text)
    key_text, values_text = text.split("=", 1)
    keys = tuple(k.strip() for k in key_text.split("+"))
    for key in keys:
        if key not in flagdefs.BY_NAME:
            raise errors.UsageError("--sweep: unknown flag %r" % key)
        if key in RESERVED_KEYS:
            raise errors.UsageError("--sweep: %s is set by the sweep itself" % key)
    if len(set(keys)) != len(keys):
        raise errors.UsageError("--sweep=%s: a key is repeated" % text)
    values = []
    for item in values_text.split(","):
        parts = tuple(p.strip() for p in item.split("+")) if len(keys) > 1 else (item.strip(),)
        if len(parts) != len(keys):
            raise errors.UsageError("--sweep=%s: %r needs %d '+'-separated values"
                                    % (text, item, len(keys)))
        values.append(tuple(_check_value(k, v) for k, v in zip(keys, parts)))
    if not values or values == [("",) * len(keys)]:
        raise errors.UsageError("--sweep=%s: no values" % text)
    return Axis(keys, tuple(values))


@dataclasses.dataclass(frozen=True)
class Point:
    index: int                  # position in the grid (repeats share it)
    repeat: int                 # 1-based
    values: dict[str, str]      # swept key -> value as given
    flags: dict[str, str]       # flag -> value passed to the child ('' = not passed)
    name: str


def _slug(value: str) -> str:
    if "/" in value:
        value = value.rstrip("/").rsplit("/", 1)[-1] or "root"
    value = re.sub(r"[^A-Za-z0-9.]+", "-", value).strip("-")
    return (value or "default")[:40]


def point_name(index: int, values: dict[str, str], repeat: int = 1, repeats: int = 1) -> str:
    """`003_num_gpus-2_batch_size-64` (and `_r2` for the second of several repeats)."""
    parts = ["%03d" % index] + ["%s-%s" % (k, _slug(v)) for k, v in values.items()]
    if repeats > 1:
        parts.append("r%d" % repeat)
    return "_".join(parts)


def expand_grid(axes: Sequence[Axis], repeats: int = 1, scaling: str = "weak",
                base_flags: Sequence[str] = ()) -> list[Point]:
    """All points: the product of the axes (first axis slowest), repeats interleaved.

    Strong scaling: the batch (swept or --batch_size) is the global batch, and each point gets
    the per-device batch whose global batch (micro-batches x devices, config.params) it is.
    """
    if repeats < 1:
        raise errors.UsageError("--repeats must be >= 1, got %d" % repeats)
    keys = [k for axis in axes for k in axis.keys]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise errors.UsageError("--sweep: %s swept more than once" % ", ".join(dup))
    if scaling not in ("weak", "strong"):
        raise errors.UsageError("--scaling must be weak or strong, got %r" % scaling)
    if scaling == "strong" and "num_gpus" not in keys:
        raise errors.UsageError("--scaling=strong needs --sweep=num_gpus=...")
    combos = []
    for index, choice in enumerate(itertools.product(*[axis.values for axis in axes])):
        values = {k: v for axis, vals in zip(axes, choice) for k, v in zip(axis.keys, vals)}
        flags = dict(values)
        if scaling == "strong":
            flags["batch_size"] = str(_strong_batch(settings_of_flags(point_flags(base_flags,
                                                                                values))))
        combos.append((index, values, flags))
    return [Point(index, repeat, values, flags, point_name(index, values, repeat, repeats))
            for repeat in range(1, repeats + 1) for index, values, flags in combos]


def _strong_batch(p: "settings_lib.Settings") -> int:
    """The per-device batch of a strong-scaling point: its --batch_size is the global batch,
    over the point's micro-batches and devices on one host (a sweep point is one process)."""
    if not p.schedule.batch_size:
        raise errors.UsageError("--scaling=strong needs --batch_size (the global batch kept "
                                "fixed) or --sweep=batch_size=...")
    try:
        return settings_lib.per_device_for_global(p.schedule.batch_size, p.asks.accum_steps,
                                                p.asks.devices, 1)
    except errors.UsageError as exc:
        raise errors.UsageError("--scaling=strong: %s" % exc) from None


def point_flags(base_flags: Sequence[str], flags: dict[str, str]) -> list[str]:
    """Base flags (minus those the point sets and the sweep's own), then the point's flags."""
    args = strip_flags(base_flags, list(flags) + list(RESERVED_KEYS))
    return args + ["--%s=%s" % (k, v) for k, v in flags.items() if v != ""]


def child_args(point: Point, base_flags: Sequence[str], csv_path: str,
               json_dir: str) -> list[str]:
    """The child's flags: base flags (minus those the point sets), point flags, outputs."""
    return point_flags(base_flags, point.flags) + ["--csv_file=%s" % csv_path,
                                                   "--json_dir=%s" % json_dir]


def check_point(point: Point, args: Sequence[str]) -> None:
    """UsageError naming the point when its child would refuse `args` (no process started)."""
    try:
        settings_of_flags(args)
    except errors.UsageError as exc:
        raise errors.UsageError("point %s: %s" % (point.name, exc)) from None

