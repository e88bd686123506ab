"""`tfbench history page` (history.page): index.html and a plot per series, the series that
changed first with what changed; checked in the system's headless Chromium as the evaluation
report is (skipped without it). Plots take over half a second: the module is slow.

The store is planted by hand (every expected median, percentage and text is worked out here):
gpu-node-1 loses 8.0% when its driver changes, gpu-node-2 gains 6.0% with nothing recorded
changing, gpu-node-3 holds its level with one slow run.
"""

import argparse
import datetime
import io
import os
import re
import warnings

import numpy as np
import pytest
from matplotlib import dates as mdates

from history_results import START, MemoryStore, add_series, fleet_store
from tfbench.cli import history as history_cli
from tfbench.cli import main as cli_main
from tfbench.errors import EXIT_OK, UsageError
from tfbench.history import page
from tfbench.history import series as hs
from tfbench.report import browser_check

pytestmark = pytest.mark.slow

BEFORE = [1000, 1004, 996, 1002, 998, 1000, 1003, 997]          # median 1000
AFTER = [920, 924, 916, 921, 919, 922, 918, 920]                # median 920: -8.0%
LOW = [950, 952, 948, 951, 949, 950, 953, 947, 950, 950]        # median 950
HIGH = [1007, 1009, 1005, 1008, 1006, 1007]                     # median 1007: +6.0%
NAME = "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-%d"
needs_chromium = pytest.mark.skipif(browser_check.find_browser() is None,
                                    reason="no Chromium on this machine (apt-get install "
                                           "chromium)")


def planted():
    s = MemoryStore()
    add_series(s, BEFORE + AFTER + [None], prefix="w", host="gpu-node-1",
               drivers=["570.86.15"] * 8 + ["580.65.06"] * 9)
    add_series(s, LOW + HIGH, prefix="b", host="gpu-node-2")
    flat = BEFORE + BEFORE
    flat[11] = 780.0                                              # one slow run
    add_series(s, flat, prefix="f", host="gpu-node-3", spreads=[2.0] * 16)
    return s


def args(out_dir, **kw):
    base = dict(figure="images_per_sec", model=None, host=None, gpu=None, after=None,
                before=None, out_dir=str(out_dir), threshold_pct=5.0, max_plots=60,
                browser_check=False)
    base.update(kw)
    return argparse.Namespace(**base)


def write(store, out_dir, **kw):
    out = io.StringIO()
    code = page.main(store, args(out_dir, **kw), out)
    with open(os.path.join(str(out_dir), "index.html"), encoding="utf-8") as handle:
        return code, out.getvalue(), handle.read()


def images(html):
    return re.findall(r"<img src='([^']+)'", html)


def test_the_page_puts_what_moved_first_with_what_changed(tmp_path):
    code, line, html = write(planted(), tmp_path)
    assert code == EXIT_OK
    # Latest values 920 (its last run failed), 1007, 997: the fleet's median 997, and
    # gpu-node-1 is 920 / 997 - 1 = 7.7% below it.
    assert line == ("History page: %s (2 of 3 series changed; 1 worse, 1 better; 1 fleet "
                    "outlier; 3 plots)\n" % (tmp_path / "index.html"))
    assert "<p class='status-line'>2 of 3 series changed; 1 worse, 1 better; 1 fleet " \
           "outlier</p>" in html
    changes = re.findall(r"<li>(.*?)</li>", html)
    assert changes == [
        "<b class='worse'>worse -8.0%</b> " + NAME % 1 + ", from 2026-10-09 (run w-08): "
        "NVIDIA driver 570.86.15 -&gt; 580.65.06",
        "<b class='better'>better +6.0%</b> " + NAME % 2 + ", from 2026-10-11 (run b-10): "
        "no recorded environment change"]
    # The summary comes before any plot or table.
    assert html.index("status-line") < html.index("<img") < html.index("<table")
    shown = images(html)
    assert [os.path.basename(p).split("_gpu_node_")[1][0] for p in shown] == ["1", "2", "3"]
    assert html.index("Series that changed") < html.index(shown[1]) < \
        html.index("Series without a change") < html.index(shown[2])
    assert "gpu-node-1: 7.7% below the median of 3 hosts" in html
    # Only what the docs list: index.html and a plot per series.
    assert sorted(os.listdir(tmp_path)) == ["index.html", "plots"]
    assert sorted(os.listdir(tmp_path / "plots")) == sorted(os.path.basename(p) for p in shown)


