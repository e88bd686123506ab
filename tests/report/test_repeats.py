"""tfbench.report.repeats: one configuration's repeats summarised by the rule of --num_runs and
`tfbench evaluate`, and the verdict and notes every table shows."""

import numpy as np
import pandas as pd
import pytest

from tfbench.report import repeats


def test_several_rows_are_repeats_and_one_row_keeps_its_own_num_runs():
    rows = pd.DataFrame({"images_per_sec": [469.5, 302.9]})
    got = repeats.summarize(rows)
    assert (got["num_runs"], got["images_per_sec_min"], got["images_per_sec_max"]) == (
        2, 302.9, 469.5)
    assert got["spread_pct"] == pytest.approx((469.5 - 302.9) / 386.2 * 100)
    assert (got["unstable"], got["stable"]) == (1, "no")
    assert repeats.summarize(rows, unstable_threshold_pct=50.0)["stable"] == "yes"
    own = pd.DataFrame({"images_per_sec": [100.0], "num_runs": [3], "images_per_sec_min": [99.0],
                        "images_per_sec_max": [101.0], "spread_pct": [2.0], "unstable": [0]})
    assert repeats.summarize(own)["stable"] == "yes"
    once = repeats.summarize(pd.DataFrame({"images_per_sec": [100.0]}))
    assert once["num_runs"] == 1 and np.isnan(once["spread_pct"]) and once["stable"] == ""


def test_the_verdict_needs_every_run_and_a_repeat():
    ok = pd.Series({"num_runs": 3, "unstable": 0})
    bad = pd.Series({"num_runs": 3, "unstable": 1})
    single = pd.Series({"num_runs": 1, "unstable": np.nan})
    assert repeats.stable([ok, ok]) == "yes"
    assert repeats.stable([ok, bad]) == "no"
    assert repeats.stable([ok, None]) == ""
    assert repeats.stable([single]) == ""


def test_tables_with_repeats_show_them_and_name_the_unstable_points():
    table = pd.DataFrame({"batch_size": [16, 32], "images_per_sec": [386.2, 380.0],
                          "images_per_sec_min": [302.9, 380.0],
                          "images_per_sec_max": [469.5, 380.0], "num_runs": [2, 2],
                          "spread_pct": [43.14, 0.0], "unstable": [1, 0],
                          "stable": ["no", "yes"]})
    assert repeats.with_repeats(table, ["batch_size", "images_per_sec", "knee"]) == [
        "batch_size", "images_per_sec", "images_per_sec_min", "images_per_sec_max", "num_runs",
        "spread_pct", "stable", "knee"]
    assert repeats.with_repeats(table.assign(num_runs=1), ["images_per_sec"]) == [
        "images_per_sec"]
    assert repeats.unstable_text(table.iloc[0]) == " (UNSTABLE: spread 43.1% over 2 repeats)"
    assert repeats.unstable_text(table.iloc[1]) == ""
    assert repeats.note(table, ["batch_size"], 10.0).endswith(
        "(unstable above 10%). Unstable: batch_size=16 (spread 43.1% over 2 repeats)")
