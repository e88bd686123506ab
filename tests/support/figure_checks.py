"""Every figure a run prints, recomputed from the raw measurements its JSON manifest keeps (step
times, each repeat's wall time, batch sizes, monitor samples) by a few independent lines each,
and compared with the classic log (Step lines, footer), tfbench's own summary lines, the CSV row
and the JSON manifest.

The definitions are the legacy script's (tensorflow/benchmarks scripts/tf_cnn_benchmarks/
benchmark_cnn.py: get_perf_timing, benchmark_one_step, the `total images/sec` block) and
docs/measurements.md's:
  Step line at timed step k: over the first k step times t_i of the repeat, with B the images
  one step of this worker counts (per-device batch x micro-batches x devices), mean = B /
  mean(t) (with --display_perf_ewma a, t_i weighted (1-a)^(k-1-i)), +/- = population std of
  B/t_i / sqrt(k), jitter = 1.4826 x median |B/t_i - median(B/t)|;
  total images/sec = steps x global batch (all workers) / the repeat's wall time; with
  --num_runs the median over repeats (mean of the middle two for an even count).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from typing import Any, Optional
from helpers import only_row

GIB = 2.0 ** 30
STEP_LINE = re.compile(r"^(\d+)\timages/sec: (\S+) \+/- (\S+) \(jitter = (\S+)\)\t(\S+)")


# --- the independent implementations ----------------------------------------------------------
def step_figures(batch: int, times: list[float], ewma: Optional[float] = None):
    n = len(times)
    if ewma:
        weights = [(1.0 - ewma) ** (n - 1 - i) for i in range(n)]
        mean_time = sum(w * t for w, t in zip(weights, times)) / sum(weights)
    else:
        mean_time = sum(times) / n
    speeds = [batch / t for t in times]
    mu = sum(speeds) / n
    plusminus = math.sqrt(sum((s - mu) ** 2 for s in speeds) / n) / math.sqrt(n)
    middle = statistics.median(speeds)
    jitter = 1.4826 * statistics.median([abs(s - middle) for s in speeds])
    return batch / mean_time, plusminus, jitter


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, Hyndman & Fan type 7)."""
    xs = sorted(values)
    rank = (len(xs) - 1) * q / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(xs) - 1)
    return xs[low] + (rank - low) * (xs[high] - xs[low])


def median(values: list[float]) -> float:
    xs = sorted(values)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def window_mean(samples: list[dict], key: str) -> Optional[float]:
    """A host reading covers the time since the previous sample: the mean over the timed
    windows (from the last steady_start on, between opening and closing boundaries), each
    reading weighted by that time."""
    first = max((i for i, s in enumerate(samples) if s["phase"] == "steady_start"), default=0)
    inside, pairs = False, []
    for i in range(first, len(samples)):
        s = samples[i]
        if s["phase"] in ("steady_start", "steady_resume"):
            inside = True
            continue
        if inside and s.get(key) is not None:
            pairs.append((s["t"] - samples[i - 1]["t"], s[key]))
        if s["phase"] in ("steady_end", "end"):
            inside = False
    if not pairs:
        return None
    return sum(w * v for w, v in pairs) / sum(w for w, _ in pairs)


# --- comparing --------------------------------------------------------------------------------
def printed(text: str, expected: float, decimals: int) -> None:
    """`text` is `expected` printed with `decimals` decimals (half a unit of the last digit)."""
    tolerance = 0.5 * 10.0 ** -decimals + 1e-9 * abs(expected)
    assert abs(float(text) - expected) <= tolerance, (text, expected)


def close(value: float, expected: float, rel: float = 1e-9) -> None:
    assert abs(value - expected) <= rel * max(abs(expected), 1e-12), (value, expected)


def csv_close(text: str, expected: float) -> None:
    """A CSV figure (%.6g) is `expected`."""
    close(float(text), expected, 1e-5)


