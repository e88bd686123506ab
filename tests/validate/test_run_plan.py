"""A validation's steps run as children (tfbench.validate.run_plan), driven here by a stand-in
child without TensorFlow (tests/support/validate_fake_child.py): every step's rows, a child that
fails, crashes or hangs as one check_failed row while the next step still runs, validate.json
rewritten after every step, a signal ending the run with what it measured written."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, SUPPORT
from tfbench.cli import validate as cli

pytestmark = pytest.mark.slow   # the children are processes

FAKE = os.path.join(SUPPORT, "validate_fake_child.py")
FLAGS = ["--device=cpu", "--num_gpus=2", "--model=trivial", "--csv_file="]
NO_GPUS = ((0, "no NVIDIA driver"), None)


def entry(device, alone=10.0, matmul=1.0, conv=1.0, agrees=True, errors=None):
    return {"device": device, "alone_ms": alone, "together_ms": None, "matmul_tflops": matmul,
            "conv_tflops": conv, "digest": "d", "loss": 1.0, "bit_exact": agrees,
            "max_rel_diff": 0.0 if agrees else 2 ** -10, "within_bound": agrees,
            "agrees": agrees, "errors": errors or {}}


def clean_devices():
    return [entry("/cpu:0"), entry("/cpu:1")]


def _script(tmp_path, **kinds):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(kinds))
    return str(path)


def _validate(tmp_path, script, *argv):
    out, err = io.StringIO(), io.StringIO()
    child = [sys.executable, FAKE, script]
    code = cli.run(FLAGS + ["--out_dir=%s" % (tmp_path / "v")] + list(argv), child_cmd=child,
                   health_cmd=child + ["health"], stdout=out, stderr=err, gpus=NO_GPUS)
    with open(tmp_path / "v" / "validate.json") as handle:
        return code, json.load(handle), out.getvalue(), err.getvalue()


def _rows(data, **match):
    return [r for r in data["rows"] if all(r[k] == v for k, v in match.items())]


def test_a_clean_quick_validation_passes_with_its_skips(tmp_path):
    script = _script(tmp_path, train=[{"device_checks": clean_devices()}],
                     allreduce={"probe": {"ranks": 2, "timings": [
                         {"label": "1 MiB", "busbw_gbs": 3.0}]}})
    code, data, out, err = _validate(tmp_path, script)
    assert code == 0, out + err
    assert [s["name"] for s in data["steps"]] == ["health", "devices", "allreduce", "figures",
                                                  "health_after"]
    assert all(s["status"] == "ok" for s in data["steps"])
    assert data["status"] == "PASS" and data["exit_code"] == 0 and data["finished"]
    # quick checks each device's kernels and gradients, not its step alone
    assert [(r["subject"], r["check"], r["status"]) for r in data["rows"]] == [
        ("host", "health", "SKIP"),
        ("/cpu:0", "matmul", "PASS"), ("/cpu:0", "conv", "PASS"),
        ("/cpu:0", "gradients", "PASS"),
        ("/cpu:1", "matmul", "PASS"), ("/cpu:1", "conv", "PASS"),
        ("/cpu:1", "gradients", "PASS"),
        ("host", "allreduce_busbw", "SKIP"), ("host", "images_per_sec", "SKIP")]
    (busbw,) = _rows(data, check="allreduce_busbw")
    assert busbw["figure"] == "busbw 3 GB/s (1 MiB, 2 ranks)"
    # The figures as a baseline reads them (run_figures): the children's images/sec (no step
    # alone was timed at quick); the probe's busbw is judged against the links only.
    assert data["measured"]["figures"] == {"images_per_sec": [100.0]}
    assert [(f["figure"], f["values"], f["num_devices"]) for f in data["figures"]] == [
        ("images_per_sec", [100.0], 2)]
    assert data["summary"] == "PASS (6 PASS, 3 SKIP)"
    # The plan first, a line per step, the table, the overall line.
    lines = out.splitlines()
    assert lines[0].startswith("tfbench validate --level=quick: 5 steps, about ")
    assert lines[0].endswith(" on 2 logical CPU devices")
    assert [l.split()[:3] for l in lines if l[:2] in ("1/", "2/", "3/", "4/", "5/")] == [
        ["1/5", "health", "ok"], ["2/5", "devices", "ok"], ["3/5", "allreduce", "ok"],
        ["4/5", "figures", "ok"], ["5/5", "health_after", "ok"]]
    assert "validate: PASS (6 PASS, 3 SKIP)" in lines
    # What every child ran: the level's steps added to the flags, its files in the out_dir;
    # the training child timed the all-reduce (no allreduce child).
    with open(script + ".calls") as handle:
        calls = [json.loads(line) for line in handle]
    assert [c["kind"] for c in calls] == ["health", "train", "health"]
    train = calls[1]["argv"]
    assert train[:3] == FLAGS[:3]   # --csv_file is validate's own option
    assert "--num_batches=10" in train and "--num_warmup_batches=5" in train
    assert "--validate_devices" in train and "--explain_scaling" not in train
    assert "--validate_device_checks=kernels,numeric" in train
    assert "--validate_allreduce_json=%s" % (tmp_path / "v" / "runs" / "allreduce.json") \
        in train
    assert "--variable_update=replicated" in train
    with open(tmp_path / "v" / "children.csv") as handle:
        assert len(handle.readlines()) == 2   # the header and the training child's row


def test_a_child_that_hangs_is_a_failed_check_and_the_next_step_runs(tmp_path):
    script = _script(tmp_path, train=[{"device_checks": clean_devices(), "sleep": 60}])
    start = time.monotonic()
    code, data, out, err = _validate(tmp_path, script, "--step_timeout_sec=2")
    assert time.monotonic() - start < 30
    assert code == 8
    steps = {s["name"]: s for s in data["steps"]}
    assert steps["devices"]["status"] == "hung"
    assert steps["devices"]["error"] == "hung: no end after 2 s"
    (row,) = _rows(data, check="devices")
    assert (row["status"], row["reason"], row["figure"]) == (
        "FAIL", "check_failed", "hung: no end after 2 s")
    # the all-reduce it was to time is a failed check of its own; the next steps run
    assert steps["allreduce"]["status"] == "skipped"
    (row,) = _rows(data, check="allreduce_busbw")
    assert (row["status"], row["reason"], row["figure"]) == (
        "FAIL", "check_failed", "devices ended before its all-reduce probe (hung: no end "
                                "after 2 s)")
    assert steps["health_after"]["status"] == "ok"
    assert "validate: FAIL (2 FAIL" in out


def test_a_crashed_child_and_a_probe_without_figures_are_failed_checks(tmp_path):
    script = _script(tmp_path, train=[{"exit": 1, "write": False,
                                       "stdout": "Segmentation fault in the kernel"}],
                     allreduce={"write": False}, health=[{}, {"exit": 1, "write": False,
                                                          "stdout": "NVML went away"}])
    code, data, out, err = _validate(tmp_path, script)
    assert code == 8
    figures = {r["check"]: r["figure"] for r in _rows(data, reason="check_failed")}
    assert figures == {"devices": "error: Segmentation fault in the kernel (exit code 1)",
                       "allreduce_busbw": "devices ended before its all-reduce probe "
                                          "(error: Segmentation fault in the kernel (exit "
                                          "code 1))",
                       "health_after": "error: NVML went away (exit code 1)"}
    # The failed child's row is written for it from its flags.
    with open(tmp_path / "v" / "children.csv") as handle:
        assert "Segmentation fault in the kernel" in handle.read()


@pytest.mark.parametrize("allreduce, figure", [
    ({"write": False}, "devices wrote no all-reduce figures"),
    ({"probe": {"error": "TensorFlow's runtime failed in the all-reduce probe: NCCL error",
                "timings": []}},
     "the all-reduce probe in devices: TensorFlow's runtime failed in the all-reduce probe: "
     "NCCL error")])
def test_a_training_child_that_did_not_time_the_all_reduce_fails_that_check(
        tmp_path, allreduce, figure):
    script = _script(tmp_path, train=[{"device_checks": clean_devices()}], allreduce=allreduce)
    code, data, out, err = _validate(tmp_path, script)
    assert code == 8
    (row,) = _rows(data, check="allreduce_busbw")
    assert (row["status"], row["reason"], row["figure"]) == ("FAIL", "check_failed", figure)
    steps = {s["name"]: s for s in data["steps"]}
    assert steps["devices"]["status"] == "ok"   # its own checks stand
    assert steps["allreduce"]["status"] == ("skipped" if "write" in allreduce else "failed")
    assert len(_rows(data, status="PASS")) == 6


def test_a_usage_error_of_the_benchmark_stops_the_validation(tmp_path):
    script = _script(tmp_path, train=[{"exit": 2, "write": False,
                                       "stdout": "tfbench: error: --foo is bad"}])
    with pytest.raises(Exception, match="the benchmark refused its flags: .*--foo is bad"):
        _validate(tmp_path, script)
    with open(tmp_path / "v" / "validate.json") as handle:
        data = json.load(handle)
    assert [s["name"] for s in data["steps"]] == ["health", "devices"]


def test_validate_json_is_written_after_each_step(tmp_path):
    """A run stopped by SIGTERM while the devices child runs: the health rows are there, the
    step is marked interrupted, the exit code is 143."""
    script = _script(tmp_path, train=[{"device_checks": clean_devices(), "sleep": 60}])
    out_dir = tmp_path / "v"
    code = ("import sys; from tfbench.cli import validate, guard; import signal; "
            "child = [sys.executable, %r, %r]; "
            "sys.exit(guard.guarded(lambda a: validate.run(a, child_cmd=child, "
            "health_cmd=child + ['health'], gpus=((0, 'none'), None)), sys.argv[1:], "
            "(signal.SIGINT, signal.SIGTERM)))" % (FAKE, script))
    proc = subprocess.Popen([sys.executable, "-c", code] + FLAGS + ["--out_dir=%s" % out_dir],
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out_dir / "logs" / "devices.log").exists():
            break
        time.sleep(0.1)
    time.sleep(0.5)
    with open(out_dir / "validate.json") as handle:
        during = json.load(handle)
    assert [s["name"] for s in during["steps"]] == ["health"]
    assert during["finished"] is None and during["rows"][0]["check"] == "health"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    with open(out_dir / "validate.json") as handle:
        data = json.load(handle)
    assert data["interrupted"] == "SIGTERM" and data["exit_code"] == 143
    assert [(s["name"], s["status"]) for s in data["steps"]] == [
        ("health", "ok"), ("devices", "interrupted")]
    assert data["rows"][0]["check"] == "health"
    assert "every check already run is in" in err
    assert "validate: PASS (1 SKIP)" in out


def test_standard_runs_three_repeats_and_judges_their_medians(tmp_path):
    explained = {"efficiency_pct": 61.0, "lost_pts": {"compute": 4.0, "input": 0.0,
                                                      "allreduce": 30.0, "unexplained": 5.0}}
    # /cpu:1 is slow in one run only: the median of its three runs is not.
    slow_once = [entry("/cpu:0"), entry("/cpu:1", alone=30.0)]
    script = _script(tmp_path, train=[
        {"device_checks": clean_devices(), "explained": dict(explained, efficiency_pct=60.0),
         "images_per_sec": 100.0},
        {"device_checks": slow_once, "explained": explained, "images_per_sec": 104.0},
        {"device_checks": clean_devices(), "explained": dict(explained, efficiency_pct=62.0),
         "images_per_sec": 102.0}])
    code, data, out, err = _validate(tmp_path, script, "--level=standard",
                                     "--min_efficiency_pct=70")
    assert [s["name"] for s in data["steps"]][:4] == ["health", "devices_1", "devices_2",
                                                      "devices_3"]
    (alone,) = _rows(data, subject="/cpu:1", check="step_alone")
    assert alone["status"] == "PASS" and "(median of 3 runs)" in alone["figure"]
    (eff,) = _rows(data, check="efficiency_pct")
    assert (eff["status"], eff["reason"], eff["value"], eff["expected"]) == (
        "FAIL", "efficiency_low", 61.0, 70.0)
    assert eff["figure"] == ("61.0% (slowest device's extra compute 4.0 pts, input wait 0.0 "
                             "pts, all-reduce (not overlapped) 30.0 pts, unexplained 5.0 pts) "
                             "(median of 3 runs, spread 3.3%)")
    assert data["measured"]["figures"]["images_per_sec"] == [100.0, 104.0, 102.0]
    assert code == 8


def test_long_sizes_the_soak_from_the_step_time_measured(tmp_path):
    # 100 images/sec at a global batch of 8: 0.08 s a step; a 0.01-minute soak = 8 steps.
    slowing = [0.01] * 90 + [0.02] * 10
    script = _script(tmp_path, train=[{"device_checks": clean_devices()}] * 3 + [
        {"step_times": slowing}])
    code, data, out, err = _validate(tmp_path, script, "--level=long", "--soak_minutes=0.01",
                                     "--tolerance_pct=50")
    with open(script + ".calls") as handle:
        soak = [json.loads(line) for line in handle][-2]["argv"]
    assert soak[-1] == "--num_batches=8" and "--validate_devices" not in soak
    assert not any(a.startswith("--num_batches=1") for a in soak[:-1])
    (row,) = _rows(data, check="soak")
    # last tenth 20 ms, first tenth 10 ms: 2x > 1.5x
    assert (row["status"], row["reason"], row["value"], row["expected"]) == (
        "FAIL", "slowed_down", 2.0, 1.5)
    assert [s["name"] for s in data["steps"]][-2:] == ["soak", "health_after_soak"]


def test_the_second_health_reading_is_judged_against_the_first(tmp_path):
    from helpers import health_host
    from tfbench.measure import health_read

    def report(name):
        host, why = health_read.gpu_health(None, nvml=health_host(name),
                                           environ={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
        return {"readings": host.to_json(), "why": why, "tensorflow_cuda": None}
    script = _script(tmp_path, health=[{"report": report("hgx_h100_gpu1_ecc_uncorrected")},
                                       {"report": report("hgx_h100_gpu1_ecc_uncorrected_later")}],
                     train=[{"device_checks": clean_devices()}])
    code, data, out, err = _validate(tmp_path, script)
    rising = _rows(data, reason="ecc_uncorrected_rising")
    assert [(r["subject"], r["check"]) for r in rising] == [("GPU 1",
                                                             "ecc_errors (health after)")]
    assert code == 8


@pytest.mark.parametrize("lower_pct, status, code", [(3, "PASS", 0), (8, "FAIL", 8)])
def test_an_earlier_validate_json_is_the_baseline(tmp_path, lower_pct, status, code):
    """The first validation's validate.json judges the second: images/sec 3% lower passes at
    the default tolerance (5%), 8% lower fails, by the hand-computed limit 0.95 x 1000."""
    first = _script(tmp_path, train=[{"device_checks": clean_devices(),
                                      "images_per_sec": 1000.0}],
                    allreduce={"probe": {"ranks": 2, "timings": []}})
    code0, _, out, err = _validate(tmp_path, first)
    assert code0 == 0, out + err
    base = tmp_path / "baseline.json"
    os.rename(tmp_path / "v" / "validate.json", base)
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    again = _script(second_dir, train=[{"device_checks": clean_devices(),
                                        "images_per_sec": 1000.0 * (1 - lower_pct / 100.0)}],
                    allreduce={"probe": {"ranks": 2, "timings": []}})
    code1, data, out, err = _validate(second_dir, again, "--baseline=%s" % base)
    (row,) = _rows(data, check="images_per_sec")
    assert (row["status"], row["expected"]) == (status, pytest.approx(950.0)), out + err
    assert row["reason"] == ("ok" if status == "PASS" else "below_baseline")
    assert code1 == code and data["baseline"] == str(base)


def test_a_baseline_of_another_model_is_refused_before_anything_runs(tmp_path):
    first = _script(tmp_path, train=[{"device_checks": clean_devices()}],
                    allreduce={"probe": {"ranks": 2, "timings": []}})
    assert _validate(tmp_path, first)[0] == 0
    base = tmp_path / "baseline.json"
    os.rename(tmp_path / "v" / "validate.json", base)
    out, err = io.StringIO(), io.StringIO()
    child = [sys.executable, FAKE, first]
    with pytest.raises(Exception) as caught:
        cli.run(["--device=cpu", "--num_gpus=2", "--model=resnet20", "--csv_file=",
                 "--out_dir=%s" % (tmp_path / "w"), "--baseline=%s" % base], child_cmd=child,
                health_cmd=child + ["health"], stdout=out, stderr=err, gpus=NO_GPUS)
    assert type(caught.value).__name__ == "UsageError"
    assert str(caught.value).startswith("--baseline=%s is trivial fp32" % base)
    assert "this validation runs resnet20 fp32" in str(caught.value)
    assert not (tmp_path / "w").exists()


def test_the_history_is_the_baseline_of_this_host(tmp_path):
    """--baseline=history: this host's series in the history (--history, the children's store)
    at 1000 images/sec judges a run at 900 as a baseline file of 1000 would: below the
    hand-computed limit 0.95 x 1000 = 950, below_baseline FAIL, exit 8. A history without the
    configuration says so in one line and judges against the published range."""
    from tfbench.children import rows as rows_lib
    from tfbench.history import location, record, store
    history = str(tmp_path / "history.sqlite")
    first = _script(tmp_path, train=[{"device_checks": clean_devices(), "images_per_sec": 900.0}],
                    allreduce={"probe": {"ranks": 2, "timings": []}})
    # An empty history: one line, then the figures judged as without a baseline (a SKIP on
    # CPU devices).
    code, data, out, err = _validate(tmp_path, first, "--baseline=history",
                                     "--history=%s" % history)
    assert code == 0, out + err
    assert "holds no level of trivial fp32" in err and err.count("--baseline=history") == 1
    (row,) = _rows(data, check="images_per_sec")
    assert (row["status"], row["reason"]) == ("SKIP", "no_expectation")
    assert data["baseline"] == "history"
    assert "against the baseline in the history at %s" % history in out
    # This host's earlier runs of the same configuration: the run's own row, re-dated.
    [child] = rows_lib.read_rows(str(tmp_path / "v" / "children.csv"))
    s = store.Store(location.url_for(history))
    try:
        for day in range(5):
            earlier = dict(child, run_id="earlier-%d" % day, images_per_sec="1000.0",
                           timestamp="2026-01-0%dT00:00:00+00:00" % (day + 1))
            for result in record.from_rows([earlier], "run"):
                s.add(result)
    finally:
        s.close()
    second = tmp_path / "second"
    second.mkdir()
    code, data, out, err = _validate(second, first, "--baseline=history",
                                     "--history=%s" % history)
    (row,) = _rows(data, check="images_per_sec")
    assert (row["status"], row["reason"]) == ("FAIL", "below_baseline"), out + err
    assert row["expected"] == pytest.approx(950.0) and row["value"] == 900.0
    assert "this host's level: the median of its current segment, 5 runs" in row["expectation"]
    assert code == 8 and "--baseline=history" not in err
