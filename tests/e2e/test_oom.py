"""Out of memory: one message naming model, batch size and precision; status=oom; exit 3."""

import pytest
import tensorflow as tf

from helpers import only_row, run_inprocess
from tfbench import errors
from tfbench.engine import steps


@pytest.mark.slow
def test_oom_is_reported_with_remedies(tmp_path, monkeypatch):
    def failing_step(self, from_iterator=False):
        def step(inputs):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
        return step
    monkeypatch.setattr(steps.Steps, "train_step", failing_step)
    code, lines = run_inprocess(["--device=cpu", "--model=trivial", "--image_size=16",
                                 "--batch_size=512", "--num_batches=2", "--precision=bf16",
                                 "--csv_file=r.csv", "--json_dir="], tmp_path)
    assert code == 3
    row = only_row(tmp_path / "r.csv")
    assert row["status"] == "oom"
    message = row["error"]
    assert "trivial" in message and "batch size 512" in message and "bf16" in message
    assert "--accum_steps" in message and "--batch_size" in message


@pytest.mark.slow
def test_oom_advice_on_a_cpu_never_suggests_fp16(tmp_path, monkeypatch):
    """fp16 on a CPU runs in software: the advice there is a smaller batch or image, and bf16
    only where this CPU has bf16 units."""
    from tfbench.measure import cpu_units

    def failing_step(self, from_iterator=False):
        def step(inputs):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
        return step
    monkeypatch.setattr(steps.Steps, "train_step", failing_step)
    code, _ = run_inprocess(["--device=cpu", "--model=trivial", "--image_size=16",
                             "--batch_size=512", "--num_batches=2", "--csv_file=r.csv",
                             "--json_dir="], tmp_path)
    assert code == 3
    message = only_row(tmp_path / "r.csv")["error"]
    advice = message.split(" in fp32: ", 1)[1].split(" [", 1)[0]
    units = sorted(set((cpu_units.cpu_flags() or ())) & {"avx512_bf16", "amx_bf16"})
    assert advice.startswith("reduce --batch_size (--accum_steps keeps the effective batch) "
                             "or --image_size")
    assert "fp16" not in advice
    assert ("--precision=bf16 (this CPU has %s)" % ", ".join(units) in advice) == bool(units)


# Failures as TensorFlow 2.17-2.21 report them on a GPU near its memory limit, composed from the
# format strings of the sources named (TensorFlow, XLA's stream_executor, cuDNN 9's and cuBLAS 12's
# own status texts); tfbench never sees them on CPU.
NEAR_THE_LIMIT = [
    # bfc_allocator via OpKernelContext::allocate_output
    ("ResourceExhaustedError",
     "Graph execution error:\n\nDetected at node StatefulPartitionedCall defined at (most recent "
     "call last):\n  File \"tfbench/steps.py\", line 1, in step\n\nOOM when allocating tensor "
     "with shape[256,64,112,112] and type float on /job:localhost/replica:0/task:0/device:GPU:0 "
     "by allocator GPU_0_bfc\n\t [[{{node conv1/Conv2D}}]]\nHint: If you want to see a list of "
     "allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions "
     "for current allocation info."),
    # gpu_utils.cc BestCudnnConvAlgorithmIndices: every engine's autotuning failed, here
    # because RedzoneAllocator -> TfAllocatorAdapter could not allocate its workspace
    ("NotFoundError",
     "Graph execution error:\n\nNo algorithm worked!  Error messages:\n  Profiling failure on "
     "CUDNN engine eng34{k2=2,k13=0,k14=0,k18=0,k23=0}: RESOURCE_EXHAUSTED: Out of memory while "
     "trying to allocate 2147483648 bytes.\n  Profiling failure on CUDNN engine eng0{}: UNKNOWN: "
     "CUDNN_STATUS_NOT_SUPPORTED\nin external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc"
     "(5419): 'status'\n\t [[{{node conv1/Conv2D}}]] [Op:__inference_train_step_2318]"),
    # the same through DnnScratchAllocator (redzone checks off)
    ("NotFoundError",
     "No algorithm worked!  Error messages:\n  Profiling failure on CUDNN engine eng1{k2=1}: "
     "UNAVAILABLE: Failed to allocate the requested memory size (1677721600)."),
    # gpu_util.cc PrepareCopy: the destination buffer of a host-to-GPU copy was never allocated
    ("InternalError",
     "Failed copying input tensor from /job:localhost/replica:0/task:0/device:CPU:0 to "
     "/job:localhost/replica:0/task:0/device:GPU:0 in order to run _EagerConst: Dst tensor is "
     "not initialized."),
    # conv_ops_impl.h AllocateScratchOrFallback
    ("UnknownError",
     "CUDNN failed to allocate the scratch space for the runner or to find a working "
     "no-scratch runner.\n\t [[{{node conv1/Conv2D}}]] [Op:__inference_train_step_2318]"),
    # cuda_dnn.cc RETURN_IF_CUDNN_ERROR with TensorFlow's CudnnStatusToString: cuDNN 9's
    # deprecated ALLOC_FAILED (host allocation) and a code missing from the table (device)
    ("UnknownError",
     "CUDNN_STATUS_ALLOC_FAILED\nin external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc"
     "(2271): 'cudnnRNNForward(cudnn.handle(), rnn_desc.handle(), ...)'"),
    ("UnknownError",
     "<unknown cudnn status: 4004>\nin external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc"
     "(5930): 'cudnnBackendExecute(cudnn.handle(), plan.get_raw_desc(), ...)'"),
    # cudnn_frontend with cudnnGetErrorString (cuDNN 9)
    ("InternalError", "Cudnn graph failed to build: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION"
                      "_FAILED"),
    # cuda_blas_utils.cc ToStatus: cublasGetStatusString(CUBLAS_STATUS_ALLOC_FAILED)
    ("InternalError",
     "cublasLtMatmul(blas_lt->blas_lt_.get(), op_desc_.get(), alpha, a.opaque(), ...): the "
     "resource allocation failed"),
    ("InternalError", "failed to create cublas handle: CUBLAS_STATUS_ALLOC_FAILED"),
    ("MemoryError", "Unable to allocate 3.00 GiB for an array with shape (512, 3, 512, 1024)"),
]

