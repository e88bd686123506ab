"""Expected range: GPU name normalisation, reference matching, band verdicts."""

import pytest

from tfbench.measure import expected_range as er


@pytest.mark.parametrize("name, key", [
    ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
    ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("Tesla V100-SXM2-16GB", "V100 16GB SXM"),
    ("Tesla V100S-PCIE-32GB", "V100S 32GB PCIe"),
    ("NVIDIA H100 80GB HBM3", "H100 80GB SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("Tesla T4", "T4"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA RTX A6000", "RTX A6000"),
    ("NVIDIA GeForce RTX 3090", "RTX 3090"),
    ("A100 40GB SXM", "A100 40GB SXM"),
])
def test_normalize_gpu(name, key):
    assert str(er.normalize_gpu(name)) == key


@pytest.mark.parametrize("name", ["", None, "Intel(R) Xeon(R) CPU @ 2.20GHz", "AMD EPYC 7B13",
                                  "cpu"])
def test_cpus_and_unknown_names_are_not_gpus(name):
    assert er.normalize_gpu(name) is None


def test_partial_keys_match_unstated_parts():
    v100_32 = er.normalize_gpu("Tesla V100-SXM2-32GB")
    assert v100_32.matches(er.normalize_gpu("V100 32GB"))
    assert not v100_32.matches(er.normalize_gpu("V100 16GB SXM2"))
    assert not er.normalize_gpu("NVIDIA A100-PCIE-40GB").matches(
        er.normalize_gpu("A100 40GB SXM"))
    assert not er.normalize_gpu("NVIDIA A10G").matches(er.normalize_gpu("A10"))


def test_reference_table_ships_with_the_package():
    refs = er.load_references()
    assert len(refs) >= 40
    assert all(r.source and r.framework and r.images_per_sec > 0 for r in refs)
    a100 = [r for r in refs if r.gpu == "A100 40GB SXM" and r.num_gpus == 1
            and r.mode == "training"]
    assert sorted(r.images_per_sec for r in a100) == [909.0, 2375.0]


@pytest.mark.parametrize("measured, verdict", [(2400, "within"), (2100, "below"),
                                               (2700, "above"), (2137.5, "within")])
def test_verdicts_against_a_tolerance_band(measured, verdict):
    got, text = er.expected_range("NVIDIA A100-SXM4-40GB", "resnet50_v1.5", "training", "fp16",
                                  1, measured, batch_per_gpu=256)
    assert got == verdict
    # 2,375 published, +/-10%: 2,137.5 to 2,612.5.
    assert text.startswith("Expected range for resnet50_v1.5 training fp16, 1x A100 40GB SXM, "
                           "batch 256 per GPU: 2,138-2,612 images/sec, measured")
    assert "NVIDIA DeepLearningExamples TF1 ResNet-50 v1.5 README (20.06-tf1), TF1" in text
    assert "\n" not in text


def test_like_with_like_model_version_and_batch():
    """tfbench's resnet50 is v1 (Lambda's tf_cnn_benchmarks figures), NVIDIA's published
    TensorFlow figures are v1.5: each is judged against its own, at its own batch."""
    v100 = "Tesla V100-SXM2-32GB"
    verdict, text = er.expected_range(v100, "resnet50", "training", "fp32", 1, 430.0,
                                      batch_per_gpu=192)
    assert verdict == "within" and "Lambda" in text and "DeepLearningExamples" not in text
    verdict, text = er.expected_range(v100, "resnet50_v1.5", "training", "fp32", 1, 430.0,
                                      batch_per_gpu=128)
    assert verdict == "within" and "Lambda" not in text and "DeepLearningExamples" in text
    # Another batch, or the other version only: no verdict, and what is published instead.
    verdict, text = er.expected_range(v100, "resnet50", "training", "fp32", 1, 430.0,
                                      batch_per_gpu=64)
    assert verdict is None and text == (
        "Expected range: no published figure for resnet50 training fp32, 1x V100 32GB SXM, "
        "batch 64 per GPU (published: batch 192; resnet50_v1.5 at batch 128)")
    verdict, text = er.expected_range("NVIDIA A100-SXM4-40GB", "resnet50", "training", "fp16",
                                      1, 2400.0, batch_per_gpu=256)
    assert verdict is None and text.endswith("(published: resnet50_v1.5 at batch 256)")


