"""Health facts per GPU: NVML's readings (tfbench.measure.health_read) judged PASS, WARN or FAIL,
each with a stable reason code and the figure against its expectation.

judge(host, required_cuda=None, under_load=False, earlier=None) gives one Verdict per check and
GPU (gpu None: the host's driver), several where one check finds several faults, and the
overall status. A fact NVML does not report is SKIP (`not_reported`, with the call and why),
never a made-up value; a call that failed otherwise is WARN `nvml_error`. `required_cuda` is
the CUDA version the installed TensorFlow needs; `under_load` says the readings were taken
while the GPUs computed: only then are a lower PCIe generation and clocks below their maximum
faults, since an idle GPU lowers both to save power. `earlier` is an earlier reading of the
same host, against which an uncorrected ECC count that rose fails. REASONS lists every code;
docs/validate.md says what each means and what to do about it. The statuses, REASONS, Verdict
and Judgement live in tfbench.measure.health_verdicts and are importable from here.

What each clock event reason means is nvml.h's (nvmlClocksEventReasons): HW thermal slowdown
and HW power brake slowdown cut the clocks by half or more, for temperature and for the power
supply's brake signal: FAIL. HW slowdown alone may also be "reported during PState or clock
change": WARN, FAIL under load. SW thermal slowdown keeps the GPU under its maximum operating
temperature, board limit and reliability are undocumented beyond their names: WARN. Idle,
application clocks, the SW power cap (the driver keeping to the power limit), sync boost and
display clocks are settings or normal operation.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tfbench.measure import clock_events
from tfbench.measure.health_read import LIBCUDA_NOT_FOUND, NOT_SUPPORTED, GpuHealth, HostHealth
from tfbench.measure.health_verdicts import (FAIL, PASS, REASONS, SKIP, WARN, Judgement,
                                             Verdict)

__all__ = ["FAIL", "PASS", "REASONS", "SKIP", "WARN", "Judgement", "Verdict", "judge",
           "judge_gpu"]

NEAR_SLOWDOWN_C = 5     # °C under the slowdown threshold that counts as near it
CLOCK_STEP_MHZ = 15     # one step of an A100's or H100's supported SM clocks
_CLOCK_FAULTS = {"hw_thermal_slowdown": (FAIL, "thermal_throttle"),
                 "hw_power_brake_slowdown": (FAIL, "power_brake"),
                 "sw_thermal_slowdown": (WARN, "sw_thermal_slowdown"),
                 "board_limit": (WARN, "board_limit"), "reliability": (WARN, "reliability")}
_CLOCK_SETTINGS = {"applications_clocks_setting", "sw_power_cap", "sync_boost"}


def _unread(g: Any, check: str, reading: str, expectation: str) -> list[Verdict]:
    """SKIP where NVML does not report the fact, WARN where it failed to read it."""
    why = g.unread.get(reading, "not reported")
    failed = why != "not reported" and not why.endswith(NOT_SUPPORTED)
    return [Verdict(getattr(g, "gpu", None), check, WARN if failed else SKIP,
                    "nvml_error" if failed else "not_reported", why, expectation)]


def _ok(g: GpuHealth, check: str, figure: str, expectation: str) -> list[Verdict]:
    return [Verdict(g.gpu, check, PASS, "ok", figure, expectation)]


def _version(v: tuple[int, int]) -> str:
    return "%d.%d" % v


def _driver(host: HostHealth, required: Optional[tuple[int, int]]) -> list[Verdict]:
    want = ("CUDA %s or newer" % _version(required)) if required else "no CUDA version required"
    if host.cuda_driver_version is None:
        if host.unread.get("cuda", "").endswith(LIBCUDA_NOT_FOUND):
            return [Verdict(None, "driver", FAIL, "cuda_library_missing", host.unread["cuda"],
                            "CUDA's driver library beside NVML's")]
        return _unread(host, "driver", "cuda", want)
    figure = "CUDA %s (driver %s)" % (_version(host.cuda_driver_version),
                                       host.driver_version or "version not reported")
    if required and host.cuda_driver_version[0] < required[0]:
        return [Verdict(None, "driver", FAIL, "driver_cuda_too_old", figure, want)]
    if required and host.cuda_driver_version < tuple(required):
        # CUDA's minor-version compatibility runs a 12.5 build on a 12.x driver; XLA only
        # warns and compiles serially (nvptx_compiler.cc, ChooseLinkingMethod), and a GPU
        # the wheel has only PTX for may refuse PTX newer than its driver.
        return [Verdict(None, "driver", WARN, "driver_cuda_older_minor", figure, want)]
    return [Verdict(None, "driver", PASS, "ok", figure, want)]


def _persistence(g: GpuHealth) -> list[Verdict]:
    if g.persistence is None:
        return _unread(g, "persistence_mode", "persistence", "on")
    if not g.persistence:
        return [Verdict(g.gpu, "persistence_mode", WARN, "persistence_mode_off", "off", "on")]
    return _ok(g, "persistence_mode", "on", "on")


def _ecc_mode(g: GpuHealth) -> list[Verdict]:
    if g.ecc is None:
        return _unread(g, "ecc_mode", "ecc_mode", "on")
    if not g.ecc:
        figure = "off" + (", on after the next reboot" if g.ecc_pending else "")
        return [Verdict(g.gpu, "ecc_mode", WARN, "ecc_off", figure, "on")]
    if g.ecc_pending is False:
        return [Verdict(g.gpu, "ecc_mode", WARN, "ecc_mode_pending",
                        "on, off after the next reboot", "on")]
    return _ok(g, "ecc_mode", "on", "on")


def _ecc_figure(g: GpuHealth) -> str:
    def n(x: Optional[int]) -> str:
        return "?" if x is None else str(x)
    return "uncorrected %s volatile, %s aggregate; corrected %s volatile, %s aggregate" % (
        n(g.ecc_uncorrected_volatile), n(g.ecc_uncorrected_aggregate),
        n(g.ecc_corrected_volatile), n(g.ecc_corrected_aggregate))


def _rise(g: GpuHealth, before: Optional[GpuHealth]) -> Optional[str]:
    """'uncorrected aggregate 1 then 3' where an uncorrected count rose since `before`."""
    if before is None:
        return None
    for kind in ("aggregate", "volatile"):   # a driver reload resets the volatile count
        then = getattr(before, "ecc_uncorrected_" + kind)
        now = getattr(g, "ecc_uncorrected_" + kind)
        if then is not None and now is not None:
            return "uncorrected %s %d then %d" % (kind, then, now) if now > then else None
    return None


def _ecc_errors(g: GpuHealth, before: Optional[GpuHealth]) -> list[Verdict]:
    counts = (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate)
    if all(c is None for c in counts):
        return _unread(g, "ecc_errors", "ecc_errors", "no uncorrected errors")
    figure, want = _ecc_figure(g), "no uncorrected errors"
    rows = []
    rise = _rise(g, before)
    if rise:
        rows.append(Verdict(g.gpu, "ecc_errors", FAIL, "ecc_uncorrected_rising", rise,
                            "no new uncorrected errors between readings"))
    if g.ecc_uncorrected_volatile:
        rows.append(Verdict(g.gpu, "ecc_errors", FAIL, "ecc_uncorrected_volatile", figure, want))
    elif g.ecc_uncorrected_aggregate:
        rows.append(Verdict(g.gpu, "ecc_errors", WARN, "ecc_uncorrected_aggregate", figure,
                            "no uncorrected errors (none since the driver loaded)"))
    return rows or _ok(g, "ecc_errors", figure, want)


def _yes(flag: Optional[bool]) -> str:
    return "?" if flag is None else ("yes" if flag else "no")


def _retired_pages(g: GpuHealth) -> list[Verdict]:
    if g.retired_pages_pending is None and g.retired_double_bit is None:
        return _unread(g, "retired_pages", "retired_pages", "none pending")
    retired = (g.retired_double_bit or 0) + (g.retired_single_bit or 0)
    figure = "%s double-bit, %s single-bit; pending: %s" % (
        "?" if g.retired_double_bit is None else g.retired_double_bit,
        "?" if g.retired_single_bit is None else g.retired_single_bit,
        _yes(g.retired_pages_pending))
    if g.retired_pages_pending:
        return [Verdict(g.gpu, "retired_pages", FAIL, "retired_pages_pending", figure,
                        "none pending")]
    if retired:
        return [Verdict(g.gpu, "retired_pages", WARN, "retired_pages", figure,
                        "none retired (a GPU retires 64 pages at most)")]
    return _ok(g, "retired_pages", figure, "none pending")


def _row_remap(g: GpuHealth) -> list[Verdict]:
    want = "none pending, no failure"
    if g.remap_pending is None:
        return _unread(g, "row_remap", "remapped_rows", want)
    figure = "%d correctable, %d uncorrectable; pending: %s; failure: %s" % (
        g.remapped_correctable or 0, g.remapped_uncorrectable or 0,
        _yes(g.remap_pending), _yes(g.remap_failed))
    rows = []
    if g.remap_failed:
        rows.append(Verdict(g.gpu, "row_remap", FAIL, "row_remap_failed", figure, want))
    if g.remap_pending:
        rows.append(Verdict(g.gpu, "row_remap", FAIL, "row_remap_pending", figure, want))
    return rows or _ok(g, "row_remap", figure, want)


def _clock_events(g: GpuHealth, under_load: bool) -> list[Verdict]:
    want = "no thermal, power-brake or hardware slowdown"
    if g.clocks_event_mask is None:
        return _unread(g, "clock_events", "clock_events", want)
    names = clock_events.decode(g.clocks_event_mask)
    rows = []
    for name in names:
        if name in _CLOCK_FAULTS:
            status, code = _CLOCK_FAULTS[name]
        elif name == "hw_slowdown" and not {"hw_thermal_slowdown",
                                            "hw_power_brake_slowdown"} & set(names):
            status, code = (FAIL if under_load else WARN), "hw_slowdown"
        elif name.startswith("unknown_"):
            status, code = WARN, "unknown_clock_event"
        else:
            continue
        rows.append(Verdict(g.gpu, "clock_events", status, code, name, want))
    return rows or _ok(g, "clock_events", ", ".join(names) or "none", want)


def _clocks(g: GpuHealth, under_load: bool) -> list[Verdict]:
    pairs = [("SM", g.sm_clock_mhz, g.sm_clock_max_mhz),
             ("memory", g.mem_clock_mhz, g.mem_clock_max_mhz)]
    known = [(n, now, top) for n, now, top in pairs if now is not None and top is not None]
    if not known:
        return _unread(g, "clocks", "clocks", "at their maximum under load")
    figure = ", ".join("%s %d of %d MHz" % k for k in known)
    if not under_load:
        return _ok(g, "clocks", figure, "judged under load (an idle GPU lowers its clocks)")
    want = "within %d MHz of the maximum, or held by a clock setting or the power cap" % (
        CLOCK_STEP_MHZ)
    low = [n for n, now, top in known if now < top - CLOCK_STEP_MHZ]
    held = _CLOCK_SETTINGS & set(clock_events.decode(g.clocks_event_mask))
    if low and not held:
        return [Verdict(g.gpu, "clocks", WARN, "clocks_below_max", figure, want)]
    return _ok(g, "clocks", figure + (" (%s)" % ", ".join(sorted(held)) if low else ""), want)


def _pcie(g: GpuHealth, under_load: bool) -> list[Verdict]:
    link = g.link
    rows = []
    if link is None or link.pcie_width is None or link.pcie_width_max is None:
        rows += _unread(g, "pcie_width", "pcie", "the link's full width")
    elif link.pcie_width < link.pcie_width_max:
        rows.append(Verdict(g.gpu, "pcie_width", FAIL, "pcie_width_degraded", "x%d of x%d" % (
            link.pcie_width, link.pcie_width_max), "x%d" % link.pcie_width_max))
    else:
        rows += _ok(g, "pcie_width", "x%d of x%d" % (link.pcie_width, link.pcie_width_max),
                    "x%d" % link.pcie_width_max)
    if link is None or link.pcie_gen is None or link.pcie_gen_max is None:
        return rows + _unread(g, "pcie_gen", "pcie", "the link's generation")
    figure, want = "gen %d of %d" % (link.pcie_gen, link.pcie_gen_max), "gen %d" % (
        link.pcie_gen_max)
    below = link.pcie_gen < link.pcie_gen_max
    if below and under_load:
        rows.append(Verdict(g.gpu, "pcie_gen", FAIL, "pcie_gen_degraded", figure, want))
    if link.gpu_pcie_gen_max and link.pcie_gen_max < link.gpu_pcie_gen_max:
        rows.append(Verdict(g.gpu, "pcie_gen", WARN, "pcie_slot_gen_limited",
                            "slot gen %d, GPU gen %d" % (link.pcie_gen_max,
                                                         link.gpu_pcie_gen_max),
                            "a gen %d slot" % link.gpu_pcie_gen_max))
    if not any(r.check == "pcie_gen" for r in rows):
        if below:
            # Idle: the GPU's power management lowers the link's generation, which says
            # nothing about the link; its maximum (the slot's, the GPU's) is judged above.
            rows += _ok(g, "pcie_gen", figure + " (idle)", want + " under load (an idle GPU "
                        "lowers its link's generation to save power: shown, not judged)")
        else:
            rows += _ok(g, "pcie_gen", figure, want)
    return rows


def _links(numbers: list[int]) -> str:
    return ("link " if len(numbers) == 1 else "links ") + ", ".join(map(str, numbers))


def _nvlink(g: GpuHealth, peers: list[GpuHealth]) -> list[Verdict]:
    if g.nvlink_states is None:
        return [Verdict(g.gpu, "nvlink", SKIP, "no_nvlink", "no NVLink (NOT_SUPPORTED)",
                        "no NVLink")]
    if not g.nvlink_states:
        return [Verdict(g.gpu, "nvlink", SKIP, "not_reported",
                        "nvmlDeviceGetNvLinkState: refused link 0", "links up")]
    up = sum(g.nvlink_states)
    total = len(g.nvlink_states)
    best = max(peers, key=lambda p: sum(p.nvlink_states or ()), default=g)
    most = max(up, sum(best.nvlink_states or ()))
    if up < most:
        down = [i for i, s in enumerate(g.nvlink_states)
                if not s and i < len(best.nvlink_states or ()) and best.nvlink_states[i]]
        return [Verdict(g.gpu, "nvlink", FAIL, "nvlink_down", _links(down) if down else (
            "%d of %d links up" % (up, total)), "%d of %d links up, as on GPU %d" % (
                most, total, best.gpu))]
    if up == 0 and total:
        return [Verdict(g.gpu, "nvlink", WARN, "nvlink_none_up", "0 of %d links up" % total,
                        "links up (a PCIe card without NVLink bridges has none)")]
    figure = "%d of %d links up" % (up, total)
    return _ok(g, "nvlink", figure, "%d of %d links up, as on every GPU of this model" % (
        most, total))


def _temperature(g: GpuHealth) -> list[Verdict]:
    if g.temperature_c is None:
        return _unread(g, "temperature", "temperature", "below the slowdown threshold")
    if g.slowdown_c is None:
        row = _unread(g, "temperature", "thresholds", "below the slowdown threshold")[0]
        return [dataclasses.replace(row, figure="%d °C; slowdown threshold %s" % (
            g.temperature_c, row.figure))]
    figure = "%d °C, slowdown at %d °C" % (g.temperature_c, g.slowdown_c) + (
        "" if g.shutdown_c is None else ", shutdown at %d °C" % g.shutdown_c)
    want = "below %d °C (%d °C under the slowdown threshold)" % (
        g.slowdown_c - NEAR_SLOWDOWN_C, NEAR_SLOWDOWN_C)
    if g.temperature_c >= g.slowdown_c:
        return [Verdict(g.gpu, "temperature", FAIL, "temperature_at_slowdown", figure, want)]
    if g.temperature_c >= g.slowdown_c - NEAR_SLOWDOWN_C:
        return [Verdict(g.gpu, "temperature", WARN, "temperature_near_slowdown", figure, want)]
    return _ok(g, "temperature", figure, want)


def _power(g: GpuHealth) -> list[Verdict]:
    if g.power_limit_w is None:
        return _unread(g, "power", "power_limit", "the default power limit")
    draw = "" if g.power_w is None else "%.1f W of " % g.power_w
    figure = "%sa %.0f W limit" % (draw, g.power_limit_w)
    if g.default_power_limit_w is None:
        return _ok(g, "power", figure, "the default power limit (not reported)")
    want = "the default limit, %.0f W" % g.default_power_limit_w
    if g.power_limit_w < g.default_power_limit_w:
        return [Verdict(g.gpu, "power", WARN, "power_limit_lowered", figure, want)]
    return _ok(g, "power", figure, want)


def judge_gpu(g: GpuHealth, peers: list[GpuHealth], under_load: bool = False,
              before: Optional[GpuHealth] = None) -> list[Verdict]:
    """The verdicts of one GPU; `peers`: the host's other GPUs of its model."""
    if g.lost:
        return [Verdict(g.gpu, "gpu", FAIL, "gpu_lost", "NVML: GPU is lost",
                        "the GPU answers NVML")]
    return (_persistence(g) + _ecc_mode(g) + _ecc_errors(g, before) + _retired_pages(g)
            + _row_remap(g) + _clock_events(g, under_load) + _clocks(g, under_load)
            + _pcie(g, under_load) + _nvlink(g, peers) + _temperature(g) + _power(g))


def _same(a: GpuHealth, b: GpuHealth) -> bool:
    return a.uuid == b.uuid if a.uuid and b.uuid else a.gpu == b.gpu


def judge(host: HostHealth, required_cuda: Optional[tuple[int, int]] = None,
          under_load: bool = False, earlier: Optional[HostHealth] = None) -> Judgement:
    """Every verdict of a host's readings: the driver's row first, then each GPU's."""
    rows = _driver(host, required_cuda)
    for g in host.gpus:
        peers = [p for p in host.gpus if p is not g and p.name == g.name and not p.lost]
        before = next((b for b in (earlier.gpus if earlier else ()) if _same(b, g)), None)
        rows += judge_gpu(g, peers, under_load, before)
    return Judgement(tuple(rows))
