"""The health rules (tfbench.measure.health) on recorded NVML readings (tests/support/data/
nvml_health.json, served by tests/support/fake_pynvml): each fault on its GPU gives its status, reason
code, figure and expectation, worked out by hand from the readings; every other fact passes,
and a fact NVML does not report is SKIP, never a pass or a fail."""

import os
import re

import pytest

from helpers import ROOT, FakeNvml, health_host
from tfbench.measure import health, health_read

PCI_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
CHECKS = ["persistence_mode", "ecc_mode", "ecc_errors", "retired_pages", "row_remap",
          "clock_events", "clocks", "pcie_width", "pcie_gen", "nvlink", "temperature", "power"]


def _host(name, changes=None, gpus=None):
    host, why = health_read.gpu_health(gpus, nvml=health_host(name, changes), environ=PCI_ORDER)
    assert why == ""
    return host


def _judge(name, changes=None, **kwargs):
    return health.judge(_host(name, changes), **kwargs)


def _faults(judgement):
    """(GPU, check, status, reason, figure, expectation) of every row but PASS and SKIP."""
    return [(r.gpu, r.check, r.status, r.reason, r.figure, r.expectation)
            for r in judgement.rows if r.status not in (health.PASS, health.SKIP)]


def _row(judgement, gpu, check):
    rows = [r for r in judgement.rows if r.gpu == gpu and r.check == check]
    assert len(rows) == 1, rows
    r = rows[0]
    return (r.status, r.reason, r.figure, r.expectation)


def test_a_healthy_h100_host_passes_every_check_nvml_reports():
    j = _judge("hgx_h100", required_cuda=(12, 3))
    assert j.status == "PASS" and _faults(j) == []
    assert [(r.gpu, r.check) for r in j.rows] == [(None, "driver")] + [
        (gpu, check) for gpu in range(8) for check in CHECKS]
    assert [r.to_json() for r in j.of(None)] == [{
        "gpu": None, "check": "driver", "status": "PASS", "reason": "ok",
        "figure": "CUDA 12.4 (driver 550.90.07)", "expectation": "CUDA 12.3 or newer"}]
    assert [(r.check, r.status, r.reason, r.figure, r.expectation) for r in j.of(0)] == [
        ("persistence_mode", "PASS", "ok", "on", "on"),
        ("ecc_mode", "PASS", "ok", "on", "on"),
        ("ecc_errors", "PASS", "ok",
         "uncorrected 0 volatile, 0 aggregate; corrected 0 volatile, 0 aggregate",
         "no uncorrected errors"),
        ("retired_pages", "SKIP", "not_reported",
         "nvmlDeviceGetRetiredPagesPendingStatus: not supported", "none pending"),
        ("row_remap", "PASS", "ok", "0 correctable, 0 uncorrectable; pending: no; failure: no",
         "none pending, no failure"),
        ("clock_events", "PASS", "ok", "gpu_idle",
         "no thermal, power-brake or hardware slowdown"),
        ("clocks", "PASS", "ok", "SM 345 of 1980 MHz, memory 2619 of 2619 MHz",
         "judged under load (an idle GPU lowers its clocks)"),
        ("pcie_width", "PASS", "ok", "x16 of x16", "x16"),
        ("pcie_gen", "PASS", "ok", "gen 5 of 5", "gen 5"),
        ("nvlink", "PASS", "ok", "18 of 18 links up",
         "18 of 18 links up, as on every GPU of this model"),
        ("temperature", "PASS", "ok", "33 °C, slowdown at 89 °C, shutdown at 92 °C",
         "below 84 °C (5 °C under the slowdown threshold)"),
        ("power", "PASS", "ok", "72.0 W of a 700 W limit", "the default limit, 700 W")]


def test_a_card_at_x4_fails_its_pcie_width():
    j = _judge("hgx_h100_gpu5_pcie_x4")
    assert j.status == "FAIL"
    assert _faults(j) == [(5, "pcie_width", "FAIL", "pcie_width_degraded", "x4 of x16", "x16")]
    assert [r.label for r in j.rows if r.status == "FAIL"] == ["pcie_width_degraded: x4 of x16"]