NOT_MEMORY = [
    # every engine refused the configuration: no allocation failed
    ("NotFoundError",
     "No algorithm worked!  Error messages:\n  Profiling failure on CUDNN engine eng0{}: "
     "UNKNOWN: CUDNN_STATUS_NOT_SUPPORTED\nin external/local_xla/xla/stream_executor/cuda/"
     "cuda_dnn.cc(5419): 'status'"),
    ("NotFoundError", "No algorithm worked!  Error messages:"),
    # a workspace above TF_CUDNN_WORKSPACE_LIMIT_IN_MB is a setting, not the device running out
    ("NotFoundError",
     "No algorithm worked!  Error messages:\n  Profiling failure on CUDNN engine eng3{}: "
     "RESOURCE_EXHAUSTED: Allocating 8589934592 bytes exceeds the memory limit of 4294967296 "
     "bytes."),
    ("UnknownError", "CUDNN_STATUS_INTERNAL_ERROR\nin external/local_xla/xla/stream_executor/"
                     "cuda/cuda_dnn.cc(2271): 'cudnnCreate(&cudnn_handle)'"),
    ("UnknownError", "CUDNN_STATUS_EXECUTION_FAILED\nin external/local_xla/xla/stream_executor/"
                     "cuda/cuda_dnn.cc(5419): 'status'"),
    ("InternalError", "Blas xGEMMBatched launch failed : a.shape=[8,64,64], b.shape=[8,64,64], "
                      "m=64, n=64, k=64, batch_size=8"),
    ("InternalError", "failed to create cublas handle: the library was not initialized"),
    ("InvalidArgumentError", "Incompatible shapes: [64,1000] vs. [32,1000]"),
]


@pytest.mark.parametrize("error_class, message", NEAR_THE_LIMIT)
def test_allocation_failures_of_every_class_are_out_of_memory(error_class, message):
    assert errors.is_out_of_memory(message, error_class)


@pytest.mark.parametrize("error_class, message", NOT_MEMORY)
def test_other_gpu_failures_are_not_out_of_memory(error_class, message):
    assert not errors.is_out_of_memory(message, error_class)


def test_evidence_is_the_line_that_names_the_failed_allocation():
    assert errors.out_of_memory_evidence(NEAR_THE_LIMIT[1][1], "NotFoundError") == (
        "Profiling failure on CUDNN engine eng34{k2=2,k13=0,k14=0,k18=0,k23=0}: "
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2147483648 bytes.")
    assert errors.out_of_memory_evidence("", "ResourceExhaustedError") == \
        "ResourceExhaustedError"
    assert len(errors.out_of_memory_evidence("OOM when allocating " + "x" * 500)) == 200


@pytest.mark.parametrize("line, oom", [
    # bfc_allocator.cc: a real failure, and an allocation allowed to fail (autotuning)
    ("W external/local_tsl/tsl/framework/bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out of "
     "memory trying to allocate 3.06GiB (rounded to 3288334336)requested by op conv1/Conv2D",
     True),
    ("W external/local_tsl/tsl/framework/bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of "
     "memory trying to allocate 4.13GiB with freed_by_count=0. The caller indicates that this is "
     "not a failure, but this may mean that there could be performance gains if more memory "
     "were available.", False),
    ("E external/local_xla/xla/stream_executor/cuda/cuda_blas.cc:190] failed to create cublas "
     "handle: the resource allocation failed", True),
    ("failed to allocate 1.00G (1073741824 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of "
     "memory", True),
    ("Failed to allocate scratch memory for the CuDNN CTC Loss", True),
    ("failed to allocate VGPR for implicit arguments", False),
    ("failed to allocate SME virtual tile to operation, tile value will go through memory, expect "
     "degraded performance", False),
])
def test_log_lines(line, oom):
    assert errors.is_out_of_memory("Step 1\n" + line + "\nRuntimeError: boom") is oom


@pytest.mark.slow
@pytest.mark.parametrize("error_class, message, code", [
    NEAR_THE_LIMIT[1] + (3,), NEAR_THE_LIMIT[3] + (3,), NOT_MEMORY[0] + (1,)])
def test_the_runner_reports_them_as_oom(tmp_path, monkeypatch, error_class, message, code):
    def failing_step(self, from_iterator=False):
        def step(inputs):
            raise getattr(tf.errors, error_class)(None, None, message)
        return step
    monkeypatch.setattr(steps.Steps, "train_step", failing_step)
    got, _ = run_inprocess(["--device=cpu", "--model=trivial", "--image_size=16",
                            "--batch_size=4", "--num_batches=2", "--csv_file=r.csv",
                            "--json_dir="], tmp_path)
    assert got == code
    row = only_row(tmp_path / "r.csv")
    if code == 3:
        assert row["status"] == "oom"
        evidence = errors.out_of_memory_evidence(message, error_class)
        assert row["error"].endswith("[%s: %s]" % (error_class, evidence))
    else:
        # TensorFlow's own first line, not the Python exception, and no claim of a bug
        assert row["status"] == "error"
        assert row["error"] == ("TensorFlow's runtime failed running trivial on CPU (fp32, batch "
                                "size 4 per device): No algorithm worked!  Error messages:")
