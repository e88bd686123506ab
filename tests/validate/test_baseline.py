"""A validation's figures against a baseline file (a results CSV, a JSON manifest, a
validate.json) or the published range: the expected figures and limits are computed by hand."""

import json

import pytest

from run_results import H100, RUN, h100_result as result
from tfbench.config.argv import settings_of_flags
from tfbench.errors import UsageError
from tfbench.output import csv_out, files
from tfbench.validate import baseline as bl
from tfbench.validate import run_figures as rf
from tfbench.validate.run_figures import RunKey

def write_csv(tmp_path, results, name="results.csv"):
    path = str(tmp_path / name)
    csv_out.append_rows(path, [csv_out.row_for(r) for r in results])
    return path


def write_manifest(tmp_path, r):
    p = settings_of_flags(["--model=%s" % r.model, "--batch_size=%d" % r.batch_size,
                         "--num_gpus=%d" % r.num_devices])
    path = str(tmp_path / ("%s.json" % r.run_id))
    with open(path, "w") as handle:
        json.dump(files.manifest(p, r, csv_out.row_for(r)), handle)
    return path


def write_validate_json(tmp_path, measured, run=RUN, **top):
    data = {"schema": "tfbench.validate", "schema_version": 1, "level": "standard",
            "status": "PASS", "rows": [], "figures": rf.figures_json(measured, run), **top}
    path = str(tmp_path / "validate.json")
    with open(path, "w") as handle:
        json.dump(data, handle)
    return path


def one(rows, check="images_per_sec"):
    [row] = [r for r in rows if r.check == check]
    return row


# The baseline holds 1600 images/sec: 3% lower (1552) passes at the default 5% (>= 1520), 8%
# lower (1472) fails.
PASSING, FAILING = [1548.0, 1552.0, 1556.0], [1468.0, 1472.0, 1476.0]


def _csv_baseline(tmp_path):
    return write_csv(tmp_path, [result(1600.0)])


def _manifest_baseline(tmp_path):
    return write_manifest(tmp_path, result(1600.0, extra={"images_per_sec_runs": [1600.0]}))


def _validate_json_baseline(tmp_path):
    return write_validate_json(tmp_path, {"images_per_sec": [1595.0, 1600.0, 1610.0]})


@pytest.mark.parametrize("make, kind", [(_csv_baseline, "results CSV"),
                                        (_manifest_baseline, "JSON manifest"),
                                        (_validate_json_baseline, "validate.json")])
def test_three_percent_below_the_baseline_passes_and_eight_percent_fails(tmp_path, make, kind):
    path = make(tmp_path)
    base = bl.load_baseline(path)
    assert base.kind == kind
    passed = one(bl.judge({"images_per_sec": PASSING}, base, run=RUN, host="h1"))
    assert (passed.status, passed.reason, passed.subject, passed.host) == ("PASS", "ok", "host",
                                                                          "h1")
    assert passed.figure == "1552 images/sec (median of 3), 3.0% below"
    assert passed.expectation == ">= 1520 (95%% of 1600 in %s)" % path
    assert (passed.value, passed.expected) == (1552.0, pytest.approx(1520.0))
    failed = one(bl.judge({"images_per_sec": FAILING}, base, 5.0, run=RUN, host="h1"))
    assert (failed.status, failed.reason) == ("FAIL", "below_baseline")
    assert failed.figure == "1472 images/sec (median of 3), 8.0% below"
    assert failed.expectation == ">= 1520 (95%% of 1600 in %s)" % path


def test_the_tolerance_moves_the_limit(tmp_path):
    base = bl.load_baseline(_csv_baseline(tmp_path))
    row = one(bl.judge({"images_per_sec": FAILING}, base, 10.0, run=RUN, host="h1"))
    assert (row.status, row.expected) == ("PASS", pytest.approx(1440.0))
    assert row.expectation.startswith(">= 1440 (90% of 1600 in ")