def test_the_tables_highlight_changes_and_fleet_outliers(tmp_path):
    _, _, html = write(planted(), tmp_path)
    rows = re.findall(r"<tr class='([^']*)'><td>([^<]*)</td>", html)
    changes = html[html.index("<h2>Change points</h2>"):html.index("<h2>Fleet by host</h2>")]
    assert re.findall(r"<tr class='([^']*)'><td>([^<]*)</td>", changes) == [
        ("status-fail", NAME % 1), ("status-pass", NAME % 2)]
    # What changed, each change's first run, its medians and its day.
    for cell in ("NVIDIA driver 570.86.15 -&gt; 580.65.06", "w-08", "2026-10-09 00:00",
                 "1,000.0", "920.0", "-8.0%", "worse", "8/8", "b-10", "950.0", "1,007.0",
                 "+6.0%", "better", "10/6", "no recorded environment change"):
        assert "<td>%s</td>" % cell in changes
    fleet = html[html.index("<h2>Fleet by host</h2>"):]
    fleet = fleet[:fleet.index("</table>")]
    assert re.findall(r"<tr class='status-warn'><td>[^<]*</td><td>([^<]*)</td>", fleet) == \
        ["gpu-node-1"]
    assert ("status-fail", NAME % 1) in rows and ("", NAME % 3) in rows   # every series
    assert "<td>f-11</td>" in html and "<td>780.0</td>" in html           # the outlier


def _entry(store, host):
    found = hs.build(hs.filtered(store.frame(), host=host), "images_per_sec")
    (entry,) = page.entries(found, store.environment())
    return entry


def _day(day):
    return mdates.date2num(START.replace(tzinfo=None) + datetime.timedelta(days=day))


def test_a_plot_marks_the_change_with_what_changed_and_the_levels(tmp_path):
    entry = _entry(planted(), "gpu-node-1")
    fig = page.series_plot(entry, str(tmp_path / "p.png"))
    ax = fig.axes[0]
    # The change between the last run before (day 7) and the first after (day 8).
    (vertical,) = [ln for ln in ax.lines if len(set(ln.get_xdata())) == 1
                   and list(ln.get_ydata()) == [0, 1]]
    assert mdates.date2num(vertical.get_xdata()[0]) == pytest.approx(_day(7.5))
    assert vertical.get_color() == "tab:red"
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["worse -8.0%\nNVIDIA driver 570.86.15 -> 580.65.06"]
    # Each segment's level, over its own runs.
    levels = sorted((seg[0][1], round(seg[0][0] - _day(0)), round(seg[1][0] - _day(0)))
                    for c in ax.collections for seg in c.get_segments()
                    if len(seg) == 2 and seg[0][1] == seg[1][1])
    assert levels == [(920.0, 8, 15), (1000.0, 0, 7)]
    # The failed run (day 16) at the bottom, with no value.
    (failed,) = [ln for ln in ax.lines if ln.get_marker() == "v"]
    assert mdates.date2num(failed.get_xdata()[0]) == pytest.approx(_day(16))
    assert "2 runs" not in ax.get_title() and "17 runs (1 failed)" in ax.get_title()
    assert os.path.getsize(tmp_path / "p.png") > 10000


def test_a_plot_shows_each_run_s_spread_and_its_outliers(tmp_path):
    entry = _entry(planted(), "gpu-node-3")
    fig = page.series_plot(entry, str(tmp_path / "p.png"))
    ax = fig.axes[0]
    (outlier,) = [ln for ln in ax.lines if ln.get_marker() == "X"]
    assert list(outlier.get_ydata()) == [780.0]
    assert mdates.date2num(outlier.get_xdata()[0]) == pytest.approx(_day(11))
    # spread_pct 2 over 3 repeats: +-1% of each run's value.
    bars = [seg for c in ax.collections for seg in c.get_segments()
            if len(seg) == 2 and seg[0][0] == seg[1][0]]
    flat = [v for i, v in enumerate(BEFORE + BEFORE) if i != 11]
    assert sorted((round(a[1], 6), round(b[1], 6)) for a, b in bars) == \
        sorted((round(v * 0.99, 6), round(v * 1.01, 6)) for v in flat)
    assert [t.get_text() for t in ax.texts] == []                 # no change, no label
    low, high = ax.get_ylim()
    assert low < 780.0 and high > 1004 * 1.01


