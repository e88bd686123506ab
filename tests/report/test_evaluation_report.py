"""The evaluation report (tfbench.report.evaluation, evaluation_env, evaluation_plots,
evaluation_report): the first table in the published shape, the mode matrix, stability, the
environment and its changes, the per-model figures; from an evaluation directory's files."""

import os

import pandas as pd
import pytest

from evaluation_fakes import A100, environment, result, write, write_evaluation
from tfbench.report import evaluation as ev
from tfbench.report import evaluation_env, evaluation_report, load, tables

MODELS = ("resnet50", "vit_tiny")


@pytest.fixture()
def eval_dir(tmp_path):
    return write_evaluation(str(tmp_path / "ev"), MODELS)


def frame(path):
    return ev.with_method_columns(load.read_results([os.path.join(path, "evaluation.csv")]))


def test_modes_and_kinds_come_from_precision_xla_and_mode():
    assert [ev.execution_mode(p, x) for p, x in (("fp32", 0), ("", 0), ("fp16", 0), ("bf16", 0),
                                                 ("bf16", 1), ("fp32", 1))] == \
        ["native", "native", "mixed", "mixed", "mixed_xla", ""]
    assert (ev.mode_label("native", "fp32"), ev.mode_label("mixed", "fp16"),
            ev.mode_label("mixed_xla", "bf16")) == ("native fp32", "mixed fp16",
                                                    "mixed bf16 + XLA")
    assert [ev.run_kind(m) for m in ("training", "forward_only", "eval")] == \
        ["training", "inference", ""]


def test_first_table_is_the_published_shape(eval_dir):
    table = ev.first_table(frame(eval_dir), MODELS)
    shown = tables.display_frame(table, ev.first_table_columns(table))
    assert list(shown.columns) == [
        "Model", "Device", "Training images/sec", "GFLOPs per image (forward)",
        "Achieved TFLOP/s", "MFU (%)", "Inference p50 (ms, batch 1)",
        "Inference p99 (ms, batch 1)", "Peak training memory (GiB, largest device)",
        "Mean training power (W, all GPUs)", "Training images/sec per W",
        "Max training temperature (°C, hottest GPU)", "Stable?"]
    first = shown.iloc[0].to_dict()
    assert first == {
        "Model": "resnet50", "Device": A100, "Training images/sec": "900.0",
        "GFLOPs per image (forward)": "7.700", "Achieved TFLOP/s": "20.790", "MFU (%)": "40.0",
        "Inference p50 (ms, batch 1)": "5.00", "Inference p99 (ms, batch 1)": "6.50",
        "Peak training memory (GiB, largest device)": "2.00",
        "Mean training power (W, all GPUs)": "300",
        "Training images/sec per W": "3.00", "Max training temperature (°C, hottest GPU)": "70",
        "Stable?": "yes"}
    assert list(shown["Model"]) == ["resnet50", "vit_tiny"]
    # No verdict in any row, so no column: the published A100 TF32 figure (909 images/sec) is
    # ResNet-50 v1.5 at batch 256, not resnet50 (v1) at the evaluation's batch 32.
    assert set(table["expected_range"]) == {""}


def test_first_table_without_native_shows_the_first_mode_measured(tmp_path):
    path = write_evaluation(str(tmp_path / "ev"), ("resnet50",), ("mixed", "mixed_xla"))
    df = frame(path)
    assert ev.headline_mode(df) == "mixed"
    assert ev.first_table(df)["train_images_per_sec"].tolist() == [2250.0]


@pytest.mark.slow
def test_an_unstable_run_marks_its_model_and_says_what_to_check(tmp_path):
    path = str(tmp_path / "ev")
    write_evaluation(path, ("resnet50",), ("native",))
    write(os.path.join(path, "evaluation.csv"), os.path.join(path, "runs"),
          result("resnet50", "native", "inference", unstable=True))   # a re-run: latest counts
    df = frame(path)
    assert ev.first_table(df)["stable"].tolist() == ["no"]
    assert ev.unstable_lines(df) == [
        "resnet50 native fp32 inference: spread 30.0% over 3 repeats (170.0-230.0 images/sec)"]
    report = evaluation_report.build(path)
    runs = next(s for s in report.sections if s.slug == "runs")
    assert "Check other processes on the GPU or CPU" in runs.note
    assert runs.frame["stable"].tolist() == ["yes", "no"]