def test_medians_not_means_on_both_sides(tmp_path):
    # Baseline rows 1590, 1600, 1630: median 1600 (limit 1520), mean 1606.7 (limit 1526.3).
    path = write_csv(tmp_path, [result(v) for v in (1590.0, 1600.0, 1630.0)])
    base = bl.load_baseline(path)
    assert base.runs[0].figures["images_per_sec"] == [1590.0, 1600.0, 1630.0]
    assert one(bl.judge({"images_per_sec": [1520.0, 1522.0, 1525.0]}, base, run=RUN,
                        host="h")).status == "PASS"
    # This run's 1400, 1530, 1535 (spread 8.8%, stable): median 1530 passes, mean 1488 would not.
    row = one(bl.judge({"images_per_sec": [1400.0, 1530.0, 1535.0]}, base, run=RUN, host="h"))
    assert (row.status, row.value) == ("PASS", 1530.0)


def test_a_manifest_gives_its_repeats_efficiency_busbw_and_median_device_alone(tmp_path):
    extra = {"images_per_sec_runs": [1590.0, 1600.0, 1630.0],
             "scaling_explained": {"efficiency_pct": 90.0},
             "allreduce_busbw_gbs": 180.0,
             "device_checks": [{"device": "GPU %d" % i, "alone_ms": ms}
                               for i, ms in enumerate((10.1, 9.9, 10.0, 30.0, 9.0))]}
    base = bl.load_baseline(write_manifest(tmp_path, result(1600.0, extra=extra)))
    assert base.runs[0].figures == {"images_per_sec": [1590.0, 1600.0, 1630.0],
                                    "efficiency_pct": [90.0], "allreduce_busbw_gbs": [180.0],
                                    "median_alone_ms": [10.0]}
    assert base.runs[0].key == RunKey("resnet50", "fp16", 64, H100, 8)


def test_efficiency_below_its_baseline_is_efficiency_low_with_the_split(tmp_path):
    path = write_validate_json(tmp_path, {"images_per_sec": [1600.0],
                                          "efficiency_pct": [90.0, 91.0, 89.0]})
    base = bl.load_baseline(path)
    rows = bl.judge({"efficiency_pct": [80.0, 81.0, 82.0]}, base, run=RUN, host="h",
                    details={"efficiency_pct": " (all-reduce not hidden 12 pts)"})
    row = one(rows, "efficiency_pct")
    assert (row.status, row.reason) == ("FAIL", "efficiency_low")
    assert row.figure == "81% (median of 3), 10.0% below (all-reduce not hidden 12 pts)"
    assert row.expectation == ">= 85.5 (95%% of 90 in %s)" % path
    assert one(bl.judge({"allreduce_busbw_gbs": [171.0]},
                        bl.load_baseline(write_validate_json(
                            tmp_path, {"allreduce_busbw_gbs": [180.0]})),
                        run=RUN, host="h"), "allreduce_busbw_gbs").status == "PASS"


def test_a_time_passes_up_to_the_baseline_over_the_share_and_fails_longer(tmp_path):
    # The baseline's median device alone: 10 ms; at 5% its limit is 10 / 0.95 = 10.526 ms (95%
    # of its steps per second), not 10 x 1.05 = 10.5.
    path = write_validate_json(tmp_path, {"median_alone_ms": [9.9, 10.0, 10.1]})
    base = bl.load_baseline(path)

    def alone(ms):
        return one(bl.judge({"median_alone_ms": [ms]}, base, run=RUN, host="h"),
                   "median_alone_ms")
    edge = alone(10.51)
    assert (edge.status, edge.expected) == ("PASS", pytest.approx(10.526, abs=1e-3))
    assert edge.expectation == "<= 10.53 (10 in %s / 95%%)" % path
    slow = alone(11.0)
    assert (slow.status, slow.reason) == ("FAIL", "below_baseline")
    assert slow.figure == "11 ms (one run), 10.0% longer"
    fast = alone(9.0)
    assert (fast.status, fast.figure) == ("PASS", "9 ms (one run), 10.0% shorter")


