"""NVML's clock event reasons (tfbench/measure/clock_events.py): the bits are nvidia-ml-py's."""

import pytest

from tfbench.measure import clock_events


def test_the_clock_event_bits_are_nvidia_ml_py_s():
    pynvml = pytest.importorskip("pynvml")   # the installed nvidia-ml-py, not the fake

    def camel(name):
        return "".join(part.title() for part in name.split("_"))
    names = {"hw_power_brake_slowdown": "HwPowerBrakeSlowdown", "sw_power_cap": "SwPowerCap",
             "hw_slowdown": "HwSlowdown", "sw_thermal_slowdown": "SwThermalSlowdown",
             "hw_thermal_slowdown": "HwThermalSlowdown"}
    for bit, name in clock_events.REASONS:
        constant = names.get(name, camel(name))
        value = getattr(pynvml, "nvmlClocksEventReason" + constant,
                        getattr(pynvml, "nvmlClocksThrottleReason" + constant, None))
        assert value == bit, name
