"""Sweep engine: grid expansion, point naming, child isolation (fake child), study outputs."""

import csv
import io
import os
import sys
import textwrap

import pytest

from tfbench import errors
from tfbench.sweep import study as sweep
from tfbench.cli import sweep as sweep_cli
from tfbench.report import tables

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A stand-in for `python -m tfbench`: parses --k=v flags, behaves by --model, writes its row with
# csv_out like the real runner. Throughput: 100 img/s per device at batch >= 64 (less below),
# x0.9 per doubling of devices; fp16 x2, xla x1.25; halves per doubling of image size.
FAKE_CHILD = textwrap.dedent("""\
    import signal, sys, time
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


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# --- grid ---------------------------------------------------------------------------------

def test_parse_axis_values_and_zipped_keys():
    axis = sweep.parse_axis("num_gpus=1,2,4")
    assert axis.keys == ("num_gpus",) and axis.values == (("1",), ("2",), ("4",))
    zipped = sweep.parse_axis("precision+xla=fp32+0,fp16+1")
    assert zipped.keys == ("precision", "xla")
    assert zipped.values == (("fp32", "false"), ("fp16", "true"))
    assert sweep.parse_axis("data_dir=,/data/imagenet").values == (("",), ("/data/imagenet",))


@pytest.mark.parametrize("text, message", [
    ("num_gpus", "expected KEY=V1,V2"),
    ("no_such_flag=1,2", "unknown flag 'no_such_flag'"),
    ("num_gpus=1,two", "'two' is not an int"),
    ("precision=fp32,fp8", "'fp8' is not one of fp32, fp16, bf16"),
    ("xla=maybe", "'maybe' is not true/false"),
    ("csv_file=a.csv", "csv_file is set by the sweep itself"),
    ("precision+xla=fp32", "needs 2 '+'-separated values"),
])
def test_parse_axis_errors(text, message):
    with pytest.raises(errors.UsageError, match=message.replace("+", r"\+")):
        sweep.parse_axis(text)


def test_grid_order_names_and_repeats():
    axes = [sweep.parse_axis("model=trivial,resnet50"), sweep.parse_axis("batch_size=32,64")]
    points = sweep.expand_grid(axes)
    assert [p.name for p in points] == [
        "000_model-trivial_batch_size-32", "001_model-trivial_batch_size-64",
        "002_model-resnet50_batch_size-32", "003_model-resnet50_batch_size-64"]
    assert points[3].flags == {"model": "resnet50", "batch_size": "64"}
    repeated = sweep.expand_grid(axes[:1], repeats=2)
    # Interleaved: every point once, then every point again.
    assert [(p.index, p.repeat, p.name) for p in repeated] == [
        (0, 1, "000_model-trivial_r1"), (1, 1, "001_model-resnet50_r1"),
        (0, 2, "000_model-trivial_r2"), (1, 2, "001_model-resnet50_r2")]


def test_point_name_slugs_paths_and_empty_values():
    assert sweep.point_name(7, {"data_dir": "/data/imagenet/"}) == "007_data_dir-imagenet"
    assert sweep.point_name(1, {"data_dir": ""}) == "001_data_dir-default"
    assert sweep.point_name(2, {"data_name": "tfds:cifar10"}) == "002_data_name-tfds-cifar10"


def test_swept_twice_is_an_error():
    axes = [sweep.parse_axis("model=a,b"), sweep.parse_axis("model+batch_size=c+1")]
    with pytest.raises(errors.UsageError, match="model swept more than once"):
        sweep.expand_grid(axes)


def test_strong_scaling_divides_the_global_batch():
    axes = [sweep.parse_axis("num_gpus=1,2,4")]
    points = sweep.expand_grid(axes, scaling="strong", base_flags=["--batch_size=256"])
    assert [p.flags["batch_size"] for p in points] == ["256", "128", "64"]
    weak = sweep.expand_grid(axes, base_flags=["--batch_size=256"])
    assert all("batch_size" not in p.flags for p in weak)


def test_strong_scaling_global_batch_is_the_parsed_batch_size():
    # absl takes -flag as well as --flag; the child would run batch 256 / num_gpus.
    axes = [sweep.parse_axis("num_gpus=1,2,4")]
    points = sweep.expand_grid(axes, scaling="strong", base_flags=["-batch_size=256"])
    assert [p.flags["batch_size"] for p in points] == ["256", "128", "64"]


def test_strong_scaling_errors():
    axes = [sweep.parse_axis("num_gpus=1,3")]
    with pytest.raises(errors.UsageError, match="not divisible by num_gpus=3"):
        sweep.expand_grid(axes, scaling="strong", base_flags=["--batch_size=64"])
    with pytest.raises(errors.UsageError, match="needs --batch_size"):
        sweep.expand_grid(axes, scaling="strong")
    with pytest.raises(errors.UsageError, match="needs --sweep=num_gpus"):
        sweep.expand_grid([sweep.parse_axis("batch_size=1,2")], scaling="strong")


def test_child_args_replace_swept_flags_and_set_outputs():
    point = sweep.expand_grid([sweep.parse_axis("batch_size=64"),
                               sweep.parse_axis("xla=false")])[0]
    base = ["--model=resnet50", "--batch_size", "32", "--xla", "--csv_file=mine.csv",
            "--device=cpu"]
    args = sweep.child_args(point, base, "/o/points/x.csv", "/o/runs")
    assert args == ["--model=resnet50", "--device=cpu", "--batch_size=64", "--xla=false",
                    "--csv_file=/o/points/x.csv", "--json_dir=/o/runs"]


def test_child_params_parse_flags_as_the_cli_does():
    p = sweep.child_params(["--model=a", "--batch_size", "8", "-xla_compile", "--use_fp16",
                            "--noforward_only"])
    assert (p.model, p.batch_size, p.xla_compile, p.forward_only) == ("a", 8, True, False)
    with pytest.raises(errors.UsageError, match="--use_fp16 asks for fp16"):
        sweep.child_params(["--use_fp16", "--precision=fp32"])


def test_flagfile_expansion(tmp_path):
    inner = tmp_path / "inner.flags"
    inner.write_text("--device=cpu\n")
    outer = tmp_path / "outer.flags"
    outer.write_text("# a preset\n--sweep=num_gpus=1,2\n\n// more\n--flagfile=%s\n" % inner)
    assert sweep.expand_flagfiles(["--model=x", "--flagfile=%s" % outer]) == [
        "--model=x", "--sweep=num_gpus=1,2", "--device=cpu"]
    with pytest.raises(errors.UsageError, match="cannot read --flagfile"):
        sweep.expand_flagfiles(["--flagfile=%s" % (tmp_path / "missing")])


# --- failure classification ----------------------------------------------------------------

@pytest.mark.parametrize("code, tail, status", [
    (3, "whatever", "oom"),
    (1, "Traceback\nMemoryError", "oom"),
    (-6, "terminate called after throwing an instance of 'std::bad_alloc'", "oom"),
    (-9, "", "oom"),
    (4, "loss is NaN", "nan"),
    (130, "", "interrupted"),
    (-15, "", "interrupted"),
    (1, "RuntimeError: boom", "error"),
    (-11, "", "error"),
])
def test_classify_failure(code, tail, status):
    assert sweep.classify_failure(sweep.ChildOutcome(code, 1.0), tail)[0] == status


@pytest.mark.parametrize("code", [-9, -2, 130, 1])
def test_a_child_stopped_with_an_interrupted_sweep_is_interrupted_not_oom(code):
    outcome = sweep.ChildOutcome(code, 1.0, interrupted=KeyboardInterrupt())
    status, error = sweep.classify_failure(outcome, "Running warm up\n")
    assert status == "interrupted"
    assert error.startswith("stopped with the interrupted sweep (")
    assert error.endswith("); last output: Running warm up")
    assert ("killed by SIGKILL" in error) == (code == -9)


def test_abort_under_a_memory_cap_is_oom():
    tail = "terminate called after throwing an instance of 'dnnl::error'\n  what():  could not" \
        " create a primitive"
    outcome = sweep.ChildOutcome(-6, 1.0)
    assert sweep.classify_failure(outcome, tail)[0] == "error"
    status, error = sweep.classify_failure(outcome, tail, memory_capped=True)
    assert status == "oom"
    assert error == "killed by SIGABRT under the memory cap (allocation failure): what():  " \
                    "could not create a primitive"


def test_classify_failure_message_has_last_line_and_exit_code():
    status, error = sweep.classify_failure(sweep.ChildOutcome(1, 1.0), "a\nRuntimeError: x\n\n")
    assert (status, error) == ("error", "RuntimeError: x (exit code 1)")


def test_failure_row_describes_the_configuration():
    row = sweep.failure_row(["--model=vgg16", "--batch_size=16", "--num_gpus=2",
                             "--use_fp16", "--forward_only=true"], "oom", "boom", "cmd")
    assert (row["model"], row["batch_size"], row["global_batch_size"], row["num_devices"],
            row["precision"], row["mode"], row["status"], row["error"]) == \
        ("vgg16", "16", "32", "2", "fp16", "forward_only", "oom", "boom")
    assert row["run_id"] and row["images_per_sec"] == ""


def test_failure_row_reads_the_flags_as_the_child_does():
    # The child's parser (absl) takes -flag too; the row says what the child would have run.
    row = sweep.failure_row(["-model=vgg16", "-use_fp16", "-xla_compile", "--batch_size", "8"],
                            "oom", "boom", "cmd")
    assert (row["model"], row["precision"], row["xla"], row["batch_size"]) == \
        ("vgg16", "fp16", "1", "8")
    row = sweep.failure_row(["--model=vgg16", "--xla=false", "--xla_compile"], "oom", "", "c")
    assert row["xla"] == "1"   # --xla or its legacy spelling --xla_compile


# --- progress ------------------------------------------------------------------------------

def test_progress_line_and_eta():
    progress = sweep.Progress(4, io.StringIO(), width=8)
    progress.start = 0.0
    assert progress.line("p0", now=0.0) == \
        "[........] 0/4 points | elapsed 0:00:00 | ETA --:--:-- | p0"
    progress.finished(10.0)
    progress.finished(20.0)
    assert progress.line("p2", now=30.0) == \
        "[####....] 2/4 points | elapsed 0:00:30 | ETA 0:00:30 | p2"


# --- whole sweeps with the fake child -------------------------------------------------------

def test_crash_oom_nan_are_isolated_and_the_study_goes_on(tmp_path, child):
    out_dir = tmp_path / "study"
    user_csv = tmp_path / "all.csv"
    code, out, err = run_sweep(
        ["--batch_size=64", "--sweep=model=trivial,crash,oomrow,nan,okthenfail,trivial2",
         "--out_dir=%s" % out_dir, "--csv_file=%s" % user_csv], child)
    assert code == 0
    rows = read_csv(out_dir / "sweep.csv")
    assert [(r["model"], r["status"]) for r in rows] == [
        ("trivial", "ok"), ("crash", "error"), ("oomrow", "oom"), ("nan", "nan"),
        ("okthenfail", "error"), ("trivial2", "ok")]
    crash = rows[1]
    assert crash["error"] == "RuntimeError: segfault-ish crash (exit code 1)"
    assert crash["batch_size"] == "64"
    assert rows[2]["error"] == "OOM when allocating tensor"
    assert "exited abnormally after writing its row" in rows[4]["error"]
    assert read_csv(user_csv) == rows
    # Each point's log is its own file, with the child's output.
    log = (out_dir / "logs" / "001_model-crash.log").read_text()
    assert "RuntimeError: segfault-ish crash" in log
    index = read_csv(out_dir / "points.csv")
    assert [(r["name"], r["status"], r["exit_code"]) for r in index][:2] == [
        ("000_model-trivial", "ok", "0"), ("001_model-crash", "error", "1")]
    assert "[########################] 6/6 points" in err and "ETA" in err
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
    assert len(read_csv(out_dir / "sweep.csv")) == 24
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
    assert len(read_csv(tmp_path / "u" / "sweep.csv")) == 1


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
    rows = read_csv(tmp_path / "sweep.csv")
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
    assert "tfbench sweep: error: --sweep: unknown flag 'bogus'" in capsys.readouterr().err


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
    points = sweep.expand_grid(engine.config.axes)
    assert [p.name for p in points][:2] == ["000_precision-fp32_xla-false",
                                           "001_precision-fp16_xla-false"]
    assert len(points) == 6


def test_interrupt_stops_the_child_keeps_its_row_and_writes_the_tables(tmp_path, child,
                                                                       monkeypatch):
    real_wait = sweep.subprocess.Popen.wait
    calls = []

    def wait(self, timeout=None):
        # Ctrl-C arrives while the second point ('sleep') is running.
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(sweep.subprocess.Popen, "wait", wait)
    code, out, err = run_sweep(["--sweep=model=trivial,sleep,trivial2",
                                "--out_dir=%s" % tmp_path], child)
    assert code == errors.EXIT_SIGINT
    rows = read_csv(tmp_path / "sweep.csv")
    assert [(r["model"], r["status"]) for r in rows] == [("trivial", "ok"),
                                                         ("sleep", "interrupted")]
    assert "sweep interrupted; writing the tables for the 2 finished run(s)" in err
    assert (tmp_path / "summary.md").exists() and "## All points" in out


def test_exit_code_is_1_when_no_point_succeeds(tmp_path, child):
    code, out, err = run_sweep(["--sweep=model=crash,nan", "--out_dir=%s" % tmp_path], child)
    assert code == errors.EXIT_RUN_ERROR
    assert "no point ran successfully" in err and "## All points" in out
