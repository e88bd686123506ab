"""The health step (tfbench.validate.health_step): the recorded NVML readings
(tests/support/data/nvml_health.json through tests/support/fake_pynvml) read into the child's
JSON and judged into rows; no NVML is one SKIP row; a later reading keeps what changed and the
ECC errors judged against the first; the real child with the fake pynvml on its path."""

import json
import os
import subprocess
import sys

import pytest

from helpers import FAKE_PYNVML_DIR, ROOT, health_host
from tfbench.measure import health_read
from tfbench.validate import health_step, verdicts

PCI_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _report(name, cuda=(12, 4)):
    """What the child writes for the recorded host `name`, through JSON."""
    return _report_of(health_host(name), cuda)


def _report_of(nvml, cuda=(12, 4)):
    """What the child writes for the host `nvml` (a FakeNvml), through JSON."""
    host, why = health_read.gpu_health(None, nvml=nvml, environ=PCI_ORDER)
    report = {"readings": host.to_json(), "why": why,
              "tensorflow_cuda": list(cuda) if cuda else None, "tensorflow_cuda_why": ""}
    return json.loads(json.dumps(report))


def _statuses(rows):
    return {(r.subject, r.check): (r.status, r.reason) for r in rows}


def test_the_readings_come_back_from_json_as_they_were_read():
    for name in ("hgx_h100", "hgx_h100_gpu3_nvlink3_down", "v100_sxm2_gpu1_page_pending"):
        host, _ = health_read.gpu_health(None, nvml=health_host(name), environ=PCI_ORDER)
        assert health_read.host_from_json(json.loads(json.dumps(host.to_json()))) == host


def test_a_healthy_h100_host_passes_and_skips_what_hopper_does_not_report():
    rows, readings = health_step.judge(_report("hgx_h100"), "h1")
    assert len(readings.gpus) == 8
    statuses = _statuses(rows)
    assert statuses[("host", "driver")] == ("PASS", "ok")
    assert {s for s in statuses.values()} == {("PASS", "ok"), ("SKIP", "not_reported")}
    assert statuses[("GPU 0", "retired_pages")] == ("SKIP", "not_reported")
    assert all(r.host == "h1" for r in rows)


def test_faults_are_failed_rows_on_their_gpu():
    assert _statuses(health_step.judge(_report("hgx_h100_gpu5_pcie_x4"), "h")[0])[
        ("GPU 5", "pcie_width")] == ("FAIL", "pcie_width_degraded")
    assert _statuses(health_step.judge(_report("hgx_h100_gpu3_nvlink3_down"), "h")[0])[
        ("GPU 3", "nvlink")] == ("FAIL", "nvlink_down")
    # The driver's CUDA 12.4 against a TensorFlow built with CUDA 13.0: too old; with 12.5,
    # one minor version older, which CUDA's minor-version compatibility runs: a warning.
    (row,) = [r for r in health_step.judge(_report("hgx_h100", (13, 0)), "h")[0]
              if r.check == "driver"]
    assert (row.status, row.reason, row.figure, row.expectation) == (
        "FAIL", "driver_cuda_too_old", "CUDA 12.4 (driver 550.90.07)", "CUDA 13.0 or newer")
    (row,) = [r for r in health_step.judge(_report("hgx_h100", (12, 5)), "h")[0]
              if r.check == "driver"]
    assert (row.status, row.reason) == ("WARN", "driver_cuda_older_minor")


def test_a_healthy_host_whose_idle_links_dropped_to_gen_1_passes():
    # Every H100 idle at PCIe gen 1 of 5 (power management): exit 0, not 7
    idle = {str(i): {"pcie": [1, 16, 5, 16, 5]} for i in range(8)}
    rows, _ = health_step.judge(_report_of(health_host("hgx_h100", idle)), "h")
    assert verdicts.exit_code(rows) == 0
    assert _statuses(rows)[("GPU 3", "pcie_gen")] == ("PASS", "ok")
    # A link of fewer lanes than its slot, or a slot of an older generation than the GPU's,
    # is a fault idle or not
    narrow = dict(idle, **{"2": {"pcie": [1, 8, 5, 16, 5]}})
    rows, _ = health_step.judge(_report_of(health_host("hgx_h100", narrow)), "h")
    assert _statuses(rows)[("GPU 2", "pcie_width")] == ("FAIL", "pcie_width_degraded")
    assert verdicts.exit_code(rows) == 8
    old_slot = dict(idle, **{"6": {"pcie": [1, 16, 4, 16, 5]}})
    rows, _ = health_step.judge(_report_of(health_host("hgx_h100", old_slot)), "h")
    assert _statuses(rows)[("GPU 6", "pcie_gen")] == ("WARN", "pcie_slot_gen_limited")
    assert verdicts.exit_code(rows) == 7


def test_no_nvml_is_one_skip_row_with_why():
    rows, readings = health_step.judge({"readings": None, "why": "no NVIDIA driver: NVML "
                                        "library not found"}, "h")
    assert readings is None
    assert [(r.subject, r.check, r.status, r.reason, r.figure) for r in rows] == [
        ("host", "health", "SKIP", "not_reported",
         "no health facts: no NVIDIA driver: NVML library not found")]


def test_a_later_reading_keeps_the_ecc_rows_and_what_changed():
    first_rows, first = health_step.judge(_report("hgx_h100_gpu1_ecc_uncorrected"), "h")
    later_rows, _ = health_step.judge(_report("hgx_h100_gpu1_ecc_uncorrected_later"), "h",
                                      first)
    kept = health_step.changed(first_rows, later_rows, "health after")
    rising = [r for r in kept if r.subject == "GPU 1"]
    assert [(r.check, r.status, r.reason) for r in rising] == [
        ("ecc_errors (health after)", "FAIL", "ecc_uncorrected_rising"),
        ("ecc_errors (health after)", "FAIL", "ecc_uncorrected_volatile")]
    # Every GPU's ECC row is kept (it is what the re-read is for); nothing else changed.
    assert {r.check for r in kept} == {"ecc_errors (health after)"}
    assert len({r.subject for r in kept}) == 8


@pytest.mark.slow
def test_the_child_reads_the_recorded_host_without_tensorflow(tmp_path):
    nvml = health_host("hgx_h100_gpu5_pcie_x4")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE_PYNVML_DIR, ROOT]),
               FAKE_NVML_GPUS=json.dumps(nvml.gpus), FAKE_NVML_SYSTEM=json.dumps(nvml.system),
               CUDA_DEVICE_ORDER="PCI_BUS_ID")
    out = tmp_path / "health.json"
    # As `python -m tfbench.measure.health_read --json=FILE` runs it, then: no TensorFlow.
    code = ("import sys; from tfbench.measure import health_read; "
            "code = health_read.main(['--json=%s']); print(code, 'tensorflow' in sys.modules)"
            % out)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.split() == ["0", "False"], proc.stderr
    report = health_step.read_report(str(out))
    rows, readings = health_step.judge(report, "h")
    assert _statuses(rows)[("GPU 5", "pcie_width")] == ("FAIL", "pcie_width_degraded")
    assert len(readings.gpus) == 8 and report["tensorflow_cuda_why"] in (
        "", "TensorFlow is not a CUDA build")


def test_a_missing_or_broken_file_is_unreadable(tmp_path):
    with pytest.raises(health_step.Unreadable, match="wrote no readings"):
        health_step.read_report(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(health_step.Unreadable, match="not JSON"):
        health_step.read_report(str(tmp_path / "bad.json"))