def test_a_thermally_throttled_gpu_fails_its_clock_events_and_temperature():
    j = _judge("hgx_h100_gpu2_thermal_slowdown")
    # 0x48: HW slowdown with HW thermal slowdown, its reason: one thermal_throttle row.
    assert _faults(j) == [
        (2, "clock_events", "FAIL", "thermal_throttle", "hw_thermal_slowdown",
         "no thermal, power-brake or hardware slowdown"),
        (2, "temperature", "FAIL", "temperature_at_slowdown",
         "90 °C, slowdown at 89 °C, shutdown at 92 °C",
         "below 84 °C (5 °C under the slowdown threshold)")]
    loaded = _judge("hgx_h100_gpu2_thermal_slowdown", under_load=True)
    assert _row(loaded, 2, "clocks") == (
        "WARN", "clocks_below_max", "SM 840 of 1980 MHz, memory 2619 of 2619 MHz",
        "within 15 MHz of the maximum, or held by a clock setting or the power cap")


def test_a_pending_row_remap_fails_until_the_gpu_is_reset():
    j = _judge("hgx_h100_gpu6_row_remap_pending")
    assert _faults(j) == [(6, "row_remap", "FAIL", "row_remap_pending",
                           "1 correctable, 0 uncorrectable; pending: yes; failure: no",
                           "none pending, no failure")]
    assert _row(j, 6, "ecc_errors")[:2] == ("PASS", "ok")   # corrected errors only


def test_a_failed_row_remap_fails():
    j = _judge("hgx_h100", {"3": {"remapped_rows": [0, 8, 0, 1]}})
    assert _faults(j) == [(3, "row_remap", "FAIL", "row_remap_failed",
                           "0 correctable, 8 uncorrectable; pending: no; failure: yes",
                           "none pending, no failure")]


def test_a_down_nvlink_link_is_named():
    j = _judge("hgx_h100_gpu3_nvlink3_down")
    assert _faults(j) == [(3, "nvlink", "FAIL", "nvlink_down", "link 3",
                           "18 of 18 links up, as on GPU 0")]
    assert [r.label for r in j.rows if r.status == "FAIL"] == ["nvlink_down: link 3"]


def test_links_down_on_every_gpu_alike_are_the_board_s():
    states = [1] * 8 + [0] * 10
    same = {str(i): {"nvlink": {"version": 6, "states": states}} for i in range(8)}
    j = _judge("hgx_h100", same)
    assert _faults(j) == []
    assert _row(j, 4, "nvlink") == ("PASS", "ok", "8 of 18 links up",
                                    "8 of 18 links up, as on every GPU of this model")
    none = {str(i): {"nvlink": {"version": 6, "states": [0] * 18}} for i in range(8)}
    assert _row(_judge("hgx_h100", none), 0, "nvlink") == (
        "WARN", "nvlink_none_up", "0 of 18 links up",
        "links up (a PCIe card without NVLink bridges has none)")
    refused = {"7": {"nvlink": {"version": 6, "states": []}}}   # link 0: INVALID_ARGUMENT
    assert _row(_judge("hgx_h100", refused), 7, "nvlink") == (
        "SKIP", "not_reported", "nvmlDeviceGetNvLinkState: refused link 0", "links up")
    one = {"7": {"nvlink": {"version": 6, "states": [0] * 18}}}
    assert _row(_judge("hgx_h100", one), 7, "nvlink") == (
        "FAIL", "nvlink_down", "links " + ", ".join(str(i) for i in range(18)),
        "18 of 18 links up, as on GPU 0")


def test_an_uncorrected_ecc_error_fails_and_a_later_rise_too():
    first = _host("hgx_h100_gpu1_ecc_uncorrected")
    j = health.judge(first)
    assert _faults(j) == [
        (1, "ecc_errors", "FAIL", "ecc_uncorrected_volatile",
         "uncorrected 1 volatile, 1 aggregate; corrected 0 volatile, 0 aggregate",
         "no uncorrected errors"),
        (1, "row_remap", "FAIL", "row_remap_pending",
         "0 correctable, 1 uncorrectable; pending: yes; failure: no",
         "none pending, no failure")]
    later = health.judge(_host("hgx_h100_gpu1_ecc_uncorrected_later"), earlier=first)
    assert [f[:5] for f in _faults(later) if f[1] == "ecc_errors"] == [
        (1, "ecc_errors", "FAIL", "ecc_uncorrected_rising", "uncorrected aggregate 1 then 3"),
        (1, "ecc_errors", "FAIL", "ecc_uncorrected_volatile",
         "uncorrected 3 volatile, 3 aggregate; corrected 0 volatile, 0 aggregate")]
    again = health.judge(first, earlier=first)
    assert "ecc_uncorrected_rising" not in [r.reason for r in again.rows]


