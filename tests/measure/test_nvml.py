"""NVML as tfbench reads it (tfbench/measure/nvml.py): which NVML device each GPU CUDA numbers
is (PCI bus order, UUIDs and their prefixes, MIG slices, CUDA_VISIBLE_DEVICES' end), and the GPU
count with why there is none, over tests/support/fake_pynvml."""

import pytest

from helpers import PCI, FakeNvml, NVMLError, a100, mig, on_bus
from tfbench.measure import nvml as nvml_mod


def uuids(handles):
    return [(i, h["uuid"]) for i, h in handles]


# NVML's index order (the list order) is not the PCI bus order here.
THREE = [on_bus("GPU-c3", 0x3b), on_bus("GPU-a1", 0x07), on_bus("GPU-b2", 0x1a)]


def test_indices_follow_the_pci_bus_order_cuda_uses():
    fake = FakeNvml(THREE)
    assert uuids(nvml_mod.resolve_handles(fake, None, PCI)) == [
        (0, "GPU-a1"), (1, "GPU-b2"), (2, "GPU-c3")]
    handles = nvml_mod.resolve_handles(fake, [0, 1], dict(PCI, CUDA_VISIBLE_DEVICES="2,0"))
    assert uuids(handles) == [(0, "GPU-c3"), (1, "GPU-a1")]
    assert uuids(nvml_mod.resolve_handles(fake, [1], PCI)) == [(1, "GPU-b2")]


