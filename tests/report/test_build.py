"""`tfbench report`: Markdown/HTML tables and PNG plots from results CSV files."""

import json
import os

import pytest

from tfbench.output import csv_out
from tfbench.report import build, load, plots, tables
from run_results import a100_result as result, write_results_csv as write_csv
from tfbench.cli import report as cli


@pytest.fixture()
def study_csv(tmp_path):
    # The ratios as a run writes them: images/sec over the summed peaks, over the power.
    rs = [result(num_devices=n, images_per_sec=v,
                 extra={"peak_mem_gb": 10.0, "power_w_mean": 250.0 * n, "latency_ms_p50": 60.0,
                        "latency_ms_p99": 70.0, "images_per_sec_per_gb": v / (10.0 * n),
                        "images_per_sec_per_watt": v / (250.0 * n)})
          for n, v in ((1, 900.0), (2, 1710.0), (4, 3240.0))]
    rs += [result(batch_size=b, images_per_sec=v, extra={"peak_mem_gb": b / 16})
           for b, v in ((32, 700.0), (128, 950.0))]
    rs += [result(precision="fp16", images_per_sec=2250.0),
           result(precision="fp16", xla=True, images_per_sec=2500.0)]
    rs += [result(model="vgg16", status="oom", error="OOM when allocating tensor")]
    rs[0].step_times = [0.07, 0.071, 0.069, 0.072]
    rs[0].warmup_times = [2.0, 0.08]
    path = write_csv(tmp_path / "results.csv", rs)
    runs = tmp_path / "runs"
    runs.mkdir()
    phases = ["steady_start"] + ["steady"] * 4 + ["steady_end"]
    manifest = {**rs[0].to_dict(), "extra": {"samples": [
        {"t": 1000.0 + i * 0.5, "phase": phases[i], "temp_c": 40.0 + i, "power_w": 200.0}
        for i in range(6)]}}
    (runs / (rs[0].run_id + ".json")).write_text(json.dumps(manifest))
    return path, rs