def test_uncorrected_errors_before_the_driver_loaded_warn():
    j = _judge("hgx_h100", {"0": {"ecc_errors": {"volatile": [0, 0], "aggregate": [2, 2]}}})
    assert j.status == "WARN"
    assert _faults(j) == [(0, "ecc_errors", "WARN", "ecc_uncorrected_aggregate",
                           "uncorrected 0 volatile, 2 aggregate; corrected 0 volatile, "
                           "2 aggregate",
                           "no uncorrected errors (none since the driver loaded)")]


def test_a_page_waiting_for_retirement_fails_and_a_v100_has_no_row_remapping():
    j = _judge("v100_sxm2_gpu1_page_pending")
    assert _row(j, 1, "retired_pages") == ("FAIL", "retired_pages_pending",
                                           "1 double-bit, 0 single-bit; pending: yes",
                                           "none pending")
    assert _row(j, 0, "retired_pages") == ("PASS", "ok", "0 double-bit, 0 single-bit; "
                                           "pending: no", "none pending")
    assert _row(j, 1, "row_remap") == ("SKIP", "not_reported",
                                       "nvmlDeviceGetRemappedRows: not supported",
                                       "none pending, no failure")
    retired = _judge("v100_sxm2", {"0": {"retired_pages": {"single_bit": 2, "double_bit": 1,
                                                           "pending": 0}}})
    assert _faults(retired) == [(0, "retired_pages", "WARN", "retired_pages",
                                 "1 double-bit, 2 single-bit; pending: no",
                                 "none retired (a GPU retires 64 pages at most)")]


def test_the_driver_s_cuda_against_what_tensorflow_needs():
    # CUDA 12.4's driver under a TensorFlow built with 12.5 (the 2.21.0 wheel's build_info):
    # minor-version compatibility runs it, XLA warns: WARN, not FAIL.
    assert _row(_judge("hgx_h100", required_cuda=(12, 5)), None, "driver") == (
        "WARN", "driver_cuda_older_minor", "CUDA 12.4 (driver 550.90.07)",
        "CUDA 12.5 or newer")
    assert _row(_judge("hgx_h100", required_cuda=(12, 4)), None, "driver")[:2] == ("PASS", "ok")
    assert _row(_judge("hgx_h100"), None, "driver") == (
        "PASS", "ok", "CUDA 12.4 (driver 550.90.07)", "no CUDA version required")
    newer = _host("hgx_h100", gpus=[0])
    newer = health_read.HostHealth("580.65.06", (12, 10), newer.gpus)
    assert health.judge(newer, required_cuda=(12, 9)).of(None)[0].status == "PASS"
    assert health.judge(newer, required_cuda=(13, 0)).of(None)[0].reason == "driver_cuda_too_old"


def test_nvml_without_cuda_s_library_fails_the_driver():
    nvml = health_host("hgx_h100")
    nvml.system = dict(nvml.system, errors={"nvmlSystemGetCudaDriverVersion_v2": 12})
    host, _ = health_read.gpu_health([0], nvml=nvml, environ=PCI_ORDER)
    assert _row(health.judge(host, required_cuda=(12, 3)), None, "driver") == (
        "FAIL", "cuda_library_missing",
        "nvmlSystemGetCudaDriverVersion_v2: libcuda.so.1 not found",
        "CUDA's driver library beside NVML's")


def test_facts_nvml_does_not_report_are_skipped_not_judged():
    host, _ = health_read.gpu_health(nvml=FakeNvml([{"uuid": "GPU-a", "name": "NVIDIA X"}]),
                                     environ=PCI_ORDER)
    j = health.judge(host, required_cuda=(12, 3))
    assert j.status == "PASS" and {r.status for r in j.rows} == {"SKIP"}
    assert [(r.check, r.reason, r.figure) for r in j.rows] == [
        ("driver", "not_reported", "nvmlSystemGetCudaDriverVersion_v2: not supported"),
        ("persistence_mode", "not_reported", "nvmlDeviceGetPersistenceMode: not supported"),
        ("ecc_mode", "not_reported", "nvmlDeviceGetEccMode: not supported"),
        ("ecc_errors", "not_reported", "nvmlDeviceGetTotalEccErrors: not supported"),
        ("retired_pages", "not_reported",
         "nvmlDeviceGetRetiredPagesPendingStatus: not supported"),
        ("row_remap", "not_reported", "nvmlDeviceGetRemappedRows: not supported"),
        ("clock_events", "not_reported",
         "nvmlDeviceGetCurrentClocksThrottleReasons: not supported"),
        ("clocks", "not_reported", "nvmlDeviceGetClockInfo: not supported"),
        ("pcie_width", "not_reported", "not reported"),
        ("pcie_gen", "not_reported", "not reported"),
        ("nvlink", "no_nvlink", "no NVLink (NOT_SUPPORTED)"),
        ("temperature", "not_reported", "nvmlDeviceGetTemperature: not supported"),
        ("power", "not_reported", "nvmlDeviceGetEnforcedPowerLimit: not supported")]
    slowdown = _judge("hgx_h100", {"0": {"thresholds": {"shutdown": 92}}})
    assert _row(slowdown, 0, "temperature") == (
        "SKIP", "not_reported",
        "33 °C; slowdown threshold nvmlDeviceGetTemperatureThreshold: not supported",
        "below the slowdown threshold")