def test_a_series_of_failed_runs_or_of_one_run_is_drawn_quietly(tmp_path):
    s = MemoryStore()
    add_series(s, [None, None, None], prefix="oom", host="gpu-node-1")
    add_series(s, [1000.0], prefix="one", host="gpu-node-2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # numpy's and matplotlib's too
        code, line, html = write(s, tmp_path)
    assert code == EXIT_OK and line.endswith("(0 of 2 series changed; 2 plots)\n")
    failed = page.series_plot(_entry(s, "gpu-node-1"), str(tmp_path / "f.png")).axes[0]
    assert failed.get_title().endswith("3 runs (3 failed); no value")
    assert len([ln for ln in failed.lines if ln.get_marker() == "v"][0].get_xdata()) == 3


def test_max_plots_draws_the_series_that_changed_first(tmp_path):
    code, line, html = write(planted(), tmp_path, max_plots=1)
    assert code == EXIT_OK and line.endswith("; 1 plots)\n")
    (only,) = images(html)
    assert "gpu_node_1" in only and os.listdir(tmp_path / "plots") == [os.path.basename(only)]
    assert "Plots: 1 of 3 series (those that changed first; --max_plots)" in html
    every = html[html.index("<h2>Every series"):]
    assert "<td>%s</td>" % (NAME % 3) in every                  # the table still lists it


def test_the_filters_and_the_figure_choose_the_series(tmp_path):
    code, line, html = write(planted(), tmp_path, host="gpu-node-2")
    assert "(1 of 1 series changed; 1 better; 1 plots)" in line
    assert "Filters: host gpu-node-2" in html
    s = MemoryStore()
    for host, values in (("gpu-node-1", [4.0, 4.02, 3.98, 4.01, 3.99, 4.0]
                          + [3.6, 3.618, 3.582, 3.6, 3.618, 3.582]),
                         ("gpu-node-2", [4.0, 4.02, 3.98] * 4)):
        add_series(s, values, prefix=host, host=host, model="vit_b16", mode="forward_only",
                   figure="latency_ms_p50")
    code, line, html = write(s, tmp_path / "latency", figure="latency_ms_p50")
    assert "(1 of 2 series changed; 1 better; " in line          # -10% latency is better
    assert "Figure: p50 latency (ms) (lower is better)" in html


def test_an_empty_history_gives_a_page_that_says_so(tmp_path):
    code, line, html = write(MemoryStore(), tmp_path)
    assert code == EXIT_OK and line.endswith("(no results yet; 0 plots)\n")
    assert "<p class='status-line'>no results yet</p>" in html and "<img" not in html
    code, line, html = write(planted(), tmp_path / "none", model="vgg*")
    assert line.endswith("(no results match the filters; 0 plots)\n")


def test_a_bad_figure_writes_nothing(tmp_path):
    with pytest.raises(UsageError, match="^--figure=latency is not a numeric figure"):
        page.main(planted(), args(tmp_path / "out", figure="latency"), io.StringIO())
    with pytest.raises(UsageError, match="^--before=tomorrowish is not a date"):
        page.main(planted(), args(tmp_path / "out", before="tomorrowish"), io.StringIO())
    with pytest.raises(UsageError, match="^--max_plots=-1: give 0 or more$"):
        page.main(planted(), args(tmp_path / "out", max_plots=-1), io.StringIO())
    assert not os.path.exists(tmp_path / "out")


def test_the_command_prints_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(history_cli, "_store", lambda value: planted())
    assert cli_main(["tfbench", "history", "page", "--out_dir=%s" % tmp_path]) == EXIT_OK
    out, err = capsys.readouterr()
    assert err == "" and out.count("\n") == 1 and out.startswith("History page: %s"
                                                                 % (tmp_path / "index.html"))


@needs_chromium
def test_the_page_passes_the_browser_check_at_1280_px(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(history_cli, "_store", lambda value: fleet_store())
    assert cli_main(["tfbench", "history", "page", "--out_dir=%s" % tmp_path,
                     "--browser_check"]) == EXIT_OK
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("History page: ") and first.endswith("; 7 plots)")
    assert second.startswith("browser check passed at 1280 px: 7 images loaded, 4 of 4 "
                             "tables fit the page")
    assert sorted(os.listdir(tmp_path)) == ["browser_check.json", "index.html", "plots",
                                            "screenshot.png"]
    with open(tmp_path / "screenshot.png", "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


@needs_chromium
def test_a_page_of_many_series_fits_the_browser(tmp_path):
    s = MemoryStore()
    for k in range(12):
        values = [1000.0 + k + 3 * (i % 3) for i in range(12)]
        if k % 4 == 0:
            values = values[:6] + [v * 0.9 for v in values[6:]]
        add_series(s, values, prefix="s%d" % k, host="node-with-a-long-name-%02d" % k,
                   model=("resnet50", "efficientnet_b7", "vit_b16")[k % 3])
    code, _, html = write(s, tmp_path, max_plots=12)
    result = browser_check.check(str(tmp_path / "index.html"), None)
    assert result.ok, result.summary()
    assert result.images == 12 and result.broken_images == []
    assert np.all([os.path.exists(tmp_path / p) for p in images(html)])
