"""`tfbench evaluate --quick` for real, at a tiny size: one of the method's models, two modes,
each run a real `python -m tfbench` child on the CPU; the report, and its browser check when
Chromium is installed. (The method's logic is tested with a fake child in
cli/test_evaluate.py.)"""

import json
import os

import pytest

from helpers import read_rows, run_cli
from tfbench.report import browser_check, tables

pytestmark = pytest.mark.slow


def test_a_tiny_quick_evaluation_on_the_cpu(tmp_path):
    out = tmp_path / "ev"
    code, output, errors_ = run_cli(
        ["evaluate", "--quick", "--models=vit_tiny", "--modes=native,mixed",
         "--train_batch_size=4", "--train_steps=2", "--warmup_steps=1", "--latency_steps=4",
         "--repeats=2", "--device=cpu", "--out_dir=%s" % out], cwd=str(tmp_path), timeout=600,
        merged=False)
    assert code == 0, errors_[-3000:]
    rows = read_rows(out / "evaluation.csv")
    assert [(r["model"], r["mode"], r["precision"], r["status"]) for r in rows] == [
        ("vit_tiny", kind, prec, "ok") for prec in ("fp32", "bf16") for kind in ("training", "forward_only")]
    assert {(r["image_size"], r["num_runs"]) for r in rows} == {("32", "2")}
    seeds = set()
    for r in rows:
        with open(out / "runs" / (r["run_id"] + ".json")) as handle:
            seeds.add(json.load(handle)["flags"]["tf_random_seed"])
    assert seeds == {1234}
    assert [r["batch_size"] for r in rows[:2]] == ["4", "1"]
    assert "mixed precision: bf16 (--device=cpu); quick mode" in errors_
    assert "4/4 runs" in errors_
    md = (out / "report" / "report.md").read_text()
    first = tables.parse_markdown(md)
    assert [r["Model"] for r in first] == ["vit_tiny"]
    assert all(float(r["Training images/sec"].replace(",", "")) > 0
               and float(r["Inference p50 (ms, batch 1)"]) > 0 for r in first)
    assert len(os.listdir(out / "report" / "plots")) == 3   # throughput, latency, memory
    last = output.strip().splitlines()[-1]
    if browser_check.find_browser():
        assert last.startswith("browser check passed at 1280 px: 3 images loaded"), last
        assert (out / "report" / "screenshot.png").stat().st_size > 10000
    else:
        assert last.startswith("browser check: skipped (no Chromium found")
