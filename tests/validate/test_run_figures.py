"""The figures of a run a validation judges, from its results row and JSON manifest, the
configuration they belong to, and validate.json's "figures" list."""

import pytest

from tfbench.output import csv_out
from tfbench.validate import run_figures as rf
from tfbench.validate.run_figures import RunKey
from run_results import H100, RUN, h100_result as result



def test_a_csv_row_gives_efficiency_from_its_one_device_step():
    # 8 x 64 images at 1600 images/sec: a step of 320 ms; one device alone 288 ms: 90%.
    row = csv_out.row_for(result(1600.0, extra={"one_device_step_ms": 288.0,
                                                "allreduce_busbw_gbs": 150.0}))
    assert rf.run_figures(row) == {"images_per_sec": [1600.0],
                                   "efficiency_pct": [pytest.approx(90.0)],
                                   "allreduce_busbw_gbs": [150.0]}


def test_what_is_not_known_yet_matches():
    a = RunKey("resnet50", "fp16", None, "", None)
    assert rf.same_configuration(a, RUN)
    # Spellings agree; the device count is not part of the configuration.
    assert rf.same_configuration(RunKey("ResNet-50", "mixed_float16", 64, "H100 SXM", 2), RUN)
    assert not rf.same_configuration(RunKey("resnet50_v1.5", "fp16", 64, H100, 8), RUN)
    assert a.text() == "resnet50 fp16 the model's default batch on an unknown device"


def test_cpu_devices_match_by_name():
    cpu = RunKey("trivial", "fp32", 8, "AMD EPYC", 2)
    assert rf.same_configuration(cpu, RunKey("trivial", "fp32", 8, "amd epyc ", 2))
    assert not rf.same_configuration(cpu, RunKey("trivial", "fp32", 8, "Intel Xeon", 2))
    assert not rf.same_configuration(cpu, RunKey("trivial", "fp32", 8, H100, 2))


def test_figures_json_is_the_documented_shape():
    assert rf.figures_json({"images_per_sec": [1.0, 2.0], "median_alone_ms": [],
                            "efficiency_pct": [90]}, RUN) == [
        {"figure": "images_per_sec", "values": [1.0, 2.0], "unit": "images/sec",
         "model": "resnet50", "precision": "fp16", "batch_size": 64, "num_devices": 8,
         "gpu": H100},
        {"figure": "efficiency_pct", "values": [90.0], "unit": "%", "model": "resnet50",
         "precision": "fp16", "batch_size": 64, "num_devices": 8, "gpu": H100}]


def test_measured_figures_joins_the_runs():
    rows = [(csv_out.row_for(result(v)), None) for v in (1500.0, 1510.0)]
    rows.append((csv_out.row_for(result(1520.0)), {"extra": {
        "images_per_sec_runs": [1519.0, 1521.0],
        "device_checks": [{"alone_ms": 10.0}, {"alone_ms": None}, {"alone_ms": 12.0}]}}))
    assert rf.measured_figures(rows) == {"images_per_sec": [1500.0, 1510.0, 1519.0, 1521.0],
                                         "median_alone_ms": [11.0]}


def test_a_row_s_configuration_counts_every_worker_s_devices():
    r = result(3200.0, devices=8, num_workers=2)
    assert rf.run_key(csv_out.row_for(r)) == RunKey("resnet50", "fp16", 64, H100, 16)


def test_figures_not_measured_are_absent():
    assert rf.run_figures({"images_per_sec": "", "allreduce_busbw_gbs": "nan"}) == {}
    assert rf.number("nan") is None and rf.number(True) is None and rf.count("0") is None
