"""benchmarks/history_changes_accuracy.py: its synthetic series and how it scores a found shift
(the benchmark itself runs outside the test suite)."""

import numpy as np
import pytest

import paths  # noqa: F401  (benchmarks/ on sys.path)
import history_changes_accuracy as bench
from tfbench.history.changes import Change, Segmentation


def change(index, pct):
    return Change(index=index, before=100.0, after=100.0 + pct, pct=pct, p_value=0.0,
                  runs_before=10, runs_after=5, noise_pct=None)


def test_a_shift_counts_as_found_within_the_tolerance_and_in_its_direction():
    found = Segmentation(changes=(change(48, -5.0),), outliers=())
    assert bench.score(found, 50, -5.0) == (True, False)
    assert bench.score(found, 50, 5.0) == (False, False)         # the wrong way
    assert bench.score(found, 51, -5.0) == (False, False)        # 3 runs off
    assert bench.score(Segmentation((change(50, -4.0),), ()), 50, -5.0) == (True, True)
    assert bench.score(Segmentation((), (50,)), 50, -5.0) == (False, False)


def test_the_series_carry_their_noise_shift_and_outliers():
    rng = np.random.default_rng(0)
    flat = bench.noisy(rng, 20000, 0.02, 0.0)
    assert np.std(flat) / np.mean(flat) == pytest.approx(0.02, rel=0.05)
    heavy = bench.noisy(rng, 20000, 0.02, 0.0, tails=5)
    assert np.std(heavy) / np.mean(heavy) == pytest.approx(0.02, rel=0.1)
    slow = bench.noisy(rng, 20000, 0.0, 0.01)
    low = slow < bench.LEVEL
    assert low.mean() == pytest.approx(0.01, abs=0.003)
    assert slow[low].min() >= bench.LEVEL * (1 - bench.OUTLIER_SLOWDOWN[1])
    assert slow[low].max() <= bench.LEVEL * (1 - bench.OUTLIER_SLOWDOWN[0])
    moved = bench.shifted(rng, 30, 5, -5.0, 0.0, 0.0)
    assert moved[:30] == pytest.approx(bench.LEVEL)
    assert moved[30:] == pytest.approx(0.95 * bench.LEVEL)
