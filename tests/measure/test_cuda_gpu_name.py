"""tfbench.measure.cuda_gpu_name: the name of the GPU CUDA numbers, never NVML's GPU of that
index, over the fake NVML of tests/support (helpers.on_bus)."""

from helpers import PCI, FakeNvml, mig, on_bus
from tfbench.measure import cuda_gpu_name


def test_the_name_is_of_the_gpu_cuda_numbers_not_nvml_s():
    # NVML lists a V100 first; CUDA, in bus order behind CUDA_VISIBLE_DEVICES, numbers others.
    gpus = [on_bus("GPU-v", 0x3b, name="Tesla V100-PCIE-16GB"),
            on_bus("GPU-h", 0x07, name="NVIDIA H100 80GB HBM3"),
            on_bus("GPU-m", 0x1a, mig=[None, mig("MIG-only", 3, 0)])]
    env = dict(PCI, CUDA_VISIBLE_DEVICES="1,0")     # bus order: GPU-h, GPU-m, GPU-v
    assert cuda_gpu_name.cuda_gpu_name(0, env, FakeNvml(gpus)) == "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    assert cuda_gpu_name.cuda_gpu_name(1, env, FakeNvml(gpus)) == "NVIDIA H100 80GB HBM3"
    assert cuda_gpu_name.cuda_gpu_name(0, PCI, FakeNvml(gpus)) == "NVIDIA H100 80GB HBM3"
    # Which GPU is CUDA's 0 is not known (fastest first), or there is none: no name.
    assert cuda_gpu_name.cuda_gpu_name(0, {}, FakeNvml(gpus)) is None
    assert cuda_gpu_name.cuda_gpu_name(2, env, FakeNvml(gpus)) is None
    assert cuda_gpu_name.cuda_gpu_name(0, {}, FakeNvml([], init_error=9)) is None
