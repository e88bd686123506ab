"""tfbench.errors: the words for what ended a process."""

import signal

from tfbench import errors


def test_signal_name():
    assert errors.signal_name(signal.SIGTERM) == "SIGTERM"
    assert errors.signal_name(9) == "SIGKILL"
    assert errors.signal_name(77) == "signal 77"      # no signal has that number on Linux


def test_an_interrupt_names_its_signal():
    assert str(errors.Interrupted(signal.SIGINT)) == "interrupted by SIGINT"
    assert errors.Interrupted(signal.SIGTERM).exit_code == 143


def test_out_of_memory_advice_fits_the_device():
    """A CPU without fp16 units runs fp16 in software, far slower than fp32: its advice is a
    smaller batch or image, and bf16 only where the CPU has bf16 units; a GPU's is a smaller
    batch or, from fp32, mixed precision."""
    batch = "reduce --batch_size (--accum_steps keeps the effective batch)"
    assert errors.oom_remedies("gpu", "fp32") == (
        batch + ", or use mixed precision (--precision=bf16 or fp16)")
    assert errors.oom_remedies("gpu", "fp16") == batch
    assert errors.oom_remedies("cpu", "fp32") == batch + " or --image_size"
    assert errors.oom_remedies("cpu", "fp32", ["amx_bf16", "avx512_bf16"]) == (
        batch + " or --image_size, or use --precision=bf16 (this CPU has amx_bf16, avx512_bf16)")
    assert errors.oom_remedies("cpu", "bf16", ["avx512_bf16"]) == batch + " or --image_size"
    assert errors.oom_remedies("cpu", "fp16", ["avx512_bf16"]) == batch + " or --image_size"
    # The batch flag of the run's mode; micro-batches belong to training alone.
    assert errors.oom_remedies("gpu", "fp16", mode="eval") == "reduce --eval_batch_size"
    assert errors.oom_remedies("gpu", "fp16", mode="forward_only") == "reduce --batch_size"
