"""--data_only, --diagnose_input and --explain_scaling's input probe: the input pipeline timed
alone, and the verdict on whether a real-data run is input-bound. Pure pieces; the runners wire
them."""

from __future__ import annotations

import time
from typing import Callable, Iterator, Optional

INPUT_BOUND_THRESHOLD = 0.9


def arrival_intervals(iterator: Iterator, num_batches: int,
                      now: Callable[[], float] = time.perf_counter) -> Iterator[float]:
    """Seconds from one batch's arrival to the next's, for `num_batches` batches of
    `iterator` (the first from when the first is asked for). Whatever the caller does between
    batches counts: the intervals add up to the loop's wall time, so images / their sum is the
    pipeline's rate as a loop that reads and uses each batch sees it (a mean of next() calls
    alone would leave the time between them out). A batch is complete when `next` returns."""
    last = now()
    for _ in range(num_batches):
        next(iterator)
        arrived = now()
        yield arrived - last
        last = arrived


def input_bound_verdict(synthetic_ips: float, real_ips: float, input_only_ips: float,
                        threshold: float = INPUT_BOUND_THRESHOLD) -> tuple[bool, str]:
    """(input-bound?, one line with the three numbers and advice).

    Input-bound: real data runs below `threshold` of synthetic speed while the pipeline alone
    is not clearly faster than the real-data run (input-only < real / threshold).
    """
    numbers = ("synthetic %.1f, real data %.1f, input pipeline alone %.1f images/sec"
               % (synthetic_ips, real_ips, input_only_ips))
    if min(synthetic_ips, real_ips, input_only_ips) <= 0:
        return False, "Input diagnosis: cannot judge (%s)" % numbers
    ratio = real_ips / synthetic_ips
    if ratio >= threshold:
        return False, ("Input diagnosis: not input-bound (%s; real data reaches %.0f%% of "
                       "synthetic)" % (numbers, 100 * ratio))
    if input_only_ips < real_ips / threshold:
        return True, ("Input diagnosis: INPUT-BOUND (%s; real data reaches %.0f%% of synthetic "
                      "and the pipeline alone is no faster). Try more threads "
                      "(--datasets_num_private_threads, --num_inter_threads), "
                      "--datasets_use_caching, or the data on a faster disk or /dev/shm"
                      % (numbers, 100 * ratio))
    return False, ("Input diagnosis: slowed by input, not bound by it (%s; real data reaches "
                   "%.0f%% of synthetic but the pipeline alone delivers %.1fx that): the model "
                   "and the pipeline compete for the host (CPU threads, host-to-device copies); "
                   "try --datasets_num_private_threads to cap the pipeline's threads, or more "
                   "host cores" % (numbers, 100 * ratio, input_only_ips / real_ips))


def input_settings_line(threads: Optional[int], origin: str, pinned: bool) -> str:
    """What the real-data runs read with: tf.data's threads (a private pool of `threads`, or
    TensorFlow's shared threads) and where that comes from, and the host buffers."""
    if threads:
        pool = "a private tf.data thread pool of %d thread%s (%s)" % (
            threads, "" if threads == 1 else "s", origin)
    else:
        pool = "TensorFlow's shared threads for tf.data (%s)" % (
            "the default on the CPU" if origin == "default" else origin)
    return "Input settings: %s; host buffers %s (--%sforce_gpu_compatible)" % (
        pool, "pinned" if pinned else "pageable", "" if pinned else "no")
