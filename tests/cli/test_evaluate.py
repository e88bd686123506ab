"""`tfbench evaluate` with a fake child (tfbench.cli.evaluate over tfbench.sweep.evaluation): one
directory, progress, resuming an interrupted evaluation, refusing other settings, failed runs,
and `tfbench compare DIR_A DIR_B` over two evaluations."""

import io
import os
import subprocess

import pytest

from evaluation_fakes import A100, fake_child
from tfbench import errors
from tfbench.cli import compare as compare_cli
from tfbench.cli import evaluate as cli
from tfbench.measure import tensorrt
from tfbench.report import compare, tables
from helpers import read_rows

pytestmark = pytest.mark.slow

SMALL = ["--models=resnet50,vit_tiny", "--browser_check=no"]


@pytest.fixture()
def child(tmp_path):
    return fake_child(tmp_path)


def evaluate(argv, child, gpus=(1, "")):
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(argv, child_cmd=child, stdout=out, stderr=err, gpus=gpus)
    return code, out.getvalue(), err.getvalue()


def rows(out):
    return read_rows(os.path.join(out, "evaluation.csv"))


def test_one_directory_holds_rows_logs_manifests_and_the_report(tmp_path, child):
    out = str(tmp_path / "ev")
    code, stdout, stderr = evaluate(SMALL + ["--out_dir=" + out], child)
    assert code == 0, stderr
    assert len(rows(out)) == 12
    assert sorted(os.listdir(out)) == ["evaluation.csv", "evaluation.json",
                                       "logs", "points", "points.csv", "report", "runs"]
    assert len(os.listdir(os.path.join(out, "logs"))) == 12
    assert len(os.listdir(os.path.join(out, "runs"))) == 12
    assert "mixed precision: fp16 (1 NVIDIA GPU visible)" in stderr
    if tensorrt.unavailable_reasons(tensorrt.read(), "gpu"):   # pip TensorFlow >= 2.18
        assert ("tfbench evaluate: TF-TRT mode left out: %s"
                % "; ".join(tensorrt.unavailable_reasons(tensorrt.read(), "gpu"))
                in stderr.splitlines())
    assert "12 of 12 runs to do (0 already finished)" in stderr
    assert "12/12 runs" in stderr and "ETA" in stderr
    lines = stdout.splitlines()
    assert lines[0] == "Results: one row per model and device (native fp32)"
    assert lines[2].split()[:3] == ["Model", "Device", "Training"]
    # resnet50 is v1 and NVIDIA's published TF figures are v1.5: no verdict (like with like)
    assert any(ln.startswith("resnet50") and "900.0" in ln and "within" not in ln
               for ln in lines)
    assert "browser check: skipped (--browser_check=no)" in stdout
    md = open(os.path.join(out, "report", "report.md")).read()
    assert tables.parse_markdown(md)[0]["Training images/sec"] == "900.0"
    assert "Mixed precision: fp16 (training with dynamic loss scaling), chosen automatically: " \
           "1 NVIDIA GPU visible" in md
    assert "Command: tfbench evaluate --models=resnet50,vit_tiny" in md


def test_an_interrupted_evaluation_continues_where_it_stopped(tmp_path, child, monkeypatch):
    out = str(tmp_path / "ev")
    real_wait = subprocess.Popen.wait
    calls = []

    def wait(self, timeout=None):
        # Ctrl-C while the third run is on (the children's waits only: platform.processor(),
        # say, waits for `uname -p` the first time a process asks).
        if child[-1] in self.args:
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    code, stdout, stderr = evaluate(SMALL + ["--out_dir=" + out], child)
    monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
    assert code == errors.EXIT_SIGINT
    assert [r["status"] for r in rows(out)] == ["ok", "ok", "interrupted"]
    assert "interrupted; the same command continues it" in stderr
    assert "Results: one row per model and device" in stdout   # the report of what finished
    # The last line, as a run and a sweep end on a signal.
    assert stderr.splitlines()[-1] == (
        "tfbench: error: interrupted by SIGINT; the same command continues it; rows in %s, "
        "logs in %s" % (os.path.join(out, "evaluation.csv"), os.path.join(out, "logs")))
    code, stdout, stderr = evaluate(SMALL + ["--out_dir=" + out], child)
    assert code == 0
    assert "10 of 12 runs to do (2 already finished)" in stderr
    names = [r["model"] + r["mode"] + r["precision"] + r["xla"] for r in rows(out)]
    assert len(names) == 13 and len(set(names)) == 12       # none of the first two ran again
    code, stdout, stderr = evaluate(SMALL + ["--out_dir=" + out], child)
    assert code == 0 and "every run of the plan has finished; writing the report" in stderr
    assert len(rows(out)) == 13


def test_another_command_line_in_the_directory_is_refused(tmp_path, child, capsys):
    out = str(tmp_path / "ev")
    assert evaluate(SMALL + ["--out_dir=" + out, "--modes=native"], child)[0] == 0
    before = rows(out)
    code = cli.main(SMALL + ["--out_dir=" + out, "--modes=native,mixed", "--num_gpus=2"])
    err = capsys.readouterr().err
    assert code == errors.EXIT_USAGE and len(err.strip().splitlines()) == 1
    assert err.startswith("tfbench: error: %s holds an evaluation with other settings "
                          "(--modes native,mixed here, native there; flags for every run: "
                          "--num_gpus=2 here, not there)" % out)
    assert rows(out) == before


