"""A stand-in for `tfbench` on a host of `tfbench launch` (tests): no TensorFlow, a row in a second.

  --version                 the version line (all fake hosts agree)
  --gpu_indices=I,J         printed after the start line (`GPU indices: I,J`)
  --model=trivial           the classic footer; images/sec = 100 x workers x (1.0, 0.9, 0.8)
                            for 1, 2, 3 workers; with NCCL_DEBUG_FILE, NCCL's lines as recorded
                            on InfiniBand hosts (between hosts for several workers)
  --model=oom_on_1          worker 1: an out-of-memory error (exit code 3, status oom); the
                            others train until stopped (SIGTERM: status interrupted, 143)
  --model=until_stopped     every task trains until stopped
  --model=in_container      as in a container without the host's $TMPDIR or NCCL_* variables:
                            no row where --csv_file says, no NCCL log
  --model=hang_on_1         worker 1 hangs (stops itself, SIGSTOP); the others lose it after
                            0.5 s as tfbench does (exit code 5)
  --model=oom_with_2        with several workers, worker 1 runs out of memory after 0.5 s (exit
                            code 3, status oom) and the others lose it 0.5 s later (exit code 5,
                            status error); alone, a worker trains as trivial does
"""

import os
import signal
import socket
import sys
import time

import paths  # noqa: F401 - the checkout's root first on sys.path

from tfbench.output import csv_out, files  # noqa: E402
from tfbench.results import RunResult  # noqa: E402

VERSION = "tfbench 0.1.0 | TensorFlow 2.21.0 | Keras 3.15.1 | Python 3.11.7"
EFFICIENCY = {1: 1.0, 2: 0.9, 3: 0.8}

NCCL_SINGLE = """\
{h}:{p}:{p} [0] NCCL INFO NCCL version 2.21.5+cuda12.4
{h}:{p}:{q} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
"""
NCCL_MULTI = """\
{h}:{p}:{p} [0] NCCL INFO NCCL version 2.21.5+cuda12.4
{h}:{p}:{q} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:192.168.11.1<0>
{h}:{p}:{q} [0] NCCL INFO Using network IB
{h}:{p}:{q} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
{h}:{p}:{q} [0] NCCL INFO Channel 00/0 : 1[0] -> 8[0] [send] via NET/IB/0/GDRDMA
{h}:{p}:{q} [0] NCCL INFO Channel 01/0 : 9[1] -> 0[0] [send] via NET/IB/1(8)/GDRDMA
"""


def main(argv):
    if argv[:1] == ["--version"]:
        print(VERSION)
        return 0
    args = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    workers = len(args["worker_hosts"].split(","))
    index = int(args["task_index"])
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
    print("Starting worker %d" % index, flush=True)
    if "gpu_indices" in args:
        print("GPU indices: %s" % args["gpu_indices"], flush=True)
    result = RunResult(model=args.get("model", "trivial"), mode="training", batch_size=32,
                       global_batch_size=32 * workers, num_devices=1, device_kind="gpu",
                       num_workers=workers, variable_update="collective_all_reduce",
                       image_size=224, num_batches=10)
    result.extra["device_name"] = "NVIDIA A100-SXM4-80GB"
    in_container = result.model == "in_container"
    path = os.environ.get("NCCL_DEBUG_FILE")
    if path and not in_container:
        path = path.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
        with open(path, "w") as handle:
            handle.write((NCCL_MULTI if workers > 1 else NCCL_SINGLE).format(
                h=socket.gethostname(), p=os.getpid(), q=os.getpid() + 1))
    code = 0
    if result.model == "oom_with_2" and workers > 1:
        time.sleep(0.5 if index == 1 else 1.0)
        if index == 1:
            result.status, result.error = "oom", "OOM when allocating tensor with shape [64]"
        else:
            result.status, result.error = "error", ("worker %d: lost the cluster "
                                                    "(UnavailableError)" % index)
        csv_out.append_row(args["csv_file"], result)
        print("tfbench: error: %s" % result.error, file=sys.stderr)
        return 3 if index == 1 else 5
    if result.model == "hang_on_1":
        if index == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(0.5)
        result.status = "error"
        result.error = ("worker %d: lost the cluster (UnavailableError); no heartbeat from "
                        "worker 1 (hung, or cut off from this host)" % index)
        csv_out.append_row(args["csv_file"], result)
        print("tfbench: error: %s" % result.error, file=sys.stderr)
        return 5
    if result.model in ("oom_on_1", "until_stopped"):
        if index == 1 and result.model == "oom_on_1":
            time.sleep(0.5)
            result.status, result.error = "oom", "OOM when allocating tensor with shape [64]"
            csv_out.append_row(args["csv_file"], result)
            print("tfbench: error: %s" % result.error, file=sys.stderr)
            return 3
        while not stop:
            time.sleep(0.05)
        result.status, result.error = "interrupted", "interrupted by SIGTERM"
        code = 143
    else:
        result.images_per_sec = 100.0 * workers * EFFICIENCY[workers]
    if not in_container:
        csv_out.append_row(args["csv_file"], result)
    if code:
        print("tfbench: error: %s" % result.error, file=sys.stderr)
        return code
    print(files.results_line("ok", args["csv_file"], result.run_id))
    print("-" * 64)
    print("total images/sec: %.2f" % result.images_per_sec)
    print("-" * 64)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
