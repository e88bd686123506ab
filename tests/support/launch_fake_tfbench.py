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
  FAKE_SLOW_HOSTS=h,...     a cluster with any of these hosts among --worker_hosts (host:port,
                            the port aside) reaches half the efficiency above

  validate [options] [flags] --out_dir=D --csv_file=F
                            a stand-in `tfbench validate`: a training row (100 images/sec, one
                            worker) in F, and D/validate.json of the design's shape (schema
                            tfbench.validate: its rows, status and exit code, the arguments it
                            got, and the text of --baseline), exit code 0. The host it runs on
                            is FAKE_HOST (the tests' remote shell sets it); FAKE_VALIDATE=
                            host=what,... makes a host's validate:
                              fail    a FAIL row (a straggler), exit code 8
                              crash   no row, no validate.json, an error line, exit code 1
                              refuse  `tfbench: error:` refusing its options, exit code 2
                              hang    its first rows written, then wait for SIGTERM: every row
                                      so far written, exit code 143
"""

import json
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


def _check(host, subject, check, status, reason, figure, expectation):
    return {"host": host, "subject": subject, "check": check, "status": status,
            "reason": reason, "figure": figure, "expectation": expectation, "value": None,
            "expected": None}


def validate(argv):
    args = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    host = os.environ.get("FAKE_HOST", socket.gethostname())
    what = dict(x.split("=", 1) for x in os.environ.get("FAKE_VALIDATE", "").split(",")
                if x).get(host, "pass")
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
    print("tfbench validate --level=%s on %s" % (args.get("level", "quick"), host), flush=True)
    if what == "refuse":
        print("tfbench: error: --baseline=%s: of another model (resnet50, not trivial)"
              % args.get("baseline", "-"), file=sys.stderr)
        return 2
    if what == "crash":
        print("tfbench: error: internal error: the fake validate crashed", file=sys.stderr)
        return 1
    result = RunResult(model=args.get("model", "trivial"), mode="training", batch_size=32,
                       global_batch_size=32, num_devices=1, device_kind="gpu", num_workers=1,
                       image_size=224, num_batches=10, num_warmup_batches=5,
                       images_per_sec=100.0)
    result.extra["device_name"] = "NVIDIA A100-SXM4-80GB"
    csv_out.append_row(args["csv_file"], result)
    rows = [_check(host, "GPU 0", "pcie_width", "PASS", "ok", "x16", "x16")]
    if what == "fail":
        rows.append(_check(host, "GPU 0", "straggler", "FAIL", "straggler",
                           "step alone 1.31x the median of 8 devices", "<= 1.05x"))
    baseline = None
    if "baseline" in args:
        with open(args["baseline"]) as handle:
            baseline = handle.read()

    def write(status, code):
        os.makedirs(args["out_dir"], exist_ok=True)
        with open(os.path.join(args["out_dir"], "validate.json"), "w") as handle:
            json.dump({"schema": "tfbench.validate", "schema_version": 1,
                       "level": args.get("level", "quick"), "host": host, "argv": argv,
                       "baseline_text": baseline, "rows": rows, "status": status,
                       "exit_code": code}, handle, indent=1)
    if what == "hang":
        write("PASS", 0)
        while not stop:
            time.sleep(0.05)
        write("PASS", 143)
        return 143
    code = 8 if what == "fail" else 0
    write("FAIL" if code else "PASS", code)
    return code


def main(argv):
    if argv[:1] == ["--version"]:
        print(VERSION)
        return 0
    if argv[:1] == ["validate"]:
        return validate(argv[1:])
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
        slow = set(filter(None, os.environ.get("FAKE_SLOW_HOSTS", "").split(",")))
        dragged = any(a.rpartition(":")[0] in slow for a in args["worker_hosts"].split(","))
        result.images_per_sec = 100.0 * workers * EFFICIENCY[workers] * (0.5 if dragged else 1)
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
