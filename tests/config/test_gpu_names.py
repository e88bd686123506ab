"""GPU model names (NVML / CUDA strings and tfbench's table names) parsed into keys."""

import pytest

from tfbench.config import gpu_names


@pytest.mark.parametrize("name, key, form_token", [
    ("Tesla V100-SXM2-16GB", "V100 16GB SXM", "SXM2"),
    ("Tesla V100-SXM2-32GB", "V100 32GB SXM", "SXM2"),
    ("Tesla V100-PCIE-16GB", "V100 16GB PCIe", "PCIE"),
    ("Tesla V100-PCIE-32GB", "V100 32GB PCIe", "PCIE"),
    ("Tesla T4", "T4", None),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM", "SXM4"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", "SXM4"),
    ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe", "PCIE"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", "PCIE"),
    ("NVIDIA H100 80GB HBM3", "H100 80GB SXM", None),
    ("NVIDIA H100 PCIe", "H100 PCIe", "PCIE"),
    ("NVIDIA H100 NVL", "H100 NVL", "NVL"),
    ("NVIDIA H200", "H200", None),
    ("NVIDIA H200 NVL", "H200 NVL", "NVL"),
    ("NVIDIA L4", "L4", None),
    ("NVIDIA L40S", "L40S", None),
    ("NVIDIA A10G", "A10G", None),
    ("NVIDIA A10", "A10", None),
    ("NVIDIA RTX A6000", "RTX A6000", None),
])
def test_real_names(name, key, form_token):
    got = gpu_names.parse(name)
    assert str(got) == key and got.form_token == form_token and got.mig is None


@pytest.mark.parametrize("name, key, profile", [
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "A100 40GB SXM MIG 1g.5gb", "1g.5gb"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100 80GB SXM MIG 1g.10gb", "1g.10gb"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "H100 80GB SXM MIG 1g.10gb+me", "1g.10gb+me"),
    ("NVIDIA A100-PCIE-40GB MIG 3g.20gb", "A100 40GB PCIe MIG 3g.20gb", "3g.20gb"),
])
def test_mig_slices_keep_the_parent_model_and_the_profile(name, key, profile):
    got = gpu_names.parse(name)
    assert str(got) == key and got.mig == profile
    whole = gpu_names.parse(name.split(" MIG ")[0])
    assert not got.matches(whole) and not whole.matches(got)


@pytest.mark.parametrize("name", ["", None, "AMD EPYC 7B13", "Intel(R) Xeon(R) CPU @ 2.20GHz",
                                  "NVIDIA A100-SXM4-40GB + Tesla T4", "unknown GPU", "gpu"])
def test_cpus_mixed_sets_and_unknown_names(name):
    assert gpu_names.parse(name) is None


def test_a_generic_form_fits_every_board_of_that_form_a_specific_one_only_its_own():
    sxm, sxm2, pcie = (gpu_names.parse(n) for n in ("H100 SXM", "V100 SXM2", "V100 PCIe"))
    assert gpu_names.form_fits(sxm, gpu_names.parse("NVIDIA H100 80GB HBM3"))
    assert gpu_names.form_fits(sxm2, gpu_names.parse("Tesla V100-SXM2-32GB"))
    assert not gpu_names.form_fits(sxm2, gpu_names.parse("Tesla V100-SXM3-32GB"))
    assert gpu_names.form_fits(pcie, gpu_names.parse("Tesla V100-PCIE-32GB"))
    assert not gpu_names.form_fits(pcie, gpu_names.parse("Tesla V100-SXM2-16GB"))
    assert not gpu_names.form_fits(gpu_names.parse("H200"), gpu_names.parse("NVIDIA H200"))
