"""Errors a user can cause, each with the exit code the CLI ends with.

Exit codes (documented in docs/output.md):
  0  success
  1  run error (a failure during the run that is not one below)
  2  usage error (bad flag, value, combination, file or path)
  3  out of memory
  4  NaN or Inf loss
  5  distributed runtime failure (a peer unreachable or lost)
  6  a study (sweep, evaluate, launch --sweep_hosts) whose points did not all finish ok; every
     row and table is written
  7  tfbench validate: a check warns and none fails
  8  tfbench validate: a check fails (a check that could not run is a failed check)
  130 / 143  interrupted by SIGINT / SIGTERM
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

# Every failure ends with this one line on stderr, whatever the command (docs/output.md).
ERROR_PREFIX = "tfbench: error: "

EXIT_OK = 0
EXIT_RUN_ERROR = 1
EXIT_USAGE = 2
EXIT_OOM = 3
EXIT_NAN = 4
EXIT_DISTRIBUTED = 5
EXIT_INCOMPLETE = 6
EXIT_VALIDATE_WARN = 7
EXIT_VALIDATE_FAIL = 8
EXIT_REGRESSION = 9   # `tfbench history changes --since`, `tfbench compare --threshold_pct`
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


def error_line(message: str) -> str:
    """`tfbench: error: MESSAGE`, the line a failed command ends with."""
    return ERROR_PREFIX + message


class TfbenchError(Exception):
    """Base: an error with a one-line message meant for the user."""

    exit_code = EXIT_RUN_ERROR
    status = "error"


class UsageError(TfbenchError):
    """Bad flag, value, combination, file or path."""

    exit_code = EXIT_USAGE


class OutOfMemory(TfbenchError):
    exit_code = EXIT_OOM
    status = "oom"


class InstallError(TfbenchError):
    """An installation tfbench cannot run in, and what repairs it (e.g. a numpy the installed
    TensorFlow cannot import with)."""


class NanLoss(TfbenchError):
    exit_code = EXIT_NAN
    status = "nan"


class DistributedError(TfbenchError):
    exit_code = EXIT_DISTRIBUTED


def signal_name(signum: int) -> str:
    """SIGTERM, SIGKILL, ...: the signal's name, or 'signal 77' for a number that names none."""
    import signal
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


class Interrupted(TfbenchError):
    status = "interrupted"

    def __init__(self, signum: int):
        import signal
        self.signum = signum
        self.exit_code = EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT
        super().__init__("interrupted by %s" % signal_name(signum))


# The signal the CLI's handler received. The handler also raises Interrupted, but Python can
# deliver it inside code that swallows exceptions (a finalizer during a TensorFlow call), so
# every step loop checks this as well.
_stop_signal: list[int] = []


def request_stop(signum: int) -> None:
    if not _stop_signal:
        _stop_signal.append(signum)


def clear_stop() -> None:
    _stop_signal.clear()


def stop_requested() -> Optional[Interrupted]:
    """Interrupted for the SIGINT/SIGTERM received, or None."""
    return Interrupted(_stop_signal[0]) if _stop_signal else None


def raise_if_stopped() -> None:
    """Raises Interrupted once SIGINT/SIGTERM has been received."""
    stop = stop_requested()
    if stop is not None:
        raise stop


# --- out of memory ------------------------------------------------------------------------
# Near the memory limit a GPU step does not always fail with ResourceExhaustedError: the
# allocation that fails may be cuDNN's, cuBLAS's or a copy's, and TensorFlow reports it under
# another class. Each text is a failed allocation as TensorFlow 2.17-2.21 and the CUDA libraries
# word it (source, and the class it arrives as). Texts that only suggest memory trouble are left
# out: "No algorithm worked!" (NotFoundError) is OOM only when an engine failure it lists is one
# of these, and CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_INTERNAL_ERROR or
# CUBLAS_STATUS_NOT_INITIALIZED are not.
OOM_CLASSES = ("ResourceExhaustedError", "MemoryError")
_OOM_TEXT = re.compile("|".join((
    r"ResourceExhausted|Resource exhausted|MemoryError",   # class names in a log's traceback
    r"OOM when allocating",                    # BFC allocator via OpKernelContext
    r"Out of memory while trying to allocate",  # StreamExecutor TfAllocatorAdapter (XLA, autotune)
    r"Dst tensor is not initialized",          # gpu_util.cc copy into an unallocated buffer
    r"Failed to allocate the requested memory size",  # cuDNN scratch allocator: Unavailable
    r"CUDNN failed to allocate the scratch space",    # conv launch: UnknownError
    # cuDNN: TensorFlow's status table (cuDNN 9 maps the deprecated ALLOC_FAILED to a host
    # allocation failure), cudnnGetErrorString of cuDNN 9, and TensorFlow's "<unknown cudnn
    # status: N>" for the cuDNN 9 codes its table lacks (4003 host, 4004 device allocation)
    r"CUDNN_STATUS_ALLOC_FAILED",
    r"CUDNN_STATUS_INTERNAL_ERROR_(?:HOST|DEVICE)_ALLOCATION_FAILED",
    r"<unknown cudnn status: 400[34]>",
    # cuBLAS: the status name, and cublasGetStatusString's text for it, which TensorFlow prints
    # since CUDA 11.5 (InternalError)
    r"CUBLAS_STATUS_ALLOC_FAILED",
    r"the resource allocation failed",
    r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
    r"(?i:out of memory)",                      # BFC "ran out of memory", CUDA "out of memory", ...
    # "failed to allocate 1.00G (1073741824 bytes) from device", "... scratch memory ...", not
    # a compiler's register allocation ("failed to allocate VGPR for implicit arguments")
    r"(?i:failed to allocate (?:[\w%]+ ){0,3}?(?:memory|bytes\b|[\d.]+))",
    r"bad_alloc|Cannot allocate memory",       # host: C++ and ENOMEM
)))
# The BFC allocator says "ran out of memory" too when an allocation may fail (cuDNN autotuning
# tries large workspaces) and the step goes on.
_NOT_A_FAILURE = "The caller indicates that this is not a failure"