@pytest.mark.parametrize("environ", [{}, {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
                                     {"CUDA_VISIBLE_DEVICES": "0"}])
def test_fastest_first_cannot_be_mapped_by_index(environ):
    with pytest.raises(nvml_mod.UnmappedGpu, match="CUDA numbers GPUs fastest first"):
        nvml_mod.resolve_handles(FakeNvml(THREE), [0], environ)
    # One GPU has one order; UUIDs need no order.
    assert uuids(nvml_mod.resolve_handles(FakeNvml([a100("GPU-x")]), [0], environ)) == [
        (0, "GPU-x")]
    handles = nvml_mod.resolve_handles(FakeNvml(THREE), None,
                                       dict(environ, CUDA_VISIBLE_DEVICES="GPU-b2,GPU-c3"))
    assert uuids(handles) == [(0, "GPU-b2"), (1, "GPU-c3")]


def test_uuids_and_unique_uuid_prefixes():
    fake = FakeNvml([a100("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"),
                     a100("GPU-8932aaaa-0000-0000-0000-000000000000")])
    env = {"CUDA_VISIBLE_DEVICES": "GPU-8932f937"}
    assert uuids(nvml_mod.resolve_handles(fake, None, env)) == [
        (0, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")]
    # A prefix that names several GPUs, or none, ends CUDA's list there: the GPU asked for is
    # not there, and the error says which entry ended the list.
    with pytest.raises(nvml_mod.UnmappedGpu,
                       match=r"GPU 0: CUDA sees 0 GPU.*entry 'GPU-8932': matches 2 devices"):
        nvml_mod.resolve_handles(fake, [0], {"CUDA_VISIBLE_DEVICES": "GPU-8932"})
    with pytest.raises(nvml_mod.UnmappedGpu, match="'GPU-ffff': matches no device NVML sees"):
        nvml_mod.resolve_handles(fake, [0], {"CUDA_VISIBLE_DEVICES": "GPU-ffff"})
    assert nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": "GPU-8932"}) == []


MIG_GPU = on_bus("GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f", 0x07, mig=[
    mig("MIG-11111111-2222-3333-4444-555555555555", 7, 0), None,
    mig("MIG-66666666-7777-8888-9999-000000000000", 8, 0)])


@pytest.mark.parametrize("entry, slice_uuid", [
    ("MIG-66666666-7777-8888-9999-000000000000", "MIG-66666666-7777-8888-9999-000000000000"),
    ("MIG-6666", "MIG-66666666-7777-8888-9999-000000000000"),
    ("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0",
     "MIG-11111111-2222-3333-4444-555555555555"),
])
def test_mig_ids_map_to_the_slice(entry, slice_uuid):
    fake = FakeNvml([on_bus("GPU-0", 0x01), MIG_GPU])
    handles = nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": entry})
    assert uuids(handles) == [(0, slice_uuid)]


def test_a_gpu_in_mig_mode_maps_to_its_only_slice_and_never_to_the_whole_gpu():
    one = on_bus("GPU-m", 0x07, mig=[None, mig("MIG-only", 3, 0)])
    assert uuids(nvml_mod.resolve_handles(FakeNvml([one]), None, {})) == [(0, "MIG-only")]
    with pytest.raises(nvml_mod.UnmappedGpu, match="GPU 1 is in MIG mode with 2 slices"):
        nvml_mod.resolve_handles(FakeNvml([on_bus("GPU-0", 0x01), MIG_GPU]), [1], PCI)
    with pytest.raises(nvml_mod.UnmappedGpu, match="no MIG slice with GPU instance 9"):
        nvml_mod.resolve_handles(FakeNvml([MIG_GPU]), [0], {
            "CUDA_VISIBLE_DEVICES": "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/9/0"})


def test_cuda_stops_at_the_first_entry_it_cannot_use():
    fake = FakeNvml(THREE)
    assert uuids(nvml_mod.resolve_handles(fake, None, dict(PCI, CUDA_VISIBLE_DEVICES="1,7,0"))) \
        == [(0, "GPU-b2")]
    assert nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert nvml_mod.resolve_handles(fake, None, {"CUDA_VISIBLE_DEVICES": ""}) == []
    with pytest.raises(nvml_mod.UnmappedGpu, match=r"GPU 1: CUDA sees 1 GPU\(s\)"):
        nvml_mod.resolve_handles(fake, [0, 1], dict(PCI, CUDA_VISIBLE_DEVICES="1,7,0"))
    with pytest.raises(nvml_mod.UnmappedGpu, match="GPU 5: CUDA sees 3 GPU"):
        nvml_mod.resolve_handles(fake, [5], PCI)


class _CountFails(FakeNvml):
    def nvmlDeviceGetCount(self):
        raise NVMLError(999)


@pytest.mark.parametrize("visible, nvml, count, why", [
    (None, FakeNvml(THREE), 3, ""),
    ("1,0", FakeNvml(THREE), 2, ""),
    ("", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='' hides every GPU"),
    ("-1", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='-1' hides every GPU"),
    ("GPU-typo", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='GPU-typo' leaves CUDA none of the "
                                     "GPUs NVML lists (its first entry matches none, or one "
                                     "repeats)"),
    ("1,1", FakeNvml(THREE), 0, "CUDA_VISIBLE_DEVICES='1,1' leaves CUDA none of the GPUs NVML "
                                "lists (its first entry matches none, or one repeats)"),
    (None, FakeNvml([]), 0, "NVML lists no GPU this process may open"),
    (None, FakeNvml(THREE, init_error=12), 0, "no NVIDIA driver: NVML library not found"),
    (None, FakeNvml(THREE, init_error=9), 0, "NVIDIA driver not loaded"),
    (None, _CountFails(THREE), 0, "NVML: Unknown Error"),
])
def test_the_gpu_count_and_why_none_are_one_for_scripts_and_the_evaluation(
        monkeypatch, capsys, visible, nvml, count, why):
    """cuda_gpus (the evaluation's mixed precision and TF-TRT checks) and `python -m
    tfbench.measure.nvml` (scripts/scaling_test.sh): the count on stdout, why none on stderr."""
    environ = dict(PCI) if visible is None else dict(PCI, CUDA_VISIBLE_DEVICES=visible)
    assert nvml_mod.cuda_gpus(environ, nvml) == (count, why)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml_mod.main(nvml) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("%d\n" % count, why + "\n" if why else "")
