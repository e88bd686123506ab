"""`tfbench compare A B`: the output formats and --out, a missing file, and the gate of
--threshold_pct (exit 9, its lines on stderr), each through the command line."""

import pytest

from helpers import csv_rows
from run_results import compared_result as result, write_results_csv as write
from tfbench import errors
from tfbench.cli import compare as compare_cli
from tfbench.report import tables


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
