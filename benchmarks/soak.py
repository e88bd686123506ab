#!/usr/bin/env python3
"""Soak test: many steps of a small model; host memory growth and step-time trend.

Runs `python -m tfbench` once (default 10,000 timed steps of trivial at 32x32), then reads its
JSON manifest: the per-step times and the host monitor's RSS samples.
  memory growth = (RSS at the end - RSS when the timed loop starts) / RSS at the start
  slowdown      = median step time of the last 10% of steps / median of the first 10%
  trend         = least-squares slope of step time, as % of the mean per 1,000 steps
Passes when memory grows under --max_growth_pct (5) and the slowdown is under
--max_slowdown_pct (5). A benchmark, not a test: it prints its figures and verdict.

  python benchmarks/soak.py [--steps=10000] [--model=trivial] [--image_size=32] [--batch_size=8]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def analyse(step_times: list[float], host_samples: list[dict]) -> dict:
    times = np.asarray(step_times)
    tenth = max(len(times) // 10, 1)
    steady = [s for s in host_samples if s.get("phase") not in ("start", "warmup")]
    rss_start = steady[0]["rss_bytes"] if steady else None
    rss_end = host_samples[-1]["rss_bytes"] if host_samples else None
    slope = np.polyfit(np.arange(len(times)), times, 1)[0] if len(times) > 1 else 0.0
    return {
        "steps": int(len(times)),
        "rss_start_mb": rss_start / 2 ** 20 if rss_start else None,
        "rss_end_mb": rss_end / 2 ** 20 if rss_end else None,
        "rss_max_mb": max(s["rss_bytes"] for s in host_samples) / 2 ** 20 if host_samples
        else None,
        "memory_growth_pct": 100.0 * (rss_end - rss_start) / rss_start if rss_start else None,
        "first_tenth_median_ms": 1000 * float(np.median(times[:tenth])),
        "last_tenth_median_ms": 1000 * float(np.median(times[-tenth:])),
        "slowdown_pct": 100.0 * (np.median(times[-tenth:]) / np.median(times[:tenth]) - 1),
        "trend_pct_per_1000_steps": 100.0 * slope * 1000 / float(np.mean(times)),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--model", default="trivial")
    ap.add_argument("--image_size", type=int, default=32)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--max_growth_pct", type=float, default=5.0)
    ap.add_argument("--max_slowdown_pct", type=float, default=5.0)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "tfbench", "--device=cpu", "--model=" + args.model,
               "--image_size=%d" % args.image_size, "--batch_size=%d" % args.batch_size,
               "--num_batches=%d" % args.steps, "--display_every=%d" % max(args.steps // 10, 1),
               "--monitor_interval_ms=1000", "--csv_file=", "--json_dir=" + tmp]
        print(" ".join(cmd), flush=True)
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if proc.returncode:
            print(proc.stdout[-3000:])
            return proc.returncode
        print("\n".join(proc.stdout.splitlines()[-3:]))
        manifest = json.load(open(glob.glob(os.path.join(tmp, "*.json"))[0]))
    figures = analyse(manifest["step_times"], manifest["extra"]["samples"]["host"])
    for key, value in figures.items():
        print("%-28s %s" % (key, "%.3f" % value if isinstance(value, float) else value))
    ok = (figures["memory_growth_pct"] is not None
          and figures["memory_growth_pct"] < args.max_growth_pct
          and figures["slowdown_pct"] < args.max_slowdown_pct)
    print("verdict: %s (memory growth < %.0f%%, slowdown < %.0f%%)"
          % ("PASS" if ok else "FAIL", args.max_growth_pct, args.max_slowdown_pct))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
