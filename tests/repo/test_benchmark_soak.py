"""The soak benchmark's analysis (the benchmark itself runs outside the test suite)."""

import os
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import soak  # noqa: E402


def test_flat_run_has_no_growth_or_trend():
    samples = [{"phase": "start", "rss_bytes": 100}, {"phase": "warmup", "rss_bytes": 150},
               {"phase": "steady_start", "rss_bytes": 200}, {"phase": "timed", "rss_bytes": 202},
               {"phase": "end", "rss_bytes": 204}]
    out = soak.analyse([0.01] * 1000, samples)
    assert out["memory_growth_pct"] == pytest.approx(2.0)
    assert out["slowdown_pct"] == pytest.approx(0.0)
    assert out["trend_pct_per_1000_steps"] == pytest.approx(0.0, abs=1e-9)


def test_slowing_run_is_detected():
    times = [0.01 + 0.00001 * i for i in range(1000)]
    out = soak.analyse(times, [{"phase": "steady_start", "rss_bytes": 100},
                               {"phase": "end", "rss_bytes": 120}])
    assert out["memory_growth_pct"] == pytest.approx(20.0)
    assert out["slowdown_pct"] > 50
    assert out["trend_pct_per_1000_steps"] > 50