def test_totals_compare_at_the_same_device_count_and_per_device_figures_at_any(tmp_path):
    path = write_validate_json(tmp_path, {"images_per_sec": [1600.0],
                                          "median_alone_ms": [10.0]})
    base = bl.load_baseline(path)
    four = RunKey("resnet50", "fp16", 64, H100, 4)
    rows = bl.judge({"images_per_sec": [800.0], "median_alone_ms": [10.2]}, base, run=four,
                    host="h")
    total = one(rows)
    assert (total.status, total.reason) == ("SKIP", "no_expectation")
    assert total.figure == "800 images/sec (one run)"
    assert total.expectation == ("%s ran on 8 devices, this run on 4: a figure of all the "
                                 "devices compares only at the same count" % path)
    assert one(rows, "median_alone_ms").status == "PASS"


def test_a_file_with_several_device_counts_is_held_at_the_run_s_count(tmp_path):
    path = write_csv(tmp_path, [result(400.0, devices=2), result(1600.0)])
    base = bl.load_baseline(path)
    assert [r.key.num_devices for r in base.runs] == [2, 8]
    assert base.select(RUN).figures["images_per_sec"] == [1600.0]


def test_a_figure_the_baseline_lacks_is_skipped(tmp_path):
    base = bl.load_baseline(_csv_baseline(tmp_path))
    row = one(bl.judge({"median_alone_ms": [10.0]}, base, run=RUN, host="h"), "median_alone_ms")
    assert (row.status, row.reason) == ("SKIP", "no_expectation")
    assert "holds no median_alone_ms" in row.expectation


def test_unstable_repeats_warn_never_pass(tmp_path):
    base = bl.load_baseline(_csv_baseline(tmp_path))
    # 1300, 1552, 1600: spread 300 / 1552 = 19.3% > 10%; the median passes, the row warns.
    row = one(bl.judge({"images_per_sec": [1300.0, 1552.0, 1600.0]}, base, run=RUN, host="h"))
    assert (row.status, row.reason) == ("WARN", "unstable")
    assert row.figure == "1552 images/sec (median of 3), 3.0% below; spread 19.3% over 3 repeats"
    assert row.expectation.endswith("(repeats within 10% to judge)")
    # Every repeat below the limit: no spread would make it pass.
    row = one(bl.judge({"images_per_sec": [1200.0, 1400.0, 1500.0]}, base, run=RUN, host="h"))
    assert (row.status, row.reason) == ("FAIL", "below_baseline")
    # A threshold of 25% takes the first as stable.
    row = one(bl.judge({"images_per_sec": [1300.0, 1552.0, 1600.0]}, base, run=RUN, host="h",
                       unstable_threshold_pct=25.0))
    assert row.status == "PASS"


def test_an_unstable_baseline_warns(tmp_path):
    # Rows 1400, 1600, 1700: spread 18.8%.
    rows_path = write_csv(tmp_path, [result(v) for v in (1400.0, 1600.0, 1700.0)])
    row = one(bl.judge({"images_per_sec": PASSING}, bl.load_baseline(rows_path), run=RUN,
                       host="h"))
    assert (row.status, row.reason) == ("WARN", "unstable")
    assert "repeats: spread 18.8% over 3 repeats" in row.expectation
    # One row of --num_runs=2 that its run marked unstable.
    single = result(1600.0, extra={"num_runs": 2, "spread_pct": 25.2, "unstable": True})
    row = one(bl.judge({"images_per_sec": PASSING},
                       bl.load_baseline(write_csv(tmp_path, [single], "single.csv")), run=RUN,
                       host="h"))
    assert (row.status, row.reason) == ("WARN", "unstable")
    assert "repeats: spread 25.2% over 2 repeats" in row.expectation


def test_only_ok_training_rows_count(tmp_path):
    inference = result(5000.0)
    inference.mode = "forward_only"
    path = write_csv(tmp_path, [result(900.0, status="error", error="boom"), inference,
                                result(1600.0)])
    assert bl.load_baseline(path).runs[0].figures["images_per_sec"] == [1600.0]
    failed = write_csv(tmp_path, [result(0.0, status="oom", error="OOM")], "failed.csv")
    with pytest.raises(UsageError) as err:
        bl.load_baseline(failed)
    assert str(err.value) == ("--baseline=%s is not a tfbench result: it holds no measured "
                              "training run" % failed)


