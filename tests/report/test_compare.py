"""tfbench.report.compare: matching, ratios, noise verdicts and the rendered tables (the command
line, its formats and its gate: tests/cli/test_compare.py)."""

import pytest

from run_results import compared_result as result, write_results_csv as write
from tfbench import errors
from tfbench.report import compare, load, tables


def test_verdict_rules():
    assert compare.verdict(100, 98, 102, 110, 108, 112) == "faster"
    assert compare.verdict(100, 98, 102, 90, 88, 92) == "slower"
    assert compare.verdict(100, 95, 105, 103, 100, 106) == "within noise"
    assert compare.verdict(100, None, None, 120, None, None) == "unknown (no spread data)"
    # One side without spread: its figure is a point.
    assert compare.verdict(100, 99, 101, 105, None, None) == "faster"
    assert compare.verdict(100, 95, 105, 104, None, None) == "within noise"


def test_matching_ratios_and_spread_sources(tmp_path):
    a = write(tmp_path / "a.csv", [
        result(batch_size=32, ips=100.0, pm=1.0),                     # Step +/- x2: 98-102
        result(batch_size=64, ips=200.0), result(batch_size=64, ips=220.0),  # repeats 200-220
        result(batch_size=128, ips=300.0, images_per_sec_min=290.0,
               images_per_sec_max=310.0, num_runs=3),                 # --num_runs min/max
        result(batch_size=256, ips=400.0),                            # nothing: a point
        result(model="vgg16", ips=50.0, pm=1.0)])
    b = write(tmp_path / "b.csv", [
        result(batch_size=32, ips=150.0, pm=1.0, device="A100"),
        result(batch_size=64, ips=215.0, pm=2.0, device="A100"),
        result(batch_size=128, ips=250.0, pm=5.0, device="A100"),
        result(batch_size=256, ips=410.0, device="A100"),
        result(model="vgg16", status="oom", device="A100"),
        result(model="trivial", ips=10.0, device="A100")])
    comp = compare.compare_files(a, b)
    assert comp.compared == {"device_name": ("V100", "A100")}
    got = {int(r["batch_size"]): r for _, r in comp.table.iterrows()}
    assert list(got) == [32, 64, 128, 256]
    assert got[32]["ratio"] == pytest.approx(1.5) and got[32]["verdict"] == "faster"
    assert got[32]["basis"] == "A: Step +/- x2; B: Step +/- x2"
    assert got[64]["a_images_per_sec"] == 210.0 and got[64]["verdict"] == "within noise"
    assert got[64]["basis"] == "A: repeats n=2; B: Step +/- x2"
    assert got[128]["verdict"] == "slower"
    assert got[128]["basis"] == "A: min/max over 3 runs; B: Step +/- x2"
    assert got[256]["verdict"] == "unknown (no spread data)"
    # Each unmatched configuration with its own status in each file.
    unmatched = {(r["model"], r["a_status"], r["b_status"]) for _, r in comp.unmatched.iterrows()}
    assert unmatched == {("vgg16", "ok", "oom"), ("trivial", "no row", "ok")}


def test_other_metric_ratios_only_when_present(tmp_path):
    a = write(tmp_path / "a.csv", [result(ips=100.0, latency_ms_p50=10.0, peak_mem_gb=4.0)])
    b = write(tmp_path / "b.csv", [result(ips=125.0, latency_ms_p50=8.0, peak_mem_gb=5.0)])
    comp = compare.compare_files(a, b)
    assert "ratio_latency_ms_p50" in comp.columns and "ratio_power_w_mean" not in comp.columns
    row = comp.table.iloc[0]
    assert (row["ratio_latency_ms_p50"], row["ratio_peak_mem_gb"]) == (0.8, 1.25)
    assert comp.compared == {}


def test_no_matches(tmp_path):
    a = write(tmp_path / "a.csv", [result(model="a")])
    b = write(tmp_path / "b.csv", [result(model="b")])
    comp = compare.compare_files(a, b)
    # A single, different model on each side is what is compared, so the rows do match.
    assert comp.compared == {"model": ("a", "b")} and len(comp.table) == 1
    a = write(tmp_path / "a2.csv", [result(model="a"), result(model="c")])
    b = write(tmp_path / "b2.csv", [result(model="b")])
    comp = compare.compare_files(a, b)
    assert comp.table.empty
    assert "no matching configurations" in compare.render(comp, a, b)
    assert load.read_results([a]).shape[0] == 2


# --- what was matched, and spreads in one unit ----------------------------------------------