def test_a_failed_call_warns_and_a_lost_gpu_fails_alone():
    j = _judge("hgx_h100", {"2": {"errors": {"nvmlDeviceGetPersistenceMode": 4}},
                            "4": {"lost": True}})
    assert _faults(j) == [
        (2, "persistence_mode", "WARN", "nvml_error",
         "nvmlDeviceGetPersistenceMode: NVML: Insufficient Permissions", "on"),
        (4, "gpu", "FAIL", "gpu_lost", "NVML: GPU is lost", "the GPU answers NVML")]
    assert [r.check for r in j.of(4)] == ["gpu"]


def test_settings_that_cost_speed_warn():
    j = _judge("hgx_h100", {"0": {"persistence": 0}, "1": {"ecc": [0, 0]},
                            "2": {"ecc": [0, 1]}, "3": {"ecc": [1, 0]},
                            "5": {"power_mw": [72020, 500000, 700000]}})
    assert _faults(j) == [
        (0, "persistence_mode", "WARN", "persistence_mode_off", "off", "on"),
        (1, "ecc_mode", "WARN", "ecc_off", "off", "on"),
        (2, "ecc_mode", "WARN", "ecc_off", "off, on after the next reboot", "on"),
        (3, "ecc_mode", "WARN", "ecc_mode_pending", "on, off after the next reboot", "on"),
        (5, "power", "WARN", "power_limit_lowered", "72.0 W of a 500 W limit",
         "the default limit, 700 W")]


@pytest.mark.parametrize("mask, idle, loaded", [
    (0x1, ("PASS", "ok", "gpu_idle"), ("PASS", "ok", "gpu_idle")),
    (0x4, ("PASS", "ok", "sw_power_cap"), ("PASS", "ok", "sw_power_cap")),
    (0x2 | 0x10 | 0x100, ("PASS", "ok", "applications_clocks_setting, sync_boost, "
                          "display_clock_setting"),
     ("PASS", "ok", "applications_clocks_setting, sync_boost, display_clock_setting")),
    (0x8, ("WARN", "hw_slowdown", "hw_slowdown"), ("FAIL", "hw_slowdown", "hw_slowdown")),
    (0x8 | 0x80, ("FAIL", "power_brake", "hw_power_brake_slowdown"),
     ("FAIL", "power_brake", "hw_power_brake_slowdown")),
    (0x40, ("FAIL", "thermal_throttle", "hw_thermal_slowdown"),
     ("FAIL", "thermal_throttle", "hw_thermal_slowdown")),
    (0x20, ("WARN", "sw_thermal_slowdown", "sw_thermal_slowdown"),
     ("WARN", "sw_thermal_slowdown", "sw_thermal_slowdown")),
    (0x200, ("WARN", "board_limit", "board_limit"), ("WARN", "board_limit", "board_limit")),
    (0x400, ("WARN", "reliability", "reliability"), ("WARN", "reliability", "reliability")),
    (0x800, ("WARN", "unknown_clock_event", "unknown_0x800"),
     ("WARN", "unknown_clock_event", "unknown_0x800")),
])
def test_each_clock_event_reason(mask, idle, loaded):
    change = {"0": {"clocks_event_reasons": mask}}
    assert _row(_judge("hgx_h100", change), 0, "clock_events")[:3] == idle
    assert _row(_judge("hgx_h100", change, under_load=True), 0, "clock_events")[:3] == loaded


