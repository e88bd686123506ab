"""`tfbench compare`: matching, ratios, noise verdicts and output formats."""

import pytest

from helpers import csv_rows
from tfbench.output import csv_out
from tfbench import errors
from tfbench.report import compare, load, tables
from tfbench.cli import compare as compare_cli
from tfbench.results import RunResult


def result(model="resnet50", batch_size=64, ips=100.0, pm=0.0, device="V100", status="ok",
           **extra):
    # `extra` cannot set a column that names a RunResult field (csv_out.row_for): those go to
    # the fields (status, precision, num_devices, ...).
    fields = {k: extra.pop(k) for k in list(extra) if k in RunResult.__dataclass_fields__}
    r = RunResult(model=model, mode="training", batch_size=batch_size,
                  global_batch_size=batch_size, images_per_sec=ips,
                  step_images_per_sec_plusminus=pm, status=status, **fields)
    r.extra.update({"device_name": device, **extra})
    return r


def write(path, results):
    csv_out.append_rows(str(path), [csv_out.row_for(r) for r in results])
    return str(path)


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


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv"])
def test_cli_formats(tmp_path, capsys, fmt):
    a = write(tmp_path / "a.csv", [result(ips=100.0, pm=1.0), result(model="x", ips=1.0)])
    b = write(tmp_path / "b.csv", [result(ips=120.0, pm=1.0, device="A100")])
    out_file = tmp_path / "cmp.out"
    assert compare_cli.main([a, b, "--format", fmt, "--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert out == out_file.read_text()
    if fmt == "csv":
        rows = csv_rows(out)
        assert rows[0]["ratio"] == "1.2" and rows[0]["verdict"] == "faster"
    elif fmt == "markdown":
        parsed = tables.parse_markdown(out)
        assert parsed[0]["B/A images/sec"] == "1.200" and parsed[0]["Verdict"] == "faster"
        assert "- compared: device_name  A: V100  B: A100" in out
        assert "**Not matched**" in out
    else:
        lines = out.splitlines()
        assert lines[:3] == ["A = %s" % a, "B = %s" % b,
                             "compared: device_name  A: V100  B: A100"]
        header = next(ln for ln in lines if ln.startswith("Model"))
        assert "B/A images/sec" in header and "Verdict" in header
        assert any(ln.startswith("resnet50") and "faster" in ln for ln in lines)


def test_cli_missing_file(tmp_path, capsys):
    from tfbench import cli
    assert cli.main(["tfbench", "compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) \
        == errors.EXIT_USAGE
    assert capsys.readouterr().err.startswith("tfbench: error: results file not found")


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


# --- the gate: --threshold_pct ----------------------------------------------------------------

def _gate(tmp_path, capsys, a_results, b_results, *flags):
    n = len(list(tmp_path.iterdir()))    # new files each call: write() appends
    a = write(tmp_path / ("a%d.csv" % n), a_results)
    b = write(tmp_path / ("b%d.csv" % n), b_results)
    code = compare_cli.main([a, b] + list(flags))
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


# A at 1000 images/sec (Step +/- 2: the interval 996-1004); B 7% slower, 930 (926-934): the
# spreads do not overlap, so the 7% is beyond the noise.
TIGHT_A, TIGHT_B = dict(ips=1000.0, pm=2.0), dict(ips=930.0, pm=2.0)
# How a line names the configuration: its identity columns (those the table shows).
CONFIG = "model=resnet50 mode=training precision=fp32 xla=0 batch_size=64 devices=1"


def test_seven_percent_slower_beyond_the_noise_fails_at_five_and_passes_at_ten(tmp_path, capsys):
    code, out, err = _gate(tmp_path, capsys, [result(**TIGHT_A)], [result(**TIGHT_B)],
                           "--threshold_pct=5")
    assert code == errors.EXIT_REGRESSION == 9
    assert "slower" in out                      # the comparison itself is unchanged
    assert err == ["regression: %s: images_per_sec 7.0%% worse (B/A 0.930), beyond 5%% and "
                   "the noise" % CONFIG,
                   "gate: 1 of 1 matched configurations worse than A by more than 5% and the "
                   "noise (exit 9)"]
    code, _, err = _gate(tmp_path, capsys, [result(**TIGHT_A)], [result(**TIGHT_B)],
                         "--threshold_pct=10")
    assert code == 0
    assert err == ["gate: no matched configuration (of 1) worse than A by more than 10% and "
                   "the noise"]


def test_without_the_flag_a_slower_b_still_exits_zero_and_says_nothing_more(tmp_path, capsys):
    code, out, err = _gate(tmp_path, capsys, [result(**TIGHT_A)], [result(**TIGHT_B)])
    assert code == 0 and err == [] and "slower" in out


def test_seven_percent_slower_within_the_noise_passes(tmp_path, capsys):
    # A's Step +/- 40 makes its interval 920-1080, which holds B's 926-934.
    code, out, err = _gate(tmp_path, capsys, [result(ips=1000.0, pm=40.0)],
                           [result(**TIGHT_B)], "--threshold_pct=5")
    assert "within noise" in out
    assert code == 0 and err[-1].startswith("gate: no matched configuration")


def test_only_the_configurations_worse_beyond_both_are_named(tmp_path, capsys):
    a = [result(batch_size=32, **TIGHT_A), result(batch_size=64, **TIGHT_A),
         result(batch_size=128, **TIGHT_A)]
    b = [result(batch_size=32, ips=1100.0, pm=2.0),     # 10% faster: better, not worse
         result(batch_size=64, ips=880.0, pm=2.0),      # 12% slower
         result(batch_size=128, ips=970.0, pm=2.0)]     # 3% slower: within the threshold
    code, _, err = _gate(tmp_path, capsys, a, b, "--threshold_pct=5")
    assert code == 9
    # The batch varies, so the global batch is named too.
    assert err[0] == ("regression: %s global_batch_size=64: images_per_sec 12.0%% worse (B/A "
                      "0.880), beyond 5%% and the noise" % CONFIG)
    assert err[1:] == ["gate: 1 of 3 matched configurations worse than A by more than 5% and "
                       "the noise (exit 9)"]


def _latency_rows(ips, latencies):
    return [result(ips=ips, pm=2.0, latency_ms_p50=v) for v in latencies]


def test_lower_latency_is_not_worse_and_higher_latency_is(tmp_path, capsys):
    # Same images/sec; latency's spread from two repeated rows: A 10.0-10.2 ms.
    a = _latency_rows(1000.0, [10.0, 10.2])
    code, _, err = _gate(tmp_path, capsys, a, _latency_rows(1000.0, [8.0, 8.2]),
                         "--threshold_pct=5")   # 20% lower: better
    assert code == 0, err
    code, _, err = _gate(tmp_path, capsys, a, _latency_rows(1000.0, [12.0, 12.2]),
                         "--threshold_pct=5")   # 12.1 / 10.1 = 1.198: 19.8% worse
    assert code == 9
    assert err[0] == ("regression: %s: latency_ms_p50 19.8%% worse (B/A 1.198), beyond 5%% and "
                      "the noise" % CONFIG)


def test_a_figure_worse_with_no_spread_on_either_side_is_named_but_does_not_fail(tmp_path,
                                                                                  capsys):
    # One row each: latency has no spread, so 20% higher cannot be told from noise.
    code, _, err = _gate(tmp_path, capsys, [result(ips=1000.0, pm=2.0, latency_ms_p50=10.0)],
                         [result(ips=1000.0, pm=2.0, latency_ms_p50=12.0)], "--threshold_pct=5")
    assert code == 0
    assert err[0] == ("not judged: %s: latency_ms_p50 20.0%% worse (B/A 1.200), but neither "
                      "file has a spread of it to tell it from noise" % CONFIG)


@pytest.mark.parametrize("value", ["-1", "nan", "x"])
def test_a_bad_threshold_is_one_usage_error(tmp_path, capsys, value):
    from tfbench import cli
    a = write(tmp_path / "a.csv", [result()])
    assert cli.main(["tfbench", "compare", a, a, "--threshold_pct=%s" % value]) \
        == errors.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("tfbench: error: ") and err.count("\n") == 1 and "threshold_pct" in err