def test_rows_show_the_keys_that_identify_them(tmp_path):
    # Every key is the same in all rows but the batch size: the table still says which model,
    # mode, precision, XLA and devices each row is.
    a = write(tmp_path / "a.csv", [result(batch_size=32, ips=100.0, precision="fp16"),
                                   result(batch_size=64, ips=150.0, precision="fp16")])
    b = write(tmp_path / "b.csv", [result(batch_size=32, ips=110.0, precision="fp16"),
                                   result(batch_size=64, ips=160.0, precision="fp16")])
    comp = compare.compare_files(a, b)
    parsed = tables.parse_markdown(compare.render(comp, a, b, "markdown"))
    assert [(r["Model"], r["Mode"], r["Precision"], r["XLA"], r["Batch/device"], r["Devices"])
            for r in parsed] == [("resnet50", "training", "fp16", "off", "32", "1"),
                                 ("resnet50", "training", "fp16", "off", "64", "1")]
    assert "Workers" not in parsed[0]


def test_multi_worker_rows_show_the_split(tmp_path):
    a = write(tmp_path / "a.csv", [result(ips=400.0, num_devices=2, num_workers=2)])
    b = write(tmp_path / "b.csv", [result(ips=400.0, num_devices=2, num_workers=2),
                                   result(ips=200.0, num_devices=2)])
    comp = compare.compare_files(a, b)
    text = compare.render(comp, a, b, "markdown")
    parsed = tables.parse_markdown(text)
    assert [(r["Devices/worker"], r["Workers"], r["Devices"]) for r in parsed] == [
        ("2", "2", "4")]
    unmatched = tables.parse_markdown(text[text.index("**Not matched**"):])
    assert [(r["Devices/worker"], r["Workers"], r["Devices"], r["A status"], r["B status"])
            for r in unmatched] == [("2", "1", "2", "no row", "ok")]


def test_unmatched_rows_show_their_own_status_and_keys(tmp_path):
    a = write(tmp_path / "a.csv", [result(ips=100.0, pm=1.0),
                                   result(model="vgg16", ips=50.0, precision="fp16"),
                                   result(model="alexnet", status="oom", batch_size=512)])
    b = write(tmp_path / "b.csv", [result(ips=120.0, pm=1.0),
                                   result(model="vgg16", status="nan", precision="fp16"),
                                   result(model="alexnet", status="error", batch_size=512),
                                   result(model="trivial", ips=10.0)])
    comp = compare.compare_files(a, b)
    text = compare.render(comp, a, b, "text")
    assert "not run" not in text
    rows = tables.parse_markdown(compare.render(comp, a, b, "markdown").split(
        "**Not matched**")[1])
    assert [(r["Model"], r["Precision"], r["Batch/device"], r["A status"], r["B status"])
            for r in rows] == [("vgg16", "fp16", "64", "ok", "nan"),
                               ("alexnet", "fp32", "512", "oom", "error"),
                               ("trivial", "fp32", "64", "no row", "ok")]


def test_step_spread_of_a_multi_worker_row_counts_every_worker(tmp_path):
    # The Step line's +/- is per worker; images_per_sec counts both workers, so the spread
    # around it is 2 x 2 x +/- (180-220 for A), not 2 x +/- (190-210).
    a = write(tmp_path / "a.csv", [result(ips=200.0, pm=5.0, num_workers=2)])
    b = write(tmp_path / "b.csv", [result(ips=213.0, pm=1.0, num_workers=2)])
    comp = compare.compare_files(a, b)
    row = comp.table.iloc[0]
    assert (row["a_range"], row["b_range"]) == ("180.0-220.0", "209.0-217.0")
    assert row["verdict"] == "within noise"
    assert row["basis"] == "A: Step +/- x2 x 2 workers; B: Step +/- x2 x 2 workers"


# --- directories: two evaluations, matched by model, run and execution mode -------------------

def test_two_evaluation_directories_match_by_model_and_mode(tmp_path):
    from evaluation_fakes import A100, write_evaluation
    a = write_evaluation(str(tmp_path / "a"), ("resnet50",))
    # On a CPU the mixed modes ran bf16, where the GPU ran fp16: the modes still meet.
    b = write_evaluation(str(tmp_path / "b"), ("resnet50",), device="AMD EPYC", speed=0.5)
    comp = compare.compare_files(a, b)
    # Both identify a configuration: what is compared, each named in the header.
    assert comp.compared == {"device_kind": ("gpu", "cpu"), "device_name": (A100, "AMD EPYC")}
    assert [(r["execution_mode"], r["kind"], round(r["ratio"], 3), r["verdict"])
            for _, r in comp.table.iterrows()] == [
        (mode, kind, 0.5, "slower") for mode in ("native", "mixed", "mixed_xla")
        for kind in ("training", "inference")]
    text = compare.render(comp, a, b)
    assert "Execution mode" in text and "min/max over 3 runs" in text
    # The words of the evaluation report (its Run column: training, inference).
    assert "forward_only" not in text and "| Run " in compare.render(comp, a, b, "markdown")
    assert "inference" in text
    # A sweep's directory stands for its sweep.csv; a directory without results is refused.
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    write(sweep_dir / "sweep.csv", [result(ips=100.0, pm=1.0)])
    assert compare.results_file(str(sweep_dir)) == str(sweep_dir / "sweep.csv")
    with pytest.raises(errors.UsageError, match="holds no results file"):
        compare.results_file(str(tmp_path))