def test_fp16_chosen_for_a_gpu_tensorflow_cannot_use_stops_at_the_first_run(tmp_path, child,
                                                                             monkeypatch):
    """NVML sees a GPU, TensorFlow does not (a CPU-only wheel, CUDA libraries missing): the
    runs would be fp16 on the CPU."""
    out = str(tmp_path / "ev")
    monkeypatch.setenv("FAKE_DEVICE", "AMD EPYC")
    with pytest.raises(errors.UsageError) as exc:
        evaluate(SMALL + ["--out_dir=" + out], child, gpus=(1, ""))
    assert str(exc.value).startswith(
        "--mixed_precision=auto chose fp16 (NVML: 1 NVIDIA GPU visible), but TensorFlow ran "
        "resnet50_native_training on the CPU (log: %s" % os.path.join(out, "logs"))
    assert "pip install \".[gpu]\"" in str(exc.value)
    # The row measured is kept apart from the evaluation's ...
    assert "its row is in %s.cpu" % os.path.join(out, "evaluation.csv") in str(exc.value)
    assert [r["device_kind"] for r in read_rows(os.path.join(out, "evaluation.csv.cpu"))] == [
        "cpu"]
    # ... so that, once TensorFlow uses the GPU, the same command starts over.
    monkeypatch.delenv("FAKE_DEVICE")
    code, _, stderr = evaluate(SMALL + ["--out_dir=" + out], child, gpus=(1, ""))
    assert code == 0 and "12 of 12 runs to do (0 already finished)" in stderr
    assert [r["device_kind"] for r in rows(out)] == ["gpu"] * 12
    # Chosen by the user, or bf16 for a machine without a GPU: nothing is assumed.
    for argv, gpus in ((["--mixed_precision=fp16"], (1, "")), ([], (0, "no driver"))):
        directory = str(tmp_path / ("ev%d" % gpus[0]))
        assert evaluate(SMALL + ["--out_dir=" + directory, "--modes=native"] + argv, child,
                        gpus=gpus)[0] == 0


def test_where_tf_trt_runs_its_latency_is_a_mode_matrix_column(tmp_path, child):
    out = str(tmp_path / "ev")
    argv = SMALL + ["--out_dir=" + out, "--models=resnet50", "--modes=native,tftrt"]
    available = tensorrt.TensorRT("2.17.0", True, (10, 8, 0), True, (10, 8, 0))
    code, stdout, stderr = _evaluate_with(argv, child, lambda: available)
    assert code == 0, stderr
    assert "3 of 3 runs to do" in stderr and "TF-TRT" not in stderr
    got = [(r["precision"], r["trt_mode"], r["mode"]) for r in rows(out)]
    assert got == [("fp32", "", "training"), ("fp32", "", "forward_only"),
                   ("fp32", "FP16", "forward_only")]
    md = open(os.path.join(out, "report", "report.md")).read()
    assert "Mode matrix: training" not in md   # one training mode: nothing to compare
    (matrix,) = tables.parse_markdown(md.split("Mode matrix: inference p50 latency")[1])
    assert (matrix["native fp32: p50 ms"], matrix["TF-TRT FP16: p50 ms"],
            matrix["TF-TRT FP16: speed-up (x)"]) == ("5.00", "1.25", "4.00")
    # Asked for alone where it cannot run: refused, nothing runs.
    with pytest.raises(errors.UsageError, match=r"--modes=tftrt: TF-TRT cannot run here \(no "
                                                r"NVIDIA GPU visible \(no driver\)"):
        evaluate(SMALL + ["--out_dir=" + str(tmp_path / "none"), "--modes=tftrt"], child,
                 gpus=(0, "no driver"))
    assert not (tmp_path / "none").exists()


def _evaluate_with(argv, child, reader):
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(argv, child_cmd=child, stdout=out, stderr=err, gpus=(1, ""),
                   tensorrt_reader=reader)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("flag", ["--num_gpus=2", "--gpu_indices=0,1"])
def test_training_on_several_gpus_says_inference_uses_one(tmp_path, child, flag):
    code, _, stderr = evaluate(SMALL + ["--out_dir=" + str(tmp_path / "ev"), "--modes=native",
                                        "--models=resnet50", flag], child)
    assert code == 0, stderr
    assert ("tfbench evaluate: training runs use --num_gpus or --gpu_indices; inference runs at "
            "batch 1 use one device") in stderr.splitlines()