def test_the_row_names_the_figures_its_verdict_used():
    j = er.judge("NVIDIA A100-SXM4-40GB", "resnet50_v1.5", "training", "fp16", 1, 2400.0,
                 batch_per_gpu=256)
    assert er.reference_used(j) == ("NVIDIA DeepLearningExamples TF1 ResNet-50 v1.5 README "
                                    "(20.06-tf1) (TF1): resnet50_v1.5 bs256 2,375 images/sec")
    assert er.batch_value("") is None and er.batch_value(float("nan")) is None
    assert er.batch_value("256") == 256


def test_other_frameworks_only_when_no_tensorflow_figure():
    verdict, text = er.expected_range("NVIDIA H100 80GB HBM3", "resnet50_v1.5", "training",
                                      "fp16", 1, 1500.0)
    assert verdict == "below"
    assert "PyTorch figures: sanity bound only" in text
    assert "2,354-3,070" in text  # 2,616 and 2,791, +/-10%


def test_multi_gpu_and_inference_rows():
    verdict, _ = er.expected_range("NVIDIA A100-SXM4-40GB", "resnet50_v1.5", "training", "fp16",
                                   8, 17000.0, batch_per_gpu=256)
    assert verdict == "within"
    verdict, text = er.expected_range("Tesla T4", "resnet50_v1.5", "forward_only", "fp16", 1,
                                      1000.0)   # no batch given: every published batch
    assert verdict == "within" and "996" in text and "1,194" in text


def test_unknown_gpu_and_no_matching_figure():
    assert er.expected_range("Intel(R) Xeon(R) CPU", "resnet50", "training", "fp32", 1,
                             50.0) == (None, "")
    assert er.expected_range("NVIDIA L4", "resnet50", "training", "fp32", 1, 50.0) == (None, "")
    verdict, text = er.expected_range("NVIDIA H100 80GB HBM3", "resnet50", "training", "bf16",
                                      1, 2000.0)
    assert verdict is None
    assert text == "Expected range: no published figure for resnet50 training bf16, " \
                   "1x H100 80GB SXM"
    verdict, text = er.expected_range("NVIDIA A100-SXM4-40GB", "resnet50_v1.5", "training",
                                      "fp32", 1, None)
    assert verdict is None and "818-1,000 images/sec" in text


def test_int8_tensorrt_rows_never_match_tensorflow_precisions():
    for precision in ("fp32", "fp16", "bf16"):
        verdict, text = er.expected_range("NVIDIA H100 80GB HBM3", "resnet50", "forward_only",
                                          precision, 1, 3000.0)
        assert verdict is None and "88,714" not in text


def test_model_and_precision_aliases():
    assert er.normalize_model("ResNet-50_v1") == er.normalize_model("ResNet50") == "resnet50"
    assert er.normalize_model("ResNet50v1.5") == "resnet50_v1.5" != er.normalize_model("resnet50")
    assert er.normalize_model("efficientnet_b0") == er.normalize_model("efficientnetb0")
    assert er.normalize_precision("") == er.normalize_precision("tf32") == "fp32"
    assert er.normalize_precision("mixed_float16") == "fp16"
    assert er.normalize_mode("inference") == "forward_only"


@pytest.mark.parametrize("name", ["NVIDIA A100-SXM4-40GB MIG 1g.5gb",
                                  "NVIDIA A100-SXM4-40GB MIG 7g.40gb",
                                  "NVIDIA H100 80GB HBM3 MIG 1g.10gb"])
def test_a_mig_slice_is_not_judged_against_whole_gpu_figures(name):
    verdict, text = er.expected_range(name, "resnet50", "training", "fp16", 1, 300.0)
    assert verdict is None
    assert text == ("Expected range: none for %s, a MIG slice (published figures are whole "
                    "GPUs)" % name)
    assert er.matching_references(name, "resnet50", "training", "fp16", 1) == []


@pytest.mark.parametrize("name, form", [("NVIDIA H100 NVL", "NVL"), ("NVIDIA H200 NVL", "NVL")])
def test_nvl_boards_are_not_judged_against_sxm_figures(name, form):
    assert str(er.normalize_gpu(name)).endswith(form)
    assert er.matching_references(name, "resnet50", "training", "fp16", 1) == []
