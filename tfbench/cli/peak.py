"""`tfbench peak`: measure achievable TFLOP/s per precision and cache it for MFU
(the probe itself is tfbench.measure.peak)."""

from __future__ import annotations

import json

from tfbench.cli.guard import Parser
from tfbench.errors import UsageError
from tfbench.measure import peak
from tfbench.output.csv_out import write_json_atomic


def _store(device_name: str, precision: str, result: dict) -> None:
    path = peak.cache_path()
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        data = {}
    data[peak.cache_key(device_name, precision)] = result
    write_json_atomic(path, data)


def main(argv: list[str]) -> int:
    """`tfbench peak`: measures achievable TFLOP/s per precision and caches it for MFU."""
    ap = Parser(prog="tfbench peak", description=(
        "Measure the achievable TFLOP/s of this device per precision (a large matmul and a 3x3 "
        "convolution training step; the peak is the larger) and cache it in %s (under "
        "$TFBENCH_CACHE_DIR when set, else ~/.cache/tfbench), per device, TensorFlow version "
        "and precision. Later runs on the device report MFU against it, unless --peak_tflops "
        "or, on a GPU, the datasheet table gives a peak." % peak.CACHE_FILE))
    ap.add_argument("--device", choices=("cpu", "gpu"), default=None,
                    help="the device to probe (default: gpu when one is visible, else cpu)")
    ap.add_argument("--precision", default="fp32,bf16",
                    help="comma-separated: fp32, fp16, bf16 (default %(default)s)")
    ap.add_argument("--matmul_size", type=int, default=0,
                    help="N of the NxN matmul (default 0: %d on a GPU, %d on a CPU)"
                         % (peak.PROBE_SIZES["gpu"][0], peak.PROBE_SIZES["cpu"][0]))
    ap.add_argument("--conv_size", type=int, default=0,
                    help="image size of the convolution probe (default 0: %d on a GPU, %d on "
                         "a CPU)" % (peak.PROBE_SIZES["gpu"][1], peak.PROBE_SIZES["cpu"][1]))
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="timing budget per probe, seconds (default %(default)g)")
    args = ap.parse_args(argv)
    precisions = [x for x in args.precision.split(",") if x]
    bad = [x for x in precisions if x not in peak.PRECISIONS]
    if bad or not precisions:
        raise UsageError("--precision: %s is not one of fp32, fp16, bf16" % ",".join(bad))
    import tensorflow as tf

    from tfbench.distribute import devices
    gpus = tf.config.list_physical_devices("GPU")
    kind = args.device or ("gpu" if gpus else "cpu")
    if kind == "gpu" and not gpus:
        raise UsageError("--device=gpu was given but no GPU is visible")
    device_set = devices.DeviceSet(kind, 1, ("/%s:0" % kind,), "NHWC")
    name = devices.device_name(device_set)
    matmul_size = args.matmul_size or peak.PROBE_SIZES[kind][0]
    conv_size = args.conv_size or peak.PROBE_SIZES[kind][1]
    print("Peak probe on %s (%s), TensorFlow %s" % (name, kind, tf.__version__))
    for precision in precisions:
        result = peak.probe("/%s:0" % kind, precision, matmul_size, conv_size, args.seconds)
        table = peak.gpu_peak(name, precision) if kind == "gpu" else None
        _store(name, precision, result)
        line = "%-5s matmul %.3f TFLOP/s, conv training step %.3f TFLOP/s -> peak %.3f" % (
            precision, result["matmul_tflops"], result["conv_tflops"], result["tflops"])
        if table:
            line += " (datasheet %.1f: %s)" % table
        print(line)
    print("Cached in %s; runs on this device use it for MFU." % peak.cache_path())
    return 0