def out_of_memory_evidence(text: str, error_class: str = "") -> Optional[str]:
    """Why an error is an out-of-memory failure, or None when nothing says it is.

    `text` is an error's message or the tail of a log; `error_class` the exception's class name.
    The answer is the first line of `text` naming a failed allocation (stripped, at most 200
    characters), else `error_class` when the class alone says so.
    """
    for line in text.splitlines():
        if _NOT_A_FAILURE not in line and _OOM_TEXT.search(line):
            line = line.strip()
            return line if len(line) <= 200 else line[:197] + "..."
    return error_class if error_class in OOM_CLASSES else None


def is_out_of_memory(text: str, error_class: str = "") -> bool:
    """Whether an error (message, or a log's tail) and its class name mean out of memory."""
    return out_of_memory_evidence(text, error_class) is not None


def oom_remedies(device_kind: str, precision: str, bf16_units: Sequence[str] = (),
                 mode: str = "training") -> str:
    """What a run out of memory can change, fitting its device: on a GPU a smaller batch or,
    from fp32, mixed precision; on a CPU a smaller batch or image size, and bf16 only from fp32
    on a CPU with bf16 units (`bf16_units`: avx512_bf16, amx_bf16), never fp16, which a CPU
    without fp16 units runs in software, far slower than fp32. The batch is the flag that sets
    the batch of the run's `mode`: --eval_batch_size for eval; micro-batches (--accum_steps)
    keep a training run's effective batch only."""
    text = {"training": "reduce --batch_size (--accum_steps keeps the effective batch)",
            "eval": "reduce --eval_batch_size"}.get(mode, "reduce --batch_size")
    if device_kind == "cpu":
        text += " or --image_size"
        if precision == "fp32" and bf16_units:
            text += ", or use --precision=bf16 (this CPU has %s)" % ", ".join(bf16_units)
    elif precision == "fp32":
        text += ", or use mixed precision (--precision=bf16 or fp16)"
    return text


def interrupt_on_signals(signums: tuple[int, ...] = ()) -> "Callable[[], None]":
    """Makes SIGINT/SIGTERM (or `signums`) raise Interrupted, and records the signal too,
    because TensorFlow may wrap an exception raised inside its own Python code (e.g. while
    binding inputs); returns the function that puts the previous handlers back."""
    import signal

    def handler(signum, _frame):
        request_stop(signum)
        raise Interrupted(signum)
    clear_stop()
    previous = {s: signal.signal(s, handler)
                for s in (signums or (signal.SIGINT, signal.SIGTERM))}

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)
        clear_stop()
    return restore


def hold_sigterm() -> None:
    """Until release_sigterm(), a SIGTERM waits, pending, instead of reaching a handler.

    MultiWorkerMirroredStrategy replaces the SIGTERM handler with its preemption notifier's
    while it connects to the cluster, inside a C++ call that holds the GIL; a SIGTERM in that
    window only sets the notifier's flag, and restoring Python's handler afterwards does not
    replay it: the task would train on until SIGKILL and write no row. Held instead, the signal
    reaches Python's handler once released. The mask is per thread: call this before any
    thread starts (the CLI does, before importing TensorFlow), so that TensorFlow's threads
    inherit it and never take the signal, which then goes to the main thread."""
    import signal
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def release_sigterm() -> None:
    """Delivers a SIGTERM held since hold_sigterm() (if any) and lets later ones through."""
    import signal
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