@pytest.mark.slow
def test_report_tables_and_plots(tmp_path, study_csv):
    path, rs = study_csv
    out = tmp_path / "rep"
    assert cli.main([path, "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    results = tables.parse_markdown(md[md.index("## Results"):])
    first = results[0]
    assert (first["Model"], first["Device"], first["Devices"], first["Images/sec"],
            first["p50 latency (ms)"], first["p99 latency (ms)"], first["Peak memory (GiB)"],
            first["Power (W)"], first["Images/sec per GiB"], first["Images/sec per W"],
            first["Scaling efficiency (%)"]) == (
        "resnet50", "NVIDIA A100-SXM4-40GB", "1", "900.0", "60.00", "70.00", "10.000", "250",
        "90.0", "3.60", "100.0")
    # The published A100 40GB SXM TF32 figure (909 img/s) is ResNet-50 v1.5 at batch 256:
    # resnet50 (v1) at batch 64 gets no verdict, and the report says what is published; a
    # figure no row holds is not a column.
    assert "Expected range" not in first
    scaling = tables.parse_markdown(md[md.index("## Scaling efficiency"):])
    assert [r["Scaling efficiency (%)"] for r in scaling] == ["100.0", "95.0", "90.0"]
    matrix = tables.parse_markdown(md[md.index("## Precision / execution matrix"):])
    assert [(r["Execution"], r["Speed-up vs fp32 (x)"]) for r in matrix] == [
        ("fp32", "1.00"), ("fp16 mixed", "2.50"), ("fp16 mixed + XLA", "2.78")]
    failed = tables.parse_markdown(md[md.index("## Failed runs"):])
    assert [(r["Model"], r["Status"], r["Error"]) for r in failed] == [
        ("vgg16", "oom", "OOM when allocating tensor")]
    assert ("Expected range: no published figure for resnet50 training fp32, 1x A100 40GB SXM, "
            "batch 64 per GPU (published: resnet50_v1.5 at batch 256)") in md
    assert "<table" in html and "Scaling efficiency (%)" in html and "<img src='plots/" in html
    pngs = sorted(os.listdir(out / "plots"))
    kinds = {name.split("_")[0] for name in pngs}
    assert kinds == {"batch", "scaling", "precision", "timeseries"}
    for name in pngs:
        assert (out / "plots" / name).stat().st_size > 5000
        assert "plots/" + name in md
    assert (out / "results.csv").exists() and (out / "scaling.csv").exists()


@pytest.mark.slow
def test_failed_rows_stay_out_of_tables_and_figures(tmp_path, study_csv):
    path, _ = study_csv
    report = build.build_report([path], str(tmp_path / "r"))
    results = next(s for s in report.sections if s.slug == "results")
    assert "vgg16" not in set(results.frame["model"])
    assert not any("vgg16" in p for p in report.plots)


@pytest.mark.slow
def test_plot_axes_are_labelled_with_units(tmp_path, study_csv):
    path, rs = study_csv
    df = load.read_results([path])
    sections = {s.slug: s for s in build.build_report([path], str(tmp_path / "r")).sections}
    batch = sections["batch_size"].frame
    fig = plots.batch_size_plot(batch, str(tmp_path / "b.png"))
    ax, mem_ax = fig.axes
    assert ax.get_xlabel() == "Batch size per device (images)"
    assert ax.get_ylabel() == "Throughput (images/sec)"
    assert mem_ax.get_ylabel() == "Peak memory (GiB)"
    assert ax.get_title().startswith("resnet50 on NVIDIA A100-SXM4-40GB: throughput vs batch")
    fig = plots.scaling_plot(sections["scaling"].frame, str(tmp_path / "s.png"))
    assert fig.axes[0].get_ylabel() == "Scaling efficiency (%)"
    assert fig.axes[0].get_xlabel() == "Devices (GPUs or logical devices)"
    assert "weak scaling (batch 64/device)" in fig.axes[0].get_title()
    fig = plots.precision_plot(sections["precision"].frame, str(tmp_path / "p.png"))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "fp32", "fp16 mixed", "fp16 mixed + XLA"]
    manifest = json.loads((tmp_path / "runs" / (rs[0].run_id + ".json")).read_text())
    row = df[df["run_id"] == rs[0].run_id].iloc[0]
    fig = plots.timeseries_plot(manifest, row, str(tmp_path / "t.png"))
    ax, temp_ax = fig.axes
    assert ax.get_xlabel() == "Time since the timed steps started (s)"
    assert temp_ax.get_ylabel() == "GPU temperature (°C)"
    assert "throughput and temperature over the timed steps" in ax.get_title()
    x, y = ax.lines[0].get_data()
    assert len(x) == 4 and y[-1] == pytest.approx(64 / 0.072)   # the timed steps, no warm-up


def test_json_dir_found_next_to_csv_or_given(tmp_path, study_csv):
    path, rs = study_csv
    dirs = load.json_dirs_for([path])
    assert dirs[0] == str(tmp_path / "runs")
    assert load.load_manifest(dirs, rs[0].run_id)["model"] == "resnet50"
    assert load.load_manifest(dirs, "missing") is None


def test_the_plots_line_names_the_directory_once(tmp_path, capsys, monkeypatch):
    """`--out report/` (as the README writes it) said `report//plots`."""
    from tfbench import cli as dispatcher
    path = write_csv(tmp_path / "r.csv", [result(images_per_sec=900.0)])
    monkeypatch.chdir(tmp_path)
    assert dispatcher.main(["tfbench", "report", path, "--out", "report/"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "report: report/report.md" and printed[-1].endswith(" in report/plots")


def test_the_results_table_shows_the_ratios_the_runs_wrote_and_recomputes_none():
    """Two GPUs, 400 images/sec, each device's peak 2 GiB: the run divides by both devices'
    memory (100 images/sec per GiB), 160 W for both GPUs (2.5 images/sec per W). A second
    configuration's run wrote neither ratio (its device statistics were unavailable): its
    cells stay empty, not images/sec over one device's peak (200) or anything else."""
    rows = [csv_out.row_for(result(num_devices=2, images_per_sec=400.0, extra={
        "peak_mem_gb": 2.0, "images_per_sec_per_gb": 100.0, "power_w_mean": 160.0,
        "images_per_sec_per_watt": 2.5})),
            csv_out.row_for(result(num_devices=2, batch_size=32, images_per_sec=300.0,
                                   extra={"peak_mem_gb": 2.0, "power_w_mean": 150.0}))]
    summary, _ = build.summary_frame(load.rows_frame(rows))
    wrote, did_not = summary.iloc[0], summary.iloc[1]
    assert (wrote["images_per_sec_per_gb"], wrote["images_per_sec_per_watt"]) == (100.0, 2.5)
    assert did_not["images_per_sec_per_gb"] != did_not["images_per_sec_per_gb"]   # NaN
    assert did_not["images_per_sec_per_watt"] != did_not["images_per_sec_per_watt"]
    shown = tables.parse_markdown(tables.markdown(summary, build.SUMMARY_COLUMNS))
    assert [(r["Images/sec per GiB"], r["Images/sec per W"]) for r in shown] == [
        ("100.0", "2.50"), ("", "")]


def test_pivot_by_model_and_device(tmp_path):
    rs = [result(images_per_sec=900.0), result(images_per_sec=1000.0, batch_size=128),
          result(model="vgg16", images_per_sec=300.0),
          result(images_per_sec=380.0, extra={"device_name": "Tesla V100-SXM2-16GB"})]
    path = write_csv(tmp_path / "r.csv", rs)
    md = (lambda r: open(r.markdown_path).read())(build.build_report([path], str(tmp_path / "o")))
    pivot = tables.parse_markdown(md[md.index("## Training images/sec by model and device"):])
    assert pivot == [
        {"Model": "resnet50", "NVIDIA A100-SXM4-40GB, fp32": "1,000.0",
         "Tesla V100-SXM2-16GB, fp32": "380.0"},
        {"Model": "vgg16", "NVIDIA A100-SXM4-40GB, fp32": "300.0",
         "Tesla V100-SXM2-16GB, fp32": ""}]


def test_pivot_never_mixes_image_sizes_or_serving_paths(tmp_path):
    """A 32 px run beside 64 px ones gets its own column, not the 64 px column's best; a
    SavedModel's inference its own column beside the in-process one's; the Results table says
    which row is which in the Serving column, the one tfbench compare shows (figures'
    serving_path)."""
    rs = [result(images_per_sec=900.0, image_size=64),
          result(images_per_sec=3000.0, image_size=32),
          result(model="vgg16", images_per_sec=300.0, image_size=64),
          result(mode="forward_only", images_per_sec=2000.0),
          result(mode="forward_only", images_per_sec=1500.0,
                 extra={"serving_path": "saved_model"})]
    path = write_csv(tmp_path / "r.csv", rs)
    md = open(build.build_report([path], str(tmp_path / "o")).markdown_path).read()
    train = tables.parse_markdown(md[md.index("## Training images/sec by model and device"):])
    assert train == [
        {"Model": "resnet50", "NVIDIA A100-SXM4-40GB, fp32, 64 px": "900.0",
         "NVIDIA A100-SXM4-40GB, fp32, 32 px": "3,000.0"},
        {"Model": "vgg16", "NVIDIA A100-SXM4-40GB, fp32, 64 px": "300.0",
         "NVIDIA A100-SXM4-40GB, fp32, 32 px": ""}]
    infer = tables.parse_markdown(md[md.index("## Inference images/sec by model and device"):])
    assert infer == [{"Model": "resnet50", "NVIDIA A100-SXM4-40GB, fp32, in-process": "2,000.0",
                      "NVIDIA A100-SXM4-40GB, fp32, saved_model": "1,500.0"}]
    results = tables.parse_markdown(md[md.index("## Results"):])
    assert [(r["Mode"], r["Serving"], r["Images/sec"]) for r in results[-2:]] == [
        ("forward_only", "in-process", "2,000.0"), ("forward_only", "saved_model", "1,500.0")]
    # compare names the same column the same way
    assert tables.display_frame(load.rows_frame([csv_out.row_for(rs[-1])]),
                                ["serving_path"]).columns.tolist() == ["Serving"]
