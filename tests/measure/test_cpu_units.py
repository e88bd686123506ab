"""fp16 on a CPU: the x86 units read from /proc/cpuinfo, and the one line a CPU
run in fp16 gets before it starts."""

import pytest

from tfbench.measure import cpu_units


EPYC_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ht avx avx2 fma f16c hypervisor"
SPR_FLAGS = EPYC_FLAGS + " avx512f avx512bw avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8"
ICX_FLAGS = EPYC_FLAGS + " avx512f avx512bw"


def _cpuinfo(flags):
    return ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t\t: %s\n"
            "\nprocessor\t: 1\nflags\t\t: %s\n" % (flags, flags))


def test_cpu_flags_are_the_first_cpus_x86_flags():
    assert cpu_units.cpu_flags(_cpuinfo(EPYC_FLAGS)) == frozenset(EPYC_FLAGS.split())
    # An Arm CPU lists "Features", another OS nothing: the flags cannot be told.
    assert cpu_units.cpu_flags("processor\t: 0\nFeatures\t: fp asimd bf16\n") is None
    assert cpu_units.cpu_flags("") is None


def test_fp16_on_a_cpu_without_fp16_units_is_said_to_run_in_software():
    no_units = cpu_units.cpu_fp16_notice(cpu_units.cpu_flags(_cpuinfo(EPYC_FLAGS)))
    assert no_units == (
        "fp16 on this CPU runs in software (no avx512_fp16 or amx_fp16 in /proc/cpuinfo), far "
        "slower than fp32: this is no fp16 result; --precision=bf16 uses a CPU's bf16 units "
        "(avx512_bf16, amx_bf16), which this one does not have either")
    assert cpu_units.cpu_fp16_notice(frozenset(ICX_FLAGS.split() + ["amx_bf16"])).endswith(
        "which this one has: amx_bf16")
    assert cpu_units.cpu_fp16_notice(frozenset(SPR_FLAGS.split())) is None   # fp16 units
    assert cpu_units.cpu_fp16_notice(None) == (
        "fp16 on a CPU runs in software unless the CPU has fp16 units (avx512_fp16 or "
        "amx_fp16), which could not be read here: this is no fp16 result; --precision=bf16 "
        "uses the CPU's bf16 units where it has them")


@pytest.mark.parametrize("flags, precision, notice", [
    ({"use_fp16": True}, "fp16", True),                            # the legacy GPU line
    ({"precision": "fp16", "device": "cpu"}, "fp16", True),
    ({"precision": "bf16"}, "bf16", False),
    ({}, "fp32", False),
])
def test_a_cpu_run_in_fp16_says_so_before_it_starts(monkeypatch, flags, precision, notice):
    """ResNet-50 at batch 4 took 14.9 s a step on a CPU in fp16: read as a precision result, the
    figure would mislead. The line is one of the run's notices (classic log, CSV, JSON)."""
    from tfbench.config.settings import make_settings
    from tfbench.engine.resolved import resolve
    monkeypatch.setattr(cpu_units, "cpu_flags", lambda: frozenset(EPYC_FLAGS.split()))
    plan = resolve(make_settings(dict(flags, model="trivial")))
    assert plan.device.kind == "cpu" and plan.precision == precision
    said = [n for n in plan.notices if n.startswith("fp16 on this CPU runs in software")]
    assert len(said) == (1 if notice else 0)
