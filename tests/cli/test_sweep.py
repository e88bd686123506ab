"""Whole sweeps with a fake child (tfbench.cli.sweep over tfbench.sweep.study): isolation of
failing points, study tables, interrupts, exit codes."""

import io
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tfbench import errors
from tfbench.sweep import grid
from tfbench.cli import sweep as sweep_cli
from tfbench.report import tables
import paths
from helpers import read_rows

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _in_a_temporary_directory(tmp_path, monkeypatch):
    """A sweep appends its rows to ./tfbench_results.csv as a run does: not in the checkout."""
    monkeypatch.chdir(tmp_path)


REPO = paths.ROOT

# A stand-in for `python -m tfbench`: parses --k=v flags, behaves by --model, writes its row with
# csv_out like the real runner. Throughput: 100 img/s per device at batch >= 64 (less below),
# x0.9 per doubling of devices; fp16 x2, xla x1.25; halves per doubling of image size.
FAKE_CHILD = textwrap.dedent("""\
    import os, signal, sys, time
    # As tfbench's CLI does: handle SIGINT even when started with it ignored (a background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, %r)
    from tfbench.output import csv_out
    from tfbench.results import RunResult
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    model = args.get("model", "trivial")
    gpus = int(args.get("num_gpus", 1))
    bs = int(args.get("batch_size", 32))
    size = int(args.get("image_size", 32))
    print("fake child", " ".join(sys.argv[1:]))
    if model == "crash":
        print("Traceback (most recent call last):")
        print("RuntimeError: segfault-ish crash")
        sys.exit(1)
    if model == "nan":
        print("loss is NaN")
        sys.exit(4)
    if model == "usage":
        print("tfbench: error: --model=usage is not a known model")
        sys.exit(2)
    if model == "sleep":
        time.sleep(30)
    if model == "warmup":   # as tfbench's runner: stopped in warm-up, its row times no step
        try:
            open(os.path.join(os.path.dirname(args["csv_file"]), "warming-up"), "w").close()
            time.sleep(30)
        except KeyboardInterrupt:
            csv_out.append_row(args["csv_file"], RunResult(
                model=model, mode="training", batch_size=bs, status="interrupted",
                error="interrupted by SIGINT", warmup_times=[0.5]))
            sys.exit(130)
    r = RunResult(model=model, mode="forward_only" if args.get("forward_only") == "true"
                  else "training", batch_size=bs, global_batch_size=bs * gpus, num_devices=gpus,
                  image_size=size, precision=args.get("precision") or "fp32",
                  xla=args.get("xla") == "true", num_batches=int(args.get("num_batches", 10)))
    r.extra["device_name"] = "FakeGPU"
    speed = 100.0 * gpus * 0.9 ** (gpus.bit_length() - 1) * min(bs, 64) / 64
    speed *= 2.0 if r.precision == "fp16" else 1.0
    speed *= 1.25 if r.xla else 1.0
    speed *= (32.0 / size) ** 2
    if args.get("optimizer") == "adam":
        speed *= 0.5
    if model == "noisy":   # two repeats: batch 16 gives 469.5 then 302.9 (43%% apart)
        import os
        seen = os.path.join(os.path.dirname(args["csv_file"]), "seen-%%d" %% bs)
        again = os.path.exists(seen)
        open(seen, "w").close()
        speed = {16: (469.5, 302.9), 32: (380.0, 380.0), 64: (390.0, 392.0)}[bs][again]
    r.images_per_sec = speed
    r.extra["peak_mem_gb"] = bs * size * size / 1024.0 / 100
    if model == "oomrow":
        r.status, r.error, r.images_per_sec = "oom", "OOM when allocating tensor", 0.0
    csv_out.append_row(args["csv_file"], r)
    print("total images/sec: %%.2f" %% r.images_per_sec)
    if model == "oomrow":
        sys.exit(3)
    if model == "okthenfail":
        sys.exit(1)
""") % REPO


@pytest.fixture()
def child(tmp_path):
    path = tmp_path / "fake_child.py"
    path.write_text(FAKE_CHILD)
    return [sys.executable, str(path)]