# --- reading a run ----------------------------------------------------------------------------
def read_run(cwd, out: str, csv_name: Optional[str] = "tfbench_results.csv",
             json_dir: str = "tfbench_runs") -> dict[str, Any]:
    """The run's stdout lines, its CSV row and its JSON manifest (csv_name None: a run without
    a CSV file, whose row is the one its manifest keeps)."""
    if csv_name is None:
        (name,) = os.listdir(os.path.join(cwd, json_dir))
        with open(os.path.join(cwd, json_dir, name)) as handle:
            manifest = json.load(handle)
        row = manifest["csv_row"]
    else:
        row = only_row(os.path.join(cwd, csv_name))
        with open(os.path.join(cwd, json_dir, row["run_id"] + ".json")) as handle:
            manifest = json.load(handle)
    return {"lines": out.rstrip("\n").split("\n"), "row": row, "manifest": manifest}


def _one(lines: list[str], prefix: str) -> str:
    (line,) = [l for l in lines if l.startswith(prefix)]
    return line


def check_run(run: dict[str, Any], *, global_batch: int, num_batches: int, display_every: int,
              num_runs: int = 1, ewma: Optional[float] = None) -> dict[str, float]:
    """Asserts every printed figure of `run` (read_run) against its recomputation; returns the
    recomputed headline figures. global_batch: the images per step of all workers, as the test
    computes it from the flags it gave."""
    lines, row, m = run["lines"], run["row"], run["manifest"]
    extra = m["extra"]
    training = m["mode"] == "training"
    # Settings: the batch arithmetic, as recorded.
    worker_batch = m["batch_size"] * m["accum_steps"] * m["num_devices"]
    assert worker_batch * m["num_workers"] == global_batch == m["global_batch_size"]
    n = num_batches
    times = m["step_times"]
    assert len(times) == n * num_runs and len(m["losses"]) == n * num_runs
    assert "Batch size:  %d global" % global_batch in lines
    assert "             %d per device" % m["batch_size"] in lines
    assert "Num batches: %d" % n in lines

    # Step lines, repeat by repeat: images/sec, +/-, jitter and the loss.
    step_batch = global_batch if m["variable_update"] == "distributed_all_reduce" \
        else worker_batch
    shown = [STEP_LINE.match(l) for l in lines if STEP_LINE.match(l)]
    due = [k for k in range(1, n + 1) if k == 1 or k % display_every == 0]
    assert [int(s.group(1)) for s in shown] == due * num_runs
    for index, match in enumerate(shown):
        repeat, k = divmod(index, len(due))[0], int(match.group(1))
        mine = times[repeat * n:repeat * n + k]
        mean, plusminus, jitter = step_figures(step_batch, mine, ewma)
        printed(match.group(2), mean, 1)
        printed(match.group(3), plusminus, 1)
        printed(match.group(4), jitter, 1)
        if training:
            printed(match.group(5), m["losses"][repeat * n + k - 1], 3)

    # The footer: total images/sec of each repeat from its own wall time, then their median.
    walls = extra["wall_time_runs"]
    assert len(walls) == num_runs and walls[-1] == m["wall_time"]
    per_run = []
    for repeat, wall in enumerate(walls):
        assert wall >= sum(times[repeat * n:(repeat + 1) * n])
        per_run.append(n * global_batch / wall)
    total = median(per_run)
    assert lines[-3] == lines[-1] == "-" * 64
    assert lines[-2].startswith("total images/sec: ")
    printed(lines[-2].split(": ")[1], total, 2)
    close(m["images_per_sec"], total)
    csv_close(row["images_per_sec"], total)

    # The CSV's (and the JSON's) figures of the Step lines: every step of the last repeat.
    last = step_figures(step_batch, times[-n:], ewma)
    for key, value in zip(("step_images_per_sec", "step_images_per_sec_plusminus", "jitter"),
                          last):
        close(m[key], value, 1e-9)
        csv_close(row[key], value)
    if training:
        csv_close(row["final_loss"], m["losses"][-1])
    assert row["steps_run"] == str(n * num_runs) and row["num_batches"] == str(n)
    assert row["global_batch_size"] == str(global_batch)

    # Latency over every timed step (ms per batch).
    ms = [t * 1000.0 for t in times]
    latency = {"p50": percentile(ms, 50), "p90": percentile(ms, 90), "p99": percentile(ms, 99),
               "mean": sum(ms) / len(ms), "min": min(ms), "max": max(ms)}
    for name in ("p50", "p90", "p99", "mean"):
        csv_close(row["latency_ms_" + name], latency[name])
    if m["mode"] in ("forward_only", "eval"):
        line = _one(lines, "Latency (ms/batch): ")
        values = dict(re.findall(r"(p50|p90|p99|mean|min|max) (\S+)", line))
        for name, value in latency.items():
            printed(values[name], value, 2)

    # Cold start: the first warm-up step, warm-up wall time, the mean timed step.
    first = m["warmup_times"][0]
    csv_close(row["first_step_sec"], first)
    line = _one(lines, "Cold start: ")
    cold = re.match(r"Cold start: first step (\S+) s, warm-up (\S+) s \((\d+) steps?\), "
                    r"steady state (\S+) ms/step$", line)
    printed(cold.group(1), first, 3)
    assert m["warmup_sec"] >= sum(m["warmup_times"])
    printed(cold.group(2), m["warmup_sec"], 3)
    assert int(cold.group(3)) == len(m["warmup_times"])
    printed(cold.group(4), sum(times) / len(times) * 1000.0, 2)

    # Model stats: achieved TFLOP/s from the counted GFLOPs and total images/sec.
    tflops = m["gflops_per_image"] * (3.0 if training else 1.0) * total / 1000.0
    csv_close(row["tflops_per_sec"], tflops)
    line = _one(lines, "Model stats: ")
    assert line.startswith("Model stats: {:,} trainable params, ".format(m["params"]))
    printed(re.search(r"achieved (\S+) TFLOP/s", line).group(1), tflops, 3)
    printed(re.search(r", (\S+) GFLOPs/image forward", line).group(1), m["gflops_per_image"], 3)

    # Memory: this worker's images/sec per GiB of its host's peak RSS (CPU runs).
    peak = extra["peak_mem_gb"]
    per_gb = total / m["num_workers"] / peak
    csv_close(row["images_per_sec_per_gb"], per_gb)
    line = _one(lines, "Memory: ")
    memory = re.match(r"Memory: peak (\S+) GiB host RSS \(no device memory statistics\), "
                      r"(\S+) images/sec/GiB$", line)
    printed(memory.group(1), peak, 2)
    printed(memory.group(2), per_gb, 1)

    # Host CPU over the timed windows, from the monitor's samples.
    samples = extra.get("samples", {}).get("host") or []
    busy = window_mean(samples, "cpu_util_pct") if samples else None
    if busy is not None:
        process = window_mean(samples, "proc_cpu_pct")
        line = _one(lines, "Host CPU: ")
        host = re.match(r"Host CPU: (\S+)% busy \(system, \d+ cores\), process (\S+)% "
                        r"\(100% = one core\), RSS max (\S+) GiB$", line)
        printed(host.group(1), busy, 0)
        printed(host.group(2), process, 0)
        printed(host.group(3), max(s["rss_bytes"] for s in samples) / GIB, 2)
        csv_close(row["cpu_util_pct_mean"], busy)

    # Repeats.
    if num_runs > 1:
        low, high = min(per_run), max(per_run)
        spread = (high - low) / total * 100.0
        for key, value in (("images_per_sec_median", total), ("images_per_sec_min", low),
                           ("images_per_sec_max", high), ("spread_pct", spread)):
            csv_close(row[key], value)
        assert row["num_runs"] == str(num_runs)
        assert row["unstable"] == ("1" if spread > 10.0 else "0")
        line = _one(lines, "Repeats: ")
        rep = re.match(r"Repeats: (\d+) runs, median (\S+) images/sec, min (\S+), max (\S+), "
                       r"spread (\S+)%( UNSTABLE \(spread > 10%\))?$", line)
        assert int(rep.group(1)) == num_runs
        for text, value in zip(rep.groups()[1:4], (total, low, high)):
            printed(text, value, 2)
        printed(rep.group(5), spread, 1)
        assert bool(rep.group(6)) == (spread > 10.0)
    else:
        assert not [l for l in lines if l.startswith("Repeats: ")]

    # The JSON keeps the CSV row it wrote, and every figure in both is one number.
    assert m["csv_row"] == row
    for key, text in row.items():
        value = m.get(key, extra.get(key))
        if isinstance(value, float):
            assert text == "%.6g" % value, key
    return {"total": total, "per_run": per_run}
