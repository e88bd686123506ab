"""What a CPU computes half precision on: the x86 units TensorFlow's oneDNN uses for fp16 and
bf16, read from /proc/cpuinfo, and the line a CPU run in fp16 gets.

Without fp16 units TensorFlow runs fp16 on a CPU in software (Eigen converts each element), far
slower than fp32, so the figure of a legacy `--use_fp16` line that fell back to the CPU says
nothing about fp16.
"""

from __future__ import annotations

import os
from typing import Optional

# x86 CPU flags (/proc/cpuinfo) of the units TensorFlow's oneDNN computes half precision on
# (tensorflow/core/util/util.cc, IsDataTypeSupportedByOneDNNOnThisCPU and its AMX twin).
FP16_UNITS = ("avx512_fp16", "amx_fp16")
BF16_UNITS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: Optional[str] = None) -> Optional[frozenset[str]]:
    """The x86 feature flags of /proc/cpuinfo's first CPU; None where there are none to read
    (another architecture, another OS)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as handle:
                cpuinfo = handle.read()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return None


def bf16_units(flags: Optional[frozenset[str]]) -> list[str]:
    """The bf16 units among `flags` (none where they could not be read)."""
    return sorted((flags or frozenset()) & set(BF16_UNITS))


def cpu_fp16_notice(flags: Optional[frozenset[str]]) -> Optional[str]:
    """The line a CPU run in fp16 gets: without fp16 units TensorFlow emulates fp16 in software
    (ResNet-50 at batch 4 took 14.9 s a step on a CPU without them), so the figure says nothing
    about fp16. None when the CPU has fp16 units."""
    if flags is None:
        return ("fp16 on a CPU runs in software unless the CPU has fp16 units (%s), which could "
                "not be read here: this is no fp16 result; --precision=bf16 uses the CPU's "
                "bf16 units where it has them" % " or ".join(FP16_UNITS))
    if flags & set(FP16_UNITS):
        return None
    bf16 = bf16_units(flags)
    return ("fp16 on this CPU runs in software (no %s in /proc/cpuinfo), far slower than fp32: "
            "this is no fp16 result; --precision=bf16 uses a CPU's bf16 units (%s), %s"
            % (" or ".join(FP16_UNITS), ", ".join(BF16_UNITS),
               "which this one has: %s" % ", ".join(bf16) if bf16
               else "which this one does not have either"))


def usable_cpus() -> Optional[int]:
    """The CPUs this process may run on (its affinity: a cpuset of Slurm, docker --cpuset-cpus
    or Kubernetes limits them), or None where the platform cannot tell (not Linux)."""
    try:
        return len(os.sched_getaffinity(0)) or None
    except (AttributeError, OSError):
        return None
