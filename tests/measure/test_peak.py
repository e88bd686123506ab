"""Peak TFLOP/s (datasheet table and measured probe) and MFU."""

import pytest

from helpers import only_row, run_inprocess
from tfbench.cli import peak as peak_cli
from tfbench.measure import peak


def test_datasheet_table():
    # fp32 runs on TF32 tensor cores on Ampere and newer (TensorFlow's default).
    assert peak.gpu_peak_tflops("NVIDIA A100-SXM4-40GB", "fp32") == 156.0
    assert peak.gpu_peak_tflops("NVIDIA A100-SXM4-40GB", "bf16") == 312.0
    assert peak.gpu_peak_tflops("NVIDIA H100 PCIe", "fp16") == 756.0
    assert peak.gpu_peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == 494.7
    assert peak.gpu_peak_tflops("NVIDIA L40S", "bf16") == 362.0
    assert peak.gpu_peak_tflops("NVIDIA L4", "fp16") == 121.0
    assert peak.gpu_peak_tflops("Tesla T4", "fp32") == 8.1
    assert peak.gpu_peak_tflops("Tesla V100-SXM2-16GB", "bf16") is None  # no bf16 on Volta
    assert peak.gpu_peak_tflops("Some Future GPU", "fp32") is None
    assert "datasheet" in peak.gpu_peak("NVIDIA A10G", "fp16")[1]


# Real NVML / CUDA names (nvmlDeviceGetName, TensorFlow's device_name) of every table row, with
# the row's dense fp32-run (tf32 where there is one) and fp16 peaks.
REAL_NAMES = [
    ("Tesla V100-SXM2-16GB", 15.7, 125.0),
    ("Tesla V100-SXM2-32GB", 15.7, 125.0),
    ("Tesla V100-PCIE-16GB", 14.0, 112.0),
    ("Tesla V100-PCIE-32GB", 14.0, 112.0),
    ("Tesla V100S-PCIE-32GB", 16.4, 130.0),
    ("Tesla T4", 8.1, 65.0),
    ("NVIDIA A100-SXM4-40GB", 156.0, 312.0),
    ("NVIDIA A100-SXM4-80GB", 156.0, 312.0),
    ("NVIDIA A100-PCIE-40GB", 156.0, 312.0),
    ("NVIDIA A100 80GB PCIe", 156.0, 312.0),
    ("NVIDIA H100 80GB HBM3", 494.7, 989.4),
    ("NVIDIA H100 PCIe", 378.0, 756.0),
    ("NVIDIA H100 NVL", 417.5, 835.5),
    ("NVIDIA H200", 494.7, 989.4),
    ("NVIDIA H200 NVL", 417.5, 835.5),
    ("NVIDIA L4", 60.0, 121.0),
    ("NVIDIA L40S", 183.0, 362.0),
    ("NVIDIA A10G", 62.5, 125.0),
    ("NVIDIA A10", 62.5, 125.0),
    ("NVIDIA RTX A6000", 77.4, 154.8),
]


@pytest.mark.parametrize("name, fp32, fp16", REAL_NAMES, ids=[n for n, _, _ in REAL_NAMES])
def test_every_row_with_its_real_names(name, fp32, fp16):
    assert peak.gpu_peak_tflops(name, "fp32") == fp32
    assert peak.gpu_peak_tflops(name, "fp16") == fp16


def test_every_table_row_is_reached_by_a_real_name():
    rows = {peak.peak_row(name)["gpu"] for name, _, _ in REAL_NAMES}
    assert rows == {row["gpu"] for _, row in peak._table()}


@pytest.mark.parametrize("name", [
    "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me",
    "NVIDIA H200 MIG 7g.141gb",
])
def test_a_mig_slice_never_gets_the_full_gpus_peak(name):
    assert peak.gpu_peak(name, "fp16") is None and peak.gpu_peak(name, "fp32") is None


@pytest.mark.parametrize("name", [
    "Tesla V100-SXM3-32GB",     # DGX-2 board: higher clocks than the SXM2 row
    "Tesla V100-DGXS-32GB", "NVIDIA H100", "NVIDIA GH200 480GB", "NVIDIA L40",
    "NVIDIA A100-SXM4-40GB + Tesla T4", "AMD EPYC 7B13", "",
])
def test_names_without_a_row_get_no_peak(name):
    assert peak.gpu_peak(name, "fp16") is None


def test_mfu():
    assert peak.mfu_pct(31.2, 156.0, 2) == pytest.approx(10.0)
    assert peak.mfu_pct(None, 156.0, 1) is None and peak.mfu_pct(1.0, None, 1) is None


@pytest.mark.slow
def test_probe_caches_and_runs_use_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TFBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert peak_cli.main(["--device=cpu", "--precision=fp32", "--matmul_size=256",
                          "--conv_size=8", "--seconds=0.2"]) == 0
    out = capsys.readouterr().out
    assert "fp32  matmul " in out and "conv training step" in out
    from tfbench.distribute import devices
    name = devices.cpu_model_name()
    measured = peak.cached_peak(name, "fp32")
    assert measured and measured > 0
    code, lines = run_inprocess(["--device=cpu", "--model=lenet", "--image_size=28",
                                 "--batch_size=4", "--num_batches=2", "--num_warmup_batches=1",
                                 "--csv_file=r.csv", "--json_dir="], tmp_path)
    assert code == 0
    row = only_row(tmp_path / "r.csv")
    assert float(row["peak_tflops"]) == pytest.approx(measured, rel=1e-4)
    assert float(row["mfu_pct"]) == pytest.approx(
        100 * float(row["tflops_per_sec"]) / measured, rel=1e-3)


@pytest.mark.slow
def test_peak_flag_overrides(tmp_path):
    code, lines = run_inprocess(["--device=cpu", "--model=lenet", "--image_size=28",
                                 "--batch_size=4", "--num_batches=2", "--num_warmup_batches=1",
                                 "--peak_tflops=2.0", "--csv_file=", "--json_dir="], tmp_path)
    assert code == 0
    stats_line = [l for l in lines if l.startswith("Model stats: ")][0]
    assert "MFU " in stats_line and "of 2.0 TFLOP/s per device" in stats_line


def test_bad_precision():
    from tfbench.errors import UsageError
    with pytest.raises(UsageError, match="fp8"):
        peak_cli.main(["--precision=fp8"])