@pytest.mark.parametrize("other, text", [
    (dict(model="vgg16"), "vgg16 fp16 batch 64 on 8x H100 80GB SXM"),
    (dict(gpu="NVIDIA A100-SXM4-80GB"), "resnet50 fp16 batch 64 on 8x A100 80GB SXM"),
    (dict(precision="fp32"), "resnet50 fp32 batch 64 on 8x H100 80GB SXM"),
    (dict(batch=128), "resnet50 fp16 batch 128 on 8x H100 80GB SXM")])
def test_a_baseline_of_another_configuration_is_refused_naming_both(tmp_path, other, text):
    path = write_csv(tmp_path, [result(1600.0, **other)])
    base = bl.load_baseline(path)
    with pytest.raises(UsageError) as err:
        base.select(RUN)
    assert str(err.value) == ("--baseline=%s is %s; this validation runs resnet50 fp16 batch "
                              "64 on 8x H100 80GB SXM" % (path, text))
    # Found only after the run: SKIP rows that say so, the measurement kept.
    row = one(bl.judge({"images_per_sec": PASSING}, base, run=RUN, host="h"))
    assert (row.status, row.reason, row.value) == ("SKIP", "no_expectation", 1552.0)
    assert row.expectation == str(err.value)


def _refused(path):
    with pytest.raises(UsageError) as err:
        bl.load_baseline(str(path))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_files_that_are_no_tfbench_result_are_refused_in_one_line(tmp_path):
    assert _refused(tmp_path / "nope.csv") == "--baseline=%s: no such file" % (
        tmp_path / "nope.csv")
    assert _refused(tmp_path) == "--baseline=%s: no such file (the directory holds no " \
                                 "validate.json)" % tmp_path
    other = tmp_path / "other.csv"
    other.write_text("name,value\na,1\n")
    assert _refused(other) == ("--baseline=%s is not a tfbench result: a CSV file without "
                               "tfbench's columns (images_per_sec, model, run_id, "
                               "schema_version, status)" % other)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert _refused(empty).endswith("a CSV file without tfbench's columns (images_per_sec, "
                                    "model, run_id, schema_version, status)")
    blob = tmp_path / "weights.bin"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    assert _refused(blob) == "--baseline=%s is not a tfbench result: not a text file" % blob
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "tfbench.validate",\n "figures": [')
    assert _refused(broken) == "--baseline=%s is not a tfbench result: invalid JSON (line 2)" \
        % broken
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"results": [1, 2]}')
    assert _refused(foreign) == ("--baseline=%s is not a tfbench result: a JSON file that is "
                                 "neither a validate.json nor a run's JSON manifest" % foreign)


def test_a_validate_json_of_another_version_or_without_figures_is_refused(tmp_path):
    path = write_validate_json(tmp_path, {"images_per_sec": [1.0]}, schema_version=2)
    assert _refused(path) == ("--baseline=%s is not a tfbench result: a validate.json of "
                              "schema_version 2; this tfbench reads 1" % path)
    path = write_validate_json(tmp_path, {}, figures=None)
    assert _refused(path).endswith('a validate.json without its "figures" list')
    path = write_validate_json(tmp_path, {}, figures=[{"figure": "images_per_sec",
                                                       "values": ["fast"]}])
    assert _refused(path).endswith("figures[0] lacks model, precision, batch_size, "
                                   "num_devices, gpu")
    path = write_validate_json(tmp_path, {}, figures=[])
    assert _refused(path).endswith("it holds no measured training run")


def test_a_directory_holding_a_validate_json_is_read(tmp_path):
    _validate_json_baseline(tmp_path)
    assert bl.load_baseline(str(tmp_path)).kind == "validate.json"


