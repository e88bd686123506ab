"""`tfbench history`, `history changes` and `history fleet` (history.views) through the command
line in this process (tfbench.cli.main, its store a MemoryStore), and end to end on a SQLite
store in a fresh `python -m tfbench` that never imports TensorFlow.

The stores hold series with a planted change; every expected cell (medians, percentages, dates,
sparklines, texts) is worked out by hand in the test.
"""

import csv
import io
import os
import subprocess
import sys
import textwrap

import pytest

from history_results import MemoryStore, add, add_series, open_store
from paths import ROOT
from tfbench.cli import history as history_cli
from tfbench.cli import main as cli_main
from tfbench.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
from tfbench.report import tables

# gpu-node-1: around 1000 images/sec (median 1000) for eight days, then around 920 (median 920)
# from run 8 on 2026-10-09, when its driver went 570.86.15 -> 580.65.06: -8.0%, worse. A failed
# run on 2026-10-17 ends it.
BEFORE = [1000, 1004, 996, 1002, 998, 1000, 1003, 997]
AFTER = [920, 924, 916, 921, 919, 922, 918, 920]
WORSE = "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-1"
# gpu-node-2: 950 (median 950) for ten days, then 1007 (median 1007) from 2026-10-11: +6.0%,
# better, nothing recorded changed.
LOW = [950, 952, 948, 951, 949, 950, 953, 947, 950, 950]
HIGH = [1007, 1009, 1005, 1008, 1006, 1007]
BETTER = "resnet50 training fp16 bs64 224px on NVIDIA H100 80GB HBM3 @ gpu-node-2"


def fill(s):
    add_series(s, BEFORE + AFTER + [None], prefix="w", host="gpu-node-1",
               drivers=["570.86.15"] * 8 + ["580.65.06"] * 9)
    add_series(s, LOW + HIGH, prefix="b", host="gpu-node-2")
    return s