def test_cpu_rows_leave_power_empty_and_say_why(tmp_path):
    path = write_evaluation(str(tmp_path / "ev"), ("vit_tiny",), ("native", "mixed"),
                            device="AMD EPYC")
    df = frame(path)
    table = ev.first_table(df)
    assert pd.isna(table["train_power_w_mean"].iloc[0]) and table["stable"].iloc[0] == "yes"
    assert "expected_range" not in ev.first_table_columns(table)
    assert ev.mode_labels(df) == {"native": "native fp32", "mixed": "mixed bf16"}
    note = evaluation_report.method_note(df, "native", [10.0])
    assert "power, temperature and images/sec per W are empty" in note
    assert "median of the repeats stays within 10%, in training and in inference" in note
    assert "stays within 5/10%" in evaluation_report.method_note(df, "native", [5.0, 10.0])


def test_a_cpu_first_table_leaves_out_the_columns_no_row_has(tmp_path):
    """On a CPU, MFU (no `tfbench peak`), power, images/sec per W and temperature are empty in
    every row: the table printed and written leaves them out (the README's excerpt); a column
    one row has stays, its other cells empty."""
    path = write_evaluation(str(tmp_path / "ev"), MODELS, ("native",), device="AMD EPYC")
    table = ev.first_table(frame(path), MODELS)
    shown = tables.display_frame(table, ev.first_table_columns(table))
    assert list(shown.columns) == [
        "Model", "Device", "Training images/sec", "GFLOPs per image (forward)",
        "Achieved TFLOP/s", "Inference p50 (ms, batch 1)", "Inference p99 (ms, batch 1)",
        "Peak training memory (GiB, largest device)", "Stable?"]
    table.loc[1, "mfu_pct"] = 12.5
    shown = tables.display_frame(table, ev.first_table_columns(table))
    assert list(shown["MFU (%)"]) == ["", "12.5"]


def test_mode_matrix_speedups_over_native(eval_dir):
    df = frame(eval_dir)
    train = ev.mode_matrix(df, "training", MODELS)
    assert list(train.columns) == [
        "Model", "Device", "native fp32: images/sec", "mixed fp16: images/sec",
        "mixed fp16: speed-up (x)", "mixed fp16 + XLA: images/sec",
        "mixed fp16 + XLA: speed-up (x)"]
    assert train.iloc[0].tolist() == ["resnet50", A100, "900.0", "2,250.0", "2.50", "2,475.0",
                                      "2.75"]
    infer = ev.mode_matrix(df, "inference", MODELS)
    # Inference speed-up = native p50 / p50: 5 ms / 4 ms and 5 ms / 2.5 ms.
    assert infer.iloc[0].tolist() == ["resnet50", A100, "5.00", "4.00", "1.25", "2.50", "2.00"]


def test_the_tftrt_mode_is_an_inference_column(tmp_path):
    df = frame(write_evaluation(str(tmp_path / "ev"), ("resnet50",),
                                modes=("native", "mixed", "tftrt")))
    assert set(df.loc[df["execution_mode"] == "tftrt", "kind"]) == {"inference"}
    assert ev.execution_mode("fp32", 0, "FP16") == "tftrt"
    assert ev.mode_label("tftrt", "fp32", "INT8") == "TF-TRT INT8"
    assert "TF-TRT" not in " ".join(ev.mode_matrix(df, "training").columns)
    infer = ev.mode_matrix(df, "inference")
    assert list(infer.columns)[-2:] == ["TF-TRT FP16: p50 ms", "TF-TRT FP16: speed-up (x)"]
    assert infer.iloc[0].tolist()[-2:] == ["1.25", "4.00"]   # 5 ms / 1.25 ms
    assert ev.runs_table(df)["execution_mode"].tolist()[-1] == "tftrt"


