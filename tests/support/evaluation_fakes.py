"""Fake evaluations for the tests of `tfbench evaluate`: result rows and JSON manifests written
without running a model (write_evaluation), and a fake child that writes one such row for the
flags it is given (FAKE_CHILD), so whole evaluations run in a second.

Figures: training images/sec = BASE x MODE_FACTOR x speed (resnet50 native on the A100 is 900,
within the published 909 +/- 10%); inference p50 = LATENCY_MS x mode factor / speed.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

from paths import ROOT, SUPPORT
from tfbench.output import csv_out
from tfbench.results import RunResult

A100 = "NVIDIA A100-SXM4-40GB"
BASE = {"resnet50": 900.0, "resnet101": 520.0, "mobilenet_v3_large": 2400.0,
        "efficientnet_b0": 1500.0, "vit_tiny": 1800.0}
MODE_FACTOR = {"native": 1.0, "mixed": 2.5, "mixed_xla": 2.75}
LATENCY_MS = {"native": 5.0, "mixed": 4.0, "mixed_xla": 2.5, "tftrt": 1.25}
GFLOPS = {"resnet50": 7.7, "resnet101": 15.1, "mobilenet_v3_large": 0.43,
          "efficientnet_b0": 0.77, "vit_tiny": 2.5}


def environment(driver: str = "550.54.15") -> dict:
    return {"nvidia": {"available": True, "driver_version": driver, "cuda_driver_version": "12.4",
                       "gpus": [{"name": A100}]},
            "tensorflow": {"version": "2.21.0", "git_version": "v2.21.0",
                           "build": {"cuda_version": "12.5.1", "cudnn_version": "9"}},
            "keras": {"version": "3.15.1"}, "container": {"in_container": False},
            "cpu": {"model": "AMD EPYC"}, "hostname": "gpu-host",
            "tfbench": {"version": "0.1.0", "git_hash": "abc"}}


def result(model: str, mode: str, kind: str, device: str = A100, speed: float = 1.0,
           unstable: bool = False, status: str = "ok", image_size: int = 224) -> RunResult:
    """One run of the method with made-up figures."""
    gpu = "cpu" not in device.lower() and "epyc" not in device.lower()
    mixed = "fp16" if gpu else "bf16"
    training = kind == "training"
    r = RunResult(model=model, mode="training" if training else "forward_only",
                  precision="fp32" if mode in ("native", "tftrt") else mixed,
                  xla=mode == "mixed_xla",
                  batch_size=32 if training else 1, num_devices=1, image_size=image_size,
                  device_kind="gpu" if gpu else "cpu", num_batches=200 if training else 1000,
                  num_warmup_batches=20, status=status, gflops_per_image=GFLOPS.get(model, 1.0))
    r.global_batch_size = r.batch_size
    r.extra.update({"device_name": device, "num_runs": 3, "unstable_threshold_pct": 10.0})
    if mode == "tftrt":
        r.extra.update(serving_path="tftrt", trt_mode="FP16", trt_segments=1)
    if status != "ok":
        r.error = "made-up failure"
        return r
    if training:
        ips = BASE.get(model, 100.0) * MODE_FACTOR[mode] * speed
        step = r.batch_size / ips
    else:
        step = LATENCY_MS[mode] / 1000.0 / speed
        ips = 1.0 / step
    spread = 0.3 if unstable else 0.04
    r.images_per_sec = ips
    r.step_times = [step * (1.0 + 0.02 * ((i * 7) % 5 - 2)) for i in range(50)]
    r.step_times[-1] = step * 1.5
    r.tflops_per_sec = ips * r.gflops_per_image * (3 if training else 1) / 1000.0
    r.extra.update({
        "images_per_sec_min": ips * (1 - spread / 2), "images_per_sec_max": ips * (1 + spread / 2),
        "images_per_sec_median": ips, "spread_pct": spread * 100, "unstable": unstable,
        "latency_ms_p50": step * 1000, "latency_ms_p99": step * 1300,
        "peak_mem_gb": 2.0 if training else 0.5, "mfu_pct": 40.0 if gpu else None})
    if gpu:
        power = 300.0 if training else 120.0
        r.extra.update({"power_w_mean": power, "images_per_sec_per_watt": ips / power,
                        "temp_c_max": 70.0})
    r.environment = {"before": environment(), "after": environment()}
    return r


def write(csv_path: str, json_dir: str, r: RunResult) -> None:
    """The row, and the manifest (as the runner writes it: the result and its CSV row)."""
    csv_out.append_row(csv_path, r)
    os.makedirs(json_dir, exist_ok=True)
    with open(os.path.join(json_dir, r.run_id + ".json"), "w") as handle:
        json.dump({**r.to_dict(), "csv_row": csv_out.row_for(r)}, handle)


def write_evaluation(out_dir: str, models=("resnet50", "vit_tiny"),
                     modes=("native", "mixed", "mixed_xla"), **kw) -> str:
    """An evaluation directory's rows and manifests, as `tfbench evaluate` leaves them."""
    os.makedirs(out_dir, exist_ok=True)
    for model in models:
        for mode in modes:
            for kind in ("training", "inference")[1 if mode == "tftrt" else 0:]:
                write(os.path.join(out_dir, "evaluation.csv"), os.path.join(out_dir, "runs"),
                      result(model, mode, kind, **kw))
    return out_dir


# A stand-in for `python -m tfbench` in an evaluation: writes the row and the manifest for its
# flags. FAKE_DEVICE names the device, FAKE_SPEED scales the figures, FAKE_FAIL=<model> makes
# that model's runs exit 1 without a row, FAKE_UNSTABLE=<model> spreads its repeats by 30%.
FAKE_CHILD = textwrap.dedent("""\
    import os, sys
    sys.path[:0] = [%r, %r]
    import evaluation_fakes as fakes
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    print("fake child", " ".join(sys.argv[1:]))
    model = args["model"]
    if model == os.environ.get("FAKE_FAIL"):
        print("RuntimeError: made-up crash")
        sys.exit(1)
    mode = ("mixed_xla" if args.get("xla") == "true" else "mixed") \\
        if args.get("precision") in ("fp16", "bf16") else "native"
    if args.get("trt_mode"):
        mode = "tftrt"
    kind = "inference" if args.get("forward_only") == "true" else "training"
    r = fakes.result(model, mode, kind, device=os.environ.get("FAKE_DEVICE", fakes.A100),
                     speed=float(os.environ.get("FAKE_SPEED", "1")),
                     image_size=int(args.get("image_size") or 224),
                     unstable=model == os.environ.get("FAKE_UNSTABLE"))
    r.num_batches = int(args["num_batches"])
    r.num_warmup_batches = int(args["num_warmup_batches"])
    r.batch_size = r.global_batch_size = int(args["batch_size"])
    r.precision = args["precision"]
    if mode == "tftrt":
        r.extra["trt_mode"] = args["trt_mode"]
    r.extra["num_runs"] = int(args["num_runs"])
    r.command = " ".join(sys.argv)
    fakes.write(args["csv_file"], args["json_dir"], r)
    print("total images/sec: %%.2f" %% r.images_per_sec)
""") % (SUPPORT, ROOT)


def fake_child(tmp_path) -> list[str]:
    path = tmp_path / "fake_child.py"
    path.write_text(FAKE_CHILD)
    return [sys.executable, str(path)]