@pytest.fixture
def history(monkeypatch, capsys):
    """history(store, *argv) -> (exit code, stdout, stderr) of `tfbench history ARGV`."""
    def run(store, *argv):
        monkeypatch.setattr(history_cli, "_store", lambda value: store)
        code = cli_main(["tfbench", "history", *argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def csv_of(text):
    return list(csv.DictReader(io.StringIO(text)))


# --- tfbench history -------------------------------------------------------------------------

def test_the_series_list(history):
    code, out, err = history(fill(MemoryStore()), "--format=csv")
    assert (code, err) == (EXIT_OK, "")
    rows = {r["Series"]: r for r in csv_of(out)}
    assert rows[WORSE] == {
        "Series": WORSE, "Runs": "17", "Failed": "1", "First": "2026-10-01",
        "Last": "2026-10-17",                       # the failed run's day
        "Last value": "920.0",                       # the last run with a value
        "Current level (median)": "920.0", "Change vs previous level": "-8.0%",
        # 916 to 1004 in eight bins of 11: every run before in the top one, every run after
        # in the bottom one
        "Trend": "█" * 8 + "▁" * 8}
    assert rows[BETTER]["Current level (median)"] == "1,007.0"
    assert rows[BETTER]["Change vs previous level"] == "+6.0%"


def test_the_list_in_text_and_markdown(history):
    code, out, _ = history(fill(MemoryStore()), "--model=resnet*")
    lines = out.splitlines()
    assert code == EXIT_OK
    assert lines[0] == "History at memory: 2 series of images_per_sec (images/sec)"
    assert lines[1].split()[:2] == ["Series", "Runs"] and set(lines[2]) <= {"-", " "}
    assert lines[3].startswith(WORSE) and lines[4].startswith(BETTER)    # by name
    code, out, _ = history(fill(MemoryStore()), "--format=markdown", "--host=gpu-node-1")
    assert out.splitlines()[0] == "History at memory: 1 series of images_per_sec (images/sec)"
    (row,) = tables.parse_markdown(out)
    assert (row["Series"], row["Runs"], row["Failed"]) == (WORSE, "17", "1")


def test_an_empty_list_says_why(history):
    assert history(MemoryStore())[1].splitlines()[-1] == "no results yet"
    assert history(fill(MemoryStore()), "--gpu=*B200*")[1].splitlines()[-1] == \
        "no results match the filters"


# --- tfbench history changes -----------------------------------------------------------------

def test_each_change_with_its_medians_direction_and_what_changed(history):
    code, out, _ = history(fill(MemoryStore()), "changes", "--format=csv")
    assert code == EXIT_OK                           # no --since: nothing to gate on
    rows = {r["Series"]: r for r in csv_of(out)}
    assert rows[WORSE] == {
        "Series": WORSE, "First run after": "w-08", "Date": "2026-10-09T00:00:00",
        "Before (median)": "1,000.0", "After (median)": "920.0", "Change": "-8.0%",
        "Direction": "worse", "p": rows[WORSE]["p"], "Runs before/after": "8/8",
        "What changed": "NVIDIA driver 570.86.15 -> 580.65.06"}
    assert float(rows[WORSE]["p"]) < 0.001
    better = rows[BETTER]
    assert (better["First run after"], better["Before (median)"], better["After (median)"],
            better["Change"], better["Direction"], better["Runs before/after"],
            better["What changed"]) == ("b-10", "950.0", "1,007.0", "+6.0%", "better", "10/6",
                                        "no recorded environment change")


@pytest.mark.parametrize("since, code, listed", [
    ("2026-10-09", EXIT_REGRESSION, {"w-08", "b-10"}),   # the regression starts on the day
    ("2026-10-01", EXIT_REGRESSION, {"w-08", "b-10"}),
    ("2026-10-09T00:00:01", EXIT_OK, {"b-10"}),          # it started before: not reported
    ("2026-10-12", EXIT_OK, set()),
])
def test_exit_9_only_when_a_regression_starts_within_since(history, since, code, listed):
    got, out, err = history(fill(MemoryStore()), "changes", "--since=" + since, "--format=csv")
    assert (got, err) == (code, "")
    assert {r["First run after"] for r in csv_of(out)} == listed


def test_an_improvement_alone_exits_0(history):
    s = MemoryStore()
    add_series(s, LOW + HIGH, prefix="b", host="gpu-node-2")
    code, out, _ = history(s, "changes", "--since=2026-10-01")
    assert code == EXIT_OK and "better" in out


@pytest.mark.parametrize("after, code, way", [(4.40, EXIT_REGRESSION, "worse"),
                                              (3.80, EXIT_OK, "better")])
def test_latency_going_up_is_the_regression(history, after, code, way):
    s = MemoryStore()
    # medians 4.0 ms, then `after`
    for day, value in enumerate([4.00, 4.02, 3.98, 4.01, 3.99, 4.00]
                                + [after * f for f in (1, 1.005, 0.995) * 2]):
        add(s, "l%02d" % day, day, value, model="vit_b16", mode="forward_only",
            figure="latency_ms_p50", images_per_sec=64000.0 / value)
    got, out, _ = history(s, "changes", "--figure=latency_ms_p50", "--since=2026-10-01",
                          "--format=csv")
    (row,) = csv_of(out)
    pct = "%+.1f%%" % ((after / 4 - 1) * 100)      # +10.0% / -5.0%
    assert (got, row["Direction"], row["Before (median)"], row["After (median)"],
            row["Change"]) == (code, way, "4", "%g" % after, pct)
    # The same runs by images/sec moved the other way, and are just as worse (better).
    got, out, _ = history(s, "changes", "--since=2026-10-01", "--format=csv")
    (row,) = csv_of(out)
    assert (got, row["Direction"], row["Change"][0]) == (code, way, "-" if pct[0] == "+" else "+")


def test_outliers_are_listed_apart_from_changes(history):
    s = MemoryStore()
    values = BEFORE + BEFORE
    values[11] = 780.0                               # one slow run: -22%
    add_series(s, values, prefix="o")
    code, out, _ = history(s, "changes")
    lines = out.splitlines()
    assert code == EXIT_OK and lines[1] == "no change points"
    at = lines.index("Outliers (single runs far from their level; not changes):")
    assert lines[at + 3].split() == WORSE.split() + ["o-11", "2026-10-12T00:00:00", "780.0"]


def test_the_changes_text_names_the_figure_and_since(history):
    code, out, _ = history(fill(MemoryStore()), "changes", "--since=2026-10-09")
    assert out.splitlines()[0] == ("Change points of images_per_sec (images/sec), in 2 series "
                                   "since 2026-10-09T00:00:00")
    (row,) = [ln for ln in out.splitlines() if ln.startswith(WORSE)]
    cells = row[len(WORSE):].split()
    assert cells[:6] == ["w-08", "2026-10-09T00:00:00", "1,000.0", "920.0", "-8.0%", "worse"]
    assert cells[7:] == ["8/8", "NVIDIA", "driver", "570.86.15", "->", "580.65.06"]


# --- tfbench history fleet -------------------------------------------------------------------

def test_the_fleet_names_its_outliers(history):
    s = MemoryStore()
    for n, values in enumerate(([800.0, 1000.0], [1010.0], [990.0], [1000.0, 900.0]), 1):
        add_series(s, values, prefix="h%d" % n, host="gpu-node-%d" % n)
    code, out, _ = history(s, "fleet")
    assert code == EXIT_OK
    text = out.splitlines()
    assert text[0] == ("Fleet by host, images_per_sec (images/sec): each member's latest value "
                       "against the median of the members' latest values")
    # Latest values 1000, 1010, 990, 900: median 995; 900 / 995 - 1 = -9.5%.
    (four,) = [ln for ln in text if " gpu-node-4 " in ln]
    assert four.split()[-13:] == ["gpu-node-4", "900.0", "995.0", "4", "-9.5%", "gpu-node-4:",
                                  "9.5%", "below", "the", "median", "of", "4", "hosts"]
    assert "gpu-node-3: " not in out                    # 990: 0.5% below, within 5%
    gpu = text.index("Fleet by gpu, images_per_sec (images/sec): each member's latest value "
                     "against the median of the members' latest values")
    assert any(ln.endswith("GPU-gpu-node-4: 9.5% below the median of 4 GPUs")
               for ln in text[gpu:])
    code, out, _ = history(s, "fleet", "--threshold_pct=0.4")
    assert "gpu-node-3: 0.5% below the median of 4 hosts" in out
    assert "gpu-node-1: 0.5% above the median of 4 hosts" in out


# --- refused in one line ---------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--figure=latency"], "--figure=latency is not a numeric figure of the history; did you "
                           "mean latency_ms_p50, latency_ms_p90, latency_ms_p99, "
                           "latency_ms_mean"),
    (["changes", "--figure=imagesps"], "--figure=imagesps is not a numeric figure of the "
                                       "history (docs/csv.md lists them)"),
    (["fleet", "--after=last tuesday"], "--after=last tuesday is not a date"),
    (["changes", "--since=soon"], "--since=soon is not a date"),
    (["--format=html"], "list: argument --format: invalid choice: 'html'"),
    (["page", "--figure=latency"], "--figure=latency is not a numeric figure"),
])
def test_bad_input_is_one_line_and_exit_2(history, argv, message):
    code, out, err = history(fill(MemoryStore()), *argv)
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and err.startswith("tfbench: error: " + message)
    assert "Traceback" not in err