def test_two_faults_of_one_check_are_two_rows():
    j = _judge("hgx_h100", {"0": {"clocks_event_reasons": 0x20 | 0x40}})
    assert [(r.status, r.reason) for r in j.rows if r.gpu == 0 and r.check == "clock_events"] \
        == [("WARN", "sw_thermal_slowdown"), ("FAIL", "thermal_throttle")]


def test_clocks_are_judged_under_load_only():
    at_max = {"0": {"clocks": {"sm": [1980, 1980], "mem": [2619, 2619]},
                    "clocks_event_reasons": 0}}
    assert _row(_judge("hgx_h100", at_max, under_load=True), 0, "clocks")[:3] == (
        "PASS", "ok", "SM 1980 of 1980 MHz, memory 2619 of 2619 MHz")
    one_step = {"0": {"clocks": {"sm": [1965, 1980], "mem": [2619, 2619]},
                      "clocks_event_reasons": 0}}
    assert _row(_judge("hgx_h100", one_step, under_load=True), 0, "clocks")[0] == "PASS"
    capped = {"0": {"clocks": {"sm": [1755, 1980], "mem": [2619, 2619]},
                    "clocks_event_reasons": 0x4}}
    assert _row(_judge("hgx_h100", capped, under_load=True), 0, "clocks")[:3] == (
        "PASS", "ok", "SM 1755 of 1980 MHz, memory 2619 of 2619 MHz (sw_power_cap)")
    slow = {"0": {"clocks": {"sm": [1755, 1980], "mem": [1593, 2619]},
                  "clocks_event_reasons": 0}}
    assert _row(_judge("hgx_h100", slow, under_load=True), 0, "clocks")[:3] == (
        "WARN", "clocks_below_max", "SM 1755 of 1980 MHz, memory 1593 of 2619 MHz")
    assert _row(_judge("hgx_h100", slow), 0, "clocks")[:2] == ("PASS", "ok")


def test_a_lower_pcie_generation_is_shown_idle_and_fails_under_load():
    # Idle, a GPU lowers its link's generation to save power: normal, shown and not judged
    low = {"0": {"pcie": [1, 16, 5, 16, 5]}}
    assert _row(_judge("hgx_h100", low), 0, "pcie_gen") == (
        "PASS", "ok", "gen 1 of 5 (idle)",
        "gen 5 under load (an idle GPU lowers its link's generation to save power: shown, not "
        "judged)")
    assert _row(_judge("hgx_h100", low, under_load=True), 0, "pcie_gen") == (
        "FAIL", "pcie_gen_degraded", "gen 1 of 5", "gen 5")
    # A slot of an older generation than the GPU's is the link's maximum: judged idle too
    for current in (4, 1):
        slot = {"0": {"pcie": [current, 16, 4, 16, 5]}}
        rows = [r for r in _judge("hgx_h100", slot).rows if r.gpu == 0 and r.check == "pcie_gen"]
        assert [(r.status, r.reason, r.figure, r.expectation) for r in rows] == [
            ("WARN", "pcie_slot_gen_limited", "slot gen 4, GPU gen 5", "a gen 5 slot")]


@pytest.mark.parametrize("temperature, status, reason", [
    (83, "PASS", "ok"), (84, "WARN", "temperature_near_slowdown"),
    (88, "WARN", "temperature_near_slowdown"), (89, "FAIL", "temperature_at_slowdown")])
def test_temperature_against_the_slowdown_threshold(temperature, status, reason):
    row = _row(_judge("hgx_h100", {"0": {"temperature": temperature}}), 0, "temperature")
    assert row == (status, reason, "%d °C, slowdown at 89 °C, shutdown at 92 °C" % temperature,
                   "below 84 °C (5 °C under the slowdown threshold)")


def test_overall_status_is_the_worst_row():
    rows = lambda *statuses: health.Judgement(tuple(  # noqa: E731
        health.Verdict(0, "x", s, "ok", "", "") for s in statuses))
    assert rows().status == "PASS" and rows("SKIP").status == "PASS"
    assert rows("PASS", "WARN", "SKIP").status == "WARN"
    assert rows("WARN", "FAIL", "PASS").status == "FAIL"


def test_every_reason_code_is_snake_case_and_documented():
    with open(os.path.join(ROOT, "docs", "validate.md")) as handle:
        doc = handle.read()
    for code in health.REASONS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", code), code
        assert "`%s`" % code in doc, "docs/validate.md does not name %s" % code