def run_sweep(argv, child):
    out, err = io.StringIO(), io.StringIO()
    code = sweep_cli.run(argv, child_cmd=child, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --- whole sweeps with the fake child -------------------------------------------------------

def test_crash_oom_nan_are_isolated_and_the_study_goes_on(tmp_path, child):
    out_dir = tmp_path / "study"
    user_csv = tmp_path / "all.csv"
    code, out, err = run_sweep(
        ["--batch_size=64", "--sweep=model=trivial,crash,oomrow,nan,okthenfail,trivial2",
         "--out_dir=%s" % out_dir, "--csv_file=%s" % user_csv], child)
    assert code == errors.EXIT_INCOMPLETE
    # After every row and table: one line counting the points that did not finish ok.
    assert err.splitlines()[-1] == (
        "tfbench: error: 4 of 6 points did not finish ok (2 error, 1 oom, 1 nan); rows in "
        "%s, logs in %s" % (out_dir / "sweep.csv", out_dir / "logs"))
    rows = read_rows(out_dir / "sweep.csv")
    assert [(r["model"], r["status"]) for r in rows] == [
        ("trivial", "ok"), ("crash", "error"), ("oomrow", "oom"), ("nan", "nan"),
        ("okthenfail", "error"), ("trivial2", "ok")]
    crash = rows[1]
    assert crash["error"] == "RuntimeError: segfault-ish crash (exit code 1)"
    assert crash["batch_size"] == "64"
    assert rows[2]["error"] == "OOM when allocating tensor"
    assert "exited abnormally after writing its row" in rows[4]["error"]
    assert read_rows(user_csv) == rows
    # Each point's log is its own file, with the child's output.
    log = (out_dir / "logs" / "001_model-crash.log").read_text()
    assert "RuntimeError: segfault-ish crash" in log
    index = read_rows(out_dir / "points.csv")
    assert [(r["name"], r["status"], r["exit_code"]) for r in index][:2] == [
        ("000_model-trivial", "ok", "0"), ("001_model-crash", "error", "1")]
    assert "6/6 points | elapsed" in err and "| ETA 0:00:00 | done" in err
    points = tables.parse_markdown(out[out.index("## All points"):])
    assert [p["Status"] for p in points] == ["ok", "error", "oom", "nan", "error", "ok"]
    assert "4 of 6 runs not ok" in out


def test_scaling_study_weak_and_strong(tmp_path, child):
    code, out, _ = run_sweep(["--batch_size=64", "--sweep=num_gpus=1,2,4",
                              "--out_dir=%s" % (tmp_path / "weak")], child)
    assert code == 0
    table = tables.parse_markdown((tmp_path / "weak" / "scaling.md").read_text())
    assert [(r["Devices"], r["Global batch"], r["Images/sec"], r["Speed-up (x)"],
             r["Scaling efficiency (%)"]) for r in table] == [
        ("1", "64", "100.0", "1.00", "100.0"), ("2", "128", "180.0", "1.80", "90.0"),
        ("4", "256", "324.0", "3.24", "81.0")]
    assert "## Scaling efficiency" in out

    code, out, _ = run_sweep(["--batch_size=128", "--sweep=num_gpus=1,2,4", "--scaling=strong",
                              "--out_dir=%s" % (tmp_path / "strong")], child)
    table = tables.parse_markdown((tmp_path / "strong" / "scaling.md").read_text())
    # Global 128 kept: per device 128, 64, 32 -> 100, 180, 162 img/s.
    assert [(r["Batch/device"], r["Global batch"], r["Images/sec"], r["Scaling efficiency (%)"])
            for r in table] == [("128", "128", "100.0", "100.0"), ("64", "128", "180.0", "90.0"),
                                ("32", "128", "162.0", "40.5")]
    assert {r["Scaling"] for r in table} == {"strong"}


def test_batch_precision_resolution_studies_and_repeats(tmp_path, child):
    out_dir = tmp_path / "s"
    code, out, _ = run_sweep(["--sweep=batch_size=16,32,64,128", "--sweep=precision+xla="
                              "fp32+0,fp16+0,fp16+1", "--repeats=2",
                              "--out_dir=%s" % out_dir], child)
    assert code == 0
    assert len(read_rows(out_dir / "sweep.csv")) == 24
    batch = tables.parse_markdown((out_dir / "batch_size.md").read_text())
    fp32 = [r for r in batch if r["Precision"] == "fp32"]
    assert [(r["Batch/device"], r["% of best"], r["Knee"]) for r in fp32] == [
        ("16", "25.0", ""), ("32", "50.0", ""), ("64", "100.0", "yes"), ("128", "100.0", "")]
    assert "knee = smallest batch reaching 90% of the best throughput" in out
    matrix = tables.parse_markdown((out_dir / "precision.md").read_text())
    at64 = [(r["Execution"], r["Speed-up vs fp32 (x)"]) for r in matrix
            if r["Batch/device"] == "64"]
    assert at64 == [("fp32", "1.00"), ("fp16 mixed", "2.00"), ("fp16 mixed + XLA", "2.50")]

    code, out, _ = run_sweep(["--sweep=image_size=32,64,128",
                              "--out_dir=%s" % (tmp_path / "r")], child)
    res = tables.parse_markdown((tmp_path / "r" / "resolution.md").read_text())
    assert [(r["Image size (px)"], r["Pixels (rel.)"], r["Images/sec (rel.)"],
             r["Peak memory (rel.)"]) for r in res] == [
        ("32", "1.00", "1.000", "1.000"), ("64", "4.00", "0.250", "4.000"),
        ("128", "16.00", "0.062", "16.000")]


def test_repeats_show_their_spread_and_an_unstable_knee_says_so(tmp_path, child):
    """Two repeats 43% apart at batch 16: the summary, the CSV table and the report show the
    median with min-max, spread and the stable verdict of tfbench evaluate, and the knee (batch
    16 here) is marked unstable."""
    from tfbench.report import build
    out_dir = tmp_path / "s"
    code, out, _ = run_sweep(["--model=noisy", "--sweep=batch_size=16,32,64", "--repeats=2",
                              "--out_dir=%s" % out_dir], child)
    assert code == 0
    shown = [(r["Batch/device"], r["Images/sec"], r["Min images/sec"], r["Max images/sec"],
              r["Repeats"], r["Spread (%)"], r["Stable?"], r["Knee"])
             for r in tables.parse_markdown(out[out.index("## Batch-size study"):])]
    expected = [("16", "386.2", "302.9", "469.5", "2", "43.1", "no", "yes"),
                ("32", "380.0", "380.0", "380.0", "2", "0.0", "yes", ""),
                ("64", "391.0", "390.0", "392.0", "2", "0.5", "yes", "")]
    assert shown == expected
    assert "knee = smallest batch reaching 90% of the best throughput: model=noisy, " \
        "device_name=FakeGPU: batch 16 (UNSTABLE: spread 43.1% over 2 repeats), best batch 64" \
        in out
    assert "stable as in tfbench evaluate (unstable above 10%). Unstable: model=noisy, " \
        "device_name=FakeGPU, batch_size=16 (spread 43.1% over 2 repeats)" in out
    table = read_rows(out_dir / "batch_size.csv")
    assert [(r["batch_size"], r["spread_pct"][:4], r["stable"]) for r in table] == [
        ("16", "43.1", "no"), ("32", "0.0", "yes"), ("64", "0.51", "yes")]
    report = build.build_report([str(out_dir / "sweep.csv")], str(tmp_path / "report"))
    md = open(report.markdown_path).read()
    in_report = [(r["Batch/device"], r["Images/sec"], r["Min images/sec"], r["Max images/sec"],
                  r["Repeats"], r["Spread (%)"], r["Stable?"], r["Knee"])
                 for r in tables.parse_markdown(md[md.index("## Batch-size study"):])]
    assert in_report == expected


def test_the_readmes_sweep_then_report_pair_gives_the_study(tmp_path, child, capsys):
    """README: `tfbench sweep --model=resnet50 --sweep=batch_size=16,32,64,128 --repeats=3`,
    then `tfbench report tfbench_results.csv --out report/`: the sweep's rows are in
    tfbench_results.csv (as a run's are), so the report holds the batch-size study."""
    from tfbench import cli
    with open(os.path.join(REPO, "README.md")) as handle:
        readme = handle.read()
    assert "tfbench sweep --model=resnet50 --sweep=batch_size=16,32,64,128 --repeats=3" in readme
    assert "tfbench report tfbench_results.csv --out report/" in readme
    code, _, _ = run_sweep(["--model=resnet50", "--sweep=batch_size=16,32,64,128",
                            "--repeats=3", "--out_dir=study"], child)
    assert code == 0
    assert len(read_rows(tmp_path / "tfbench_results.csv")) == 12
    assert cli.main(["tfbench", "report", "tfbench_results.csv", "--out", "report/"]) == 0
    printed = capsys.readouterr().out
    assert " in report/plots\n" in printed and "//" not in printed
    report = (tmp_path / "report" / "report.md").read_text()
    study = tables.parse_markdown(report[report.index("## Batch-size study"):])
    assert [(r["Batch/device"], r["Repeats"], r["Knee"]) for r in study] == [
        ("16", "3", ""), ("32", "3", ""), ("64", "3", "yes"), ("128", "3", "")]


def test_swept_flag_without_csv_column_keeps_points_apart(tmp_path, child):
    code, out, _ = run_sweep(["--sweep=optimizer=sgd,adam", "--sweep=num_gpus=1,2",
                              "--out_dir=%s" % (tmp_path / "o")], child)
    table = tables.parse_markdown((tmp_path / "o" / "scaling.md").read_text())
    assert [(r["optimizer"], r["Devices"], r["Images/sec"]) for r in table] == [
        ("sgd", "1", "50.0"), ("sgd", "2", "90.0"), ("adam", "1", "25.0"), ("adam", "2", "45.0")]


def test_usage_error_in_first_point_stops_the_study(tmp_path, child):
    with pytest.raises(errors.UsageError, match="first point failed with a usage error: "
                                                 "tfbench: error: --model=usage"):
        run_sweep(["--sweep=model=usage,trivial", "--out_dir=%s" % (tmp_path / "u")], child)
    assert len(read_rows(tmp_path / "u" / "sweep.csv")) == 1


def test_a_point_whose_flags_the_child_would_refuse_stops_the_sweep_before_it_runs(tmp_path,
                                                                                  child):
    with pytest.raises(errors.UsageError, match="point 001_precision-fp32: --use_fp16 asks for "
                                                 "fp16 but --precision=fp32"):
        run_sweep(["--use_fp16", "--sweep=precision=fp16,fp32",
                   "--out_dir=%s" % (tmp_path / "u")], child)
    assert not (tmp_path / "u" / "sweep.csv").exists()


def test_existing_out_dir_is_refused(tmp_path, child):
    run_sweep(["--sweep=model=trivial", "--out_dir=%s" % tmp_path], child)
    with pytest.raises(errors.UsageError, match="already holds a sweep"):
        run_sweep(["--sweep=model=trivial", "--out_dir=%s" % tmp_path], child)


def test_timeout_marks_the_point(tmp_path, child):
    code, out, _ = run_sweep(["--sweep=model=sleep,trivial", "--point_timeout_sec=1",
                              "--out_dir=%s" % tmp_path], child)
    rows = read_rows(tmp_path / "sweep.csv")
    assert rows[0]["status"] == "error" and rows[0]["error"].startswith("timed out after")
    assert rows[1]["status"] == "ok"


def test_cli_usage_errors():
    with pytest.raises(errors.UsageError, match="give at least one --sweep"):
        sweep_cli.build(["--model=x"])
    with pytest.raises(errors.UsageError, match="unexpected argument 'oops'"):
        sweep_cli.build(["--sweep=model=a", "--model=x", "oops"])
    _, engine = sweep_cli.build(["--sweep=model=a", "--model", "x", "--repeats=3"])
    assert engine.config.base_flags == ["--model", "x"] and engine.config.repeats == 3


def test_main_reports_usage_errors(capsys):
    assert sweep_cli.main(["--sweep=bogus=1"]) == errors.EXIT_USAGE
    assert "tfbench: error: --sweep: unknown flag 'bogus'" in capsys.readouterr().err


def test_sweep_presets_build():
    preset_dir = os.path.join(REPO, "flags", "sweeps")
    presets = sorted(f for f in os.listdir(preset_dir) if f.endswith(".flags"))
    assert {"precision_matrix.flags", "batch_size_study.flags", "resolution_study.flags",
            "max_batch_size.flags"} <= set(presets)
    for name in presets:
        args, engine = sweep_cli.build(["--flagfile=" + os.path.join(preset_dir, name)])
        assert engine.config.axes or args.find_max_batch_size
    _, engine = sweep_cli.build(["--flagfile=" + os.path.join(preset_dir,
                                                              "precision_matrix.flags")])
    points = grid.expand_grid(engine.config.axes)
    assert [p.name for p in points][:2] == ["000_precision-fp32_xla-false",
                                           "001_precision-fp16_xla-false"]
    assert len(points) == 6


def test_interrupt_stops_the_child_keeps_its_row_and_writes_the_tables(tmp_path, child,
                                                                       monkeypatch):
    real_wait = subprocess.Popen.wait
    calls = []

    def wait(self, timeout=None):
        # Ctrl-C arrives while the second point ('sleep') is running.
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    code, out, err = run_sweep(["--sweep=model=trivial,sleep,trivial2",
                                "--out_dir=%s" % tmp_path], child)
    assert code == errors.EXIT_SIGINT
    rows = read_rows(tmp_path / "sweep.csv")
    assert [(r["model"], r["status"]) for r in rows] == [("trivial", "ok"),
                                                         ("sleep", "interrupted")]
    # The point the signal stopped did not finish; the sweep ends as a run does on a signal.
    assert "sweep interrupted; writing the tables for the 1 finished run(s)" in err
    assert err.splitlines()[-1] == "tfbench: error: interrupted by SIGINT; rows in %s, logs in " \
        "%s" % (tmp_path / "sweep.csv", tmp_path / "logs")
    assert [l for l in err.splitlines() if l.startswith("tfbench: error:")] == \
        err.splitlines()[-1:]
    assert (tmp_path / "summary.md").exists() and "## All points" in out


def test_a_point_stopped_in_warm_up_has_no_images_per_sec(tmp_path, child, monkeypatch):
    real_wait = subprocess.Popen.wait
    calls = []

    def wait(self, timeout=None):
        # Ctrl-C once the second point ('warmup') is in its warm-up.
        calls.append(1)
        if len(calls) == 2:
            deadline = time.monotonic() + 60
            while not (tmp_path / "points" / "warming-up").exists() and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    code, out, err = run_sweep(["--sweep=model=trivial,warmup,trivial2",
                                "--out_dir=%s" % tmp_path], child)
    assert code == errors.EXIT_SIGINT
    rows = read_rows(tmp_path / "sweep.csv")
    assert [(r["model"], r["status"], r["steps_run"]) for r in rows] == [
        ("trivial", "ok", "0"), ("warmup", "interrupted", "0")]
    # No timed step, no figure: an empty cell (never 0), in the rows and in the tables.
    assert float(rows[0]["images_per_sec"]) > 0 and rows[1]["images_per_sec"] == ""
    points = read_rows(tmp_path / "points.csv")
    assert [r["images_per_sec"] for r in points][1] == ""
    table = [l.split("|")[1:-1] for l in out.splitlines() if l.startswith("| 00")]
    header = next(l.split("|")[1:-1] for l in out.splitlines() if "| Point" in l)
    column = [h.strip() for h in header].index("Images/sec")
    assert [bool(row[column].strip()) for row in table] == [True, False]
    assert "sweep interrupted; writing the tables for the 1 finished run(s)" in err


def test_the_tables_read_the_points_flags_not_the_base_flags_alone(tmp_path, child):
    # --saved_model alone is no run (it needs --forward_only); every point of this sweep is one,
    # and the tables after them must not refuse the base flags.
    code, out, err = run_sweep(["--saved_model", "--sweep=forward_only=true",
                                "--out_dir=%s" % tmp_path, "--csv_file="], child)
    assert code == 0, err
    assert "## All points" in out and (tmp_path / "summary.md").exists()


def test_exit_code_is_1_when_no_point_succeeds(tmp_path, child):
    code, out, err = run_sweep(["--sweep=model=crash,nan", "--out_dir=%s" % tmp_path], child)
    assert code == errors.EXIT_RUN_ERROR
    assert err.splitlines()[-1] == (
        "tfbench: error: no point finished ok (1 error, 1 nan); rows in %s, logs in %s"
        % (tmp_path / "sweep.csv", tmp_path / "logs"))
    assert "## All points" in out