def test_a_failing_model_is_marked_and_the_rest_goes_on(tmp_path, child, monkeypatch):
    out = str(tmp_path / "ev")
    monkeypatch.setenv("FAKE_FAIL", "vit_tiny")
    code, stdout, stderr = evaluate(SMALL + ["--out_dir=" + out, "--modes=native"], child)
    assert code == errors.EXIT_INCOMPLETE
    assert [(r["model"], r["status"]) for r in rows(out)] == [
        ("resnet50", "ok"), ("resnet50", "ok"), ("vit_tiny", "error"), ("vit_tiny", "error")]
    assert "## Failed runs" in open(os.path.join(out, "report", "report.md")).read()
    # After the report: one line counting the runs that did not finish ok.
    incomplete = ("tfbench: error: 2 of 4 runs did not finish ok (2 error); rows in %s, logs "
                  "in %s" % (os.path.join(out, "evaluation.csv"), os.path.join(out, "logs")))
    assert stderr.splitlines()[-1] == incomplete
    monkeypatch.delenv("FAKE_FAIL")
    code, _, stderr = evaluate(SMALL + ["--out_dir=" + out, "--modes=native"], child)
    assert "every run of the plan has finished" in stderr
    # The evaluation is its directory: its failed runs count until they run again.
    assert code == errors.EXIT_INCOMPLETE and stderr.splitlines()[-1] == incomplete
    code, _, stderr = evaluate(SMALL + ["--out_dir=" + out, "--modes=native", "--rerun_failed"],
                               child)
    assert code == 0 and "2 of 4 runs to do" in stderr
    assert [r["status"] for r in rows(out)][-2:] == ["ok", "ok"]


def test_unstable_configurations_are_said_and_run_again_when_asked(tmp_path, child,
                                                                   monkeypatch):
    argv = SMALL + ["--out_dir=%s" % (tmp_path / "ev"), "--modes=native"]
    monkeypatch.setenv("FAKE_UNSTABLE", "vit_tiny")
    code, stdout, stderr = evaluate(argv, child)
    assert code == 0
    assert "2 of 4 configurations unstable (repeats spread above the threshold)" in stderr
    assert [ln.split()[-1] for ln in stdout.splitlines() if ln.startswith(("resnet50",
                                                                          "vit_tiny"))] == \
        ["yes", "no"]
    monkeypatch.delenv("FAKE_UNSTABLE")
    code, stdout, stderr = evaluate(argv + ["--rerun_unstable"], child)
    assert code == 0 and "2 of 4 runs to do (2 already finished)" in stderr
    assert "configurations unstable" not in stderr


def test_no_successful_run_exits_1_and_other_settings_may_start_over(tmp_path, child,
                                                                       monkeypatch):
    out = tmp_path / "ev"
    argv = ["--models=resnet50", "--modes=native", "--browser_check=no", "--out_dir=%s" % out]
    monkeypatch.setenv("FAKE_FAIL", "resnet50")
    code, _, stderr = evaluate(argv, child)
    assert code == errors.EXIT_RUN_ERROR
    assert stderr.splitlines()[-1] == (
        "tfbench: error: no run finished ok (2 error); rows in %s, logs in %s"
        % (out / "evaluation.csv", out / "logs"))
    monkeypatch.delenv("FAKE_FAIL")
    code, _, stderr = evaluate(argv + ["--seed=7"], child)    # nothing measured: start over
    assert code == 0 and "and no successful run; starting over" in stderr
    assert [r["status"] for r in rows(str(out))] == ["ok", "ok"]
    assert (out / "evaluation.csv.replaced").exists()


def test_usage_errors_are_one_line_before_anything_runs(tmp_path, capsys):
    for argv, text in (
            (["--batch_size=64"], "--batch_size is set by the evaluation method; use "
                                  "--train_batch_size"),
            (["--modes=native,turbo"], "--modes: turbo is not one of native, mixed, mixed_xla"),
            (["--models=resnet50,resnet50"], "--models=resnet50,resnet50: a name is repeated"),
            (["--train_steps=0"], "--train_steps must be >= 1, got 0"),
            (["--data_format=NCHW", "--device=cpu"], "not supported on CPU")):
        out = tmp_path / str(len(text))
        assert cli.main(argv + ["--out_dir=%s" % out]) == errors.EXIT_USAGE
        err = capsys.readouterr().err
        assert text in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not out.exists()


def test_compare_two_evaluation_directories_by_model_and_mode(tmp_path, child, monkeypatch):
    a, b = str(tmp_path / "a100"), str(tmp_path / "cpu")
    assert evaluate(SMALL + ["--out_dir=" + a], child)[0] == 0
    monkeypatch.setenv("FAKE_DEVICE", "AMD EPYC")     # mixed = bf16 on this one
    monkeypatch.setenv("FAKE_SPEED", "0.5")
    assert evaluate(SMALL + ["--out_dir=" + b], child, gpus=(0, "no driver"))[0] == 0
    comp = compare.compare_files(a, b)
    assert comp.compared == {"device_kind": ("gpu", "cpu"), "device_name": (A100, "AMD EPYC")}
    table = comp.table
    assert len(table) == 12 and set(table["execution_mode"]) == {"native", "mixed", "mixed_xla"}
    assert set(table["ratio"].round(3)) == {0.5} and set(table["verdict"]) == {"slower"}
    code = compare_cli.main([a, b, "--format=markdown"])
    assert code == 0
    with pytest.raises(errors.UsageError, match="holds no results file"):
        compare.compare_files(a, str(tmp_path))