def _eight_gpus(driver="550.54.15"):
    env = environment(driver)
    env["nvidia"]["gpus"] = [{"name": A100}] * 8
    return env


def test_environment_table_and_changes():
    runs = [{"run_id": "a", "timestamp": "1", "model": "resnet50", "mode": "training",
             "num_devices": 2, "extra": {"device_name": A100},
             "environment": {"before": _eight_gpus(), "after": _eight_gpus()}},
            {"run_id": "b", "timestamp": "2", "model": "vit_tiny", "mode": "training",
             "num_devices": 1,
             "environment": {"before": _eight_gpus(), "after": _eight_gpus("555.42")},
             "extra": {"device_name": A100, "environment_changes": [
                 "Environment changed during the run: nvidia.driver_version: 550.54.15 -> "
                 "555.42"]}}]
    table = evaluation_env.environment_table(runs)
    values = dict(zip(table["Field"], table["Value"]))
    # What the runs used, apart from what NVML lists on the host (here 8 GPUs).
    assert table["Field"][0] == "Devices used by the runs"
    assert values["Devices used by the runs"] == "2 x %s; %s" % (A100, A100)
    assert values["GPUs on the host (NVML)"] == "8 x %s" % A100
    assert (values["NVIDIA driver"], values["CUDA (TensorFlow build)"],
            values["cuDNN (TensorFlow build)"], values["TensorFlow"], values["Container"]) == (
        "550.54.15", "12.5.1", "9", "2.21.0 v2.21.0", "none")
    lines = evaluation_env.changes(runs)
    assert lines[0] == "NVIDIA driver: 550.54.15 -> 555.42 (after run b, vit_tiny training)"
    assert lines[1].startswith("Environment changed during the run: nvidia.driver_version")
    assert evaluation_env.changes(runs[:1]) == []


@pytest.mark.slow
def test_report_puts_the_first_table_first_then_the_matrix_then_figures(eval_dir):
    report = evaluation_report.build(eval_dir, models=MODELS, title="GPU evaluation")
    md = open(report.markdown_path).read()
    html = open(report.html_path).read()
    order = [md.index(h) for h in ("## Results: one row per model and device (native fp32)",
                                   "## Mode matrix: training images/sec",
                                   "## Mode matrix: inference p50 latency",
                                   "## Per-model figures", "## Published ranges",
                                   "## Every configuration", "## Environment")]
    assert order == sorted(order)
    first = tables.parse_markdown(md)
    assert first[0]["Training images/sec"] == "900.0" and "Expected range" not in first[0]
    assert ("Expected range: no published figure for resnet50 training fp32, 1x A100 40GB SXM, "
            "batch 32 per GPU (published: resnet50_v1.5 at batch 256)") in md
    assert "Changed during the evaluation: nothing" in md
    assert "median of the repeats stays within 10%" in md   # from the manifests
    assert sorted(report.plots) == ["resnet50", "vit_tiny"]
    for paths in report.plots.values():
        assert [p.rsplit("_", 1)[-1] for p in paths] == ["throughput.png", "latency.png",
                                                          "power.png"]
        for p in paths:
            assert os.path.getsize(p) > 1000 and "src='%s'" % os.path.relpath(
                p, os.path.dirname(report.html_path)) in html
    assert html.index("Results: one row per model") < html.index("<img")
    assert os.path.isfile(os.path.join(eval_dir, "report", "first_table.csv"))


def test_failed_runs_are_listed_and_left_out_of_the_tables(tmp_path):
    path = str(tmp_path / "ev")
    write_evaluation(path, ("resnet50",), ("native",))
    write(os.path.join(path, "evaluation.csv"), os.path.join(path, "runs"),
          result("vit_tiny", "native", "training", status="oom"))
    report = evaluation_report.build(path)
    assert report.first_table["model"].tolist() == ["resnet50"]
    failed = next(s for s in report.sections if s.slug == "failed_runs")
    assert failed.frame[["model", "status"]].values.tolist() == [["vit_tiny", "oom"]]