# --- end to end on a SQLite store, without TensorFlow ----------------------------------------

_CHILD = textwrap.dedent("""
    import os, runpy, sys
    exit_ = os._exit
    def report(code):
        sys.stdout.write("tensorflow imported: %s\\n" % ("tensorflow" in sys.modules))
        sys.stdout.flush()
        exit_(code)
    os._exit = report          # the entry point ends with os._exit
    sys.argv = ["tfbench"] + sys.argv[1:]
    runpy.run_module("tfbench", run_name="__main__", alter_sys=True)   # python -m tfbench
""")


@pytest.mark.slow
def test_python_m_tfbench_history_never_imports_tensorflow(tmp_path):
    path = str(tmp_path / "h.sqlite")
    store = open_store(path)
    store.add_many(fill(MemoryStore()).recorded)
    store.close()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TFBENCH_HISTORY", None)
    for argv, code, expect in (
            (["history", "--history=" + path], EXIT_OK, WORSE),
            (["history", "changes", "--since=2026-10-09", "--history=" + path], EXIT_REGRESSION,
             "NVIDIA driver 570.86.15 -> 580.65.06"),
            (["history", "fleet", "--history=" + path], EXIT_OK, "Fleet by host"),
            (["history", "page", "--history=" + path, "--out_dir=" + str(tmp_path / "page")],
             EXIT_OK, "History page: ")):
        proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], env=env, cwd=str(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=300)
        assert proc.returncode == code, proc.stderr[-2000:]
        assert expect in proc.stdout and proc.stderr == ""
        assert proc.stdout.splitlines()[-1] == "tensorflow imported: False", argv


@pytest.mark.slow
def test_the_history_flag_names_a_sqlite_store(tmp_path, capsys):
    path = str(tmp_path / "h.sqlite")
    store = open_store(path)
    store.add_many(fill(MemoryStore()).recorded)
    store.close()
    assert cli_main(["tfbench", "history", "changes", "--history=" + path,
                     "--since=2026-10-09"]) == EXIT_REGRESSION
    out = capsys.readouterr().out
    assert "NVIDIA driver 570.86.15 -> 580.65.06" in out
    assert cli_main(["tfbench", "history", "--history=" + path]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[0] == (
        "History at %s: 2 series of images_per_sec (images/sec)" % path)
