"""Peak TFLOP/s table and MFU."""

import pytest

from helpers import run_inprocess
from tfbench import peak


def test_known_gpus_and_precisions():
    assert peak.gpu_peak_tflops("NVIDIA A100-SXM4-40GB", "bf16") == 312.0
    assert peak.gpu_peak_tflops("NVIDIA H100 PCIe", "fp16") == 756.0
    assert peak.gpu_peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == 494.7
    assert peak.gpu_peak_tflops("Tesla V100-SXM2-16GB", "bf16") is None  # no bf16 on Volta
    assert peak.gpu_peak_tflops("Some Future GPU", "fp32") is None


def test_mfu():
    assert peak.mfu_pct(31.2, 156.0, 2) == pytest.approx(10.0)
    assert peak.mfu_pct(None, 156.0, 1) is None and peak.mfu_pct(1.0, None, 1) is None


def test_cpu_run_reports_mfu_with_given_peak(tmp_path):
    code, lines = run_inprocess(["--device=cpu", "--model=lenet", "--image_size=28",
                                 "--batch_size=4", "--num_batches=2", "--num_warmup_batches=1",
                                 "--peak_tflops=2.0", "--csv_file=r.csv", "--json_dir="],
                                tmp_path)
    assert code == 0
    model_line = [l for l in lines if l.startswith("Model stats: ")][0]
    assert "MFU " in model_line and "of 2.0 TFLOP/s per device" in model_line
    import csv
    row = list(csv.DictReader(open(tmp_path / "r.csv")))[0]
    assert float(row["mfu_pct"]) == pytest.approx(float(row["tflops_per_sec"]) / 2.0 * 100,
                                                  rel=1e-3)
