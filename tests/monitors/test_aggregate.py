import json
import os

import pytest

from tfbench.output import csv_out
from tfbench.monitors import aggregate
from tfbench.output import console
import paths

DATA = os.path.join(paths.DATA, "nvml_samples.json")


@pytest.fixture(scope="module")
def recorded():
    with open(DATA) as handle:
        return json.load(handle)


def test_decode_throttle_names():
    assert aggregate.decode_throttle(0) == []
    assert aggregate.decode_throttle(None) == []
    assert aggregate.decode_throttle(0x44) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert aggregate.decode_throttle(0x1 | 0x200) == ["gpu_idle", "board_limit"]
    assert aggregate.decode_throttle(0x1000) == ["unknown_0x1000"]


def test_only_load_reasons_count_as_throttling():
    assert aggregate.throttling_reasons(0x1 | 0x2 | 0x10 | 0x100) == []
    assert aggregate.throttling_reasons(0x1 | 0x8) == ["hw_slowdown"]


def test_recorded_a100_summary(recorded):
    samples = recorded["samples"]
    s = aggregate.gpu_summary(samples, images=5000, images_per_sec=2400.0)
    steady = [x for x in samples if x["phase"] in ("steady", "end")]
    assert len(steady) == 21
    assert s["power_w_mean"] == pytest.approx(355.8)
    assert s["power_w_max"] == pytest.approx(401.2)
    boundary = next(x for x in samples if x["phase"] == "steady_start")
    assert s["energy_j"] == pytest.approx(samples[-1]["energy_j"] - boundary["energy_j"])
    assert s["energy_j"] == pytest.approx(3607.714)
    assert s["energy_source"] == "counter"
    assert s["joules_per_image"] == pytest.approx(3607.714 / 5000)
    assert s["images_per_sec_per_watt"] == pytest.approx(2400.0 / 355.8)
    assert s["gpu_util_pct_mean"] == pytest.approx(99.762, abs=1e-3)
    assert s["temp_c_max"] == 58
    assert s["sm_clock_mhz_mean"] == pytest.approx((18 * 1410 + 1335 + 1290 + 1350) / 21)
    assert s["throttled"] is True
    assert s["throttle_reasons"] == "sw_power_cap"
    assert s["nvml_mem_used_gb_max"] == pytest.approx((41_127_821_312 + 524_288_000) / 2**30)
    (gpu0,) = s["per_gpu"]
    assert gpu0["throttle_reasons"] == {"sw_power_cap": pytest.approx(3 / 21)}
    assert gpu0["sm_clock_mhz_min"] == 1290


def test_summary_keys_are_csv_columns(recorded):
    s = aggregate.gpu_summary(recorded["samples"], images=1, images_per_sec=1.0)
    for key in aggregate.GPU_COLUMNS + aggregate.HOST_COLUMNS:
        assert key in csv_out.COLUMN_NAMES
    assert set(aggregate.GPU_COLUMNS) <= set(s)


def test_warmup_readings_are_excluded(recorded):
    samples = recorded["samples"]
    s = aggregate.gpu_summary(samples)
    # The cool, idle start (36 C, gpu_idle) and the 71.5 W warm-up dip are not steady state.
    assert s["temp_c_max"] == 58
    assert min(x["power_w"] for x in aggregate.steady_samples(samples)) > 300
    assert s["joules_per_image"] is None and s["images_per_sec_per_watt"] is None


def test_throttle_warning_names_gpu_and_reason(recorded):
    line = console.throttle_warning(aggregate.gpu_per_device(recorded["samples"]),
                                    {0: "NVIDIA A100-SXM4-40GB"})
    assert line == ("GPU throttled during the timed run (images/sec reflects the lowered "
                    "clocks): GPU 0 [NVIDIA A100-SXM4-40GB] sw_power_cap in 14% of samples")


def test_no_warning_when_not_throttled(recorded):
    calm = [dict(x, throttle_mask=0x1 if x["phase"] == "start" else 0)
            for x in recorded["samples"]]
    assert console.throttle_warning(aggregate.gpu_per_device(calm)) is None
    assert aggregate.gpu_summary(calm)["throttled"] is False


def test_without_energy_counter_power_is_integrated(recorded):
    samples = [dict(x, energy_j=None) for x in recorded["samples"]]
    s = aggregate.gpu_summary(samples, images=5000)
    assert s["energy_source"] == "power_integral"
    # The recorded counter was accumulated the same way (trapezoids), so both agree.
    assert s["energy_j"] == pytest.approx(3607.714, abs=0.05)


def _tick(t, phase, gpu, power, energy=None, util=50, temp=40, clock=1000, mask=0):
    return {"t": t, "phase": phase, "gpu": gpu, "power_w": power, "energy_j": energy,
            "gpu_util_pct": util, "temp_c": temp, "sm_clock_mhz": clock, "throttle_mask": mask}


def test_two_gpus_power_totals_and_energy_sum():
    samples = []
    for gpu, base in ((0, 100.0), (1, 200.0)):
        samples += [
            _tick(0.0, "start", gpu, 10.0, 1000.0, util=0),
            _tick(1.0, "warmup", gpu, base / 2, 1100.0),
            _tick(2.0, "steady_start", gpu, base, 1200.0),
            _tick(3.0, "steady", gpu, base, 1200.0 + base, util=90, temp=60 + gpu),
            _tick(4.0, "end", gpu, base + 20, 1200.0 + 2 * base + 10, util=100, temp=50,
                  mask=0x40 if gpu else 0),
        ]
    s = aggregate.gpu_summary(samples, images=300, images_per_sec=150.0)
    assert s["num_gpus_monitored"] == 2
    assert s["power_w_mean"] == pytest.approx((300.0 + 340.0) / 2)  # per-tick totals
    assert s["power_w_max"] == pytest.approx(340.0)
    assert s["energy_j"] == pytest.approx(210.0 + 410.0)
    assert s["joules_per_image"] == pytest.approx(620.0 / 300)
    assert s["images_per_sec_per_watt"] == pytest.approx(150.0 / 320.0)
    assert s["gpu_util_pct_mean"] == pytest.approx(95.0)
    assert s["temp_c_max"] == 61
    assert s["throttled"] is True and s["throttle_reasons"] == "hw_thermal_slowdown"
    line = console.throttle_warning(aggregate.gpu_per_device(samples))
    assert line.endswith(": GPU 1 hw_thermal_slowdown in 50% of samples")


def test_energy_counter_missing_on_one_gpu_falls_back_for_all():
    samples = []
    for gpu in (0, 1):
        energy = (lambda e: e) if gpu == 0 else (lambda e: None)
        samples += [_tick(0.0, "steady_start", gpu, 100.0, energy(0.0)),
                    _tick(2.0, "end", gpu, 100.0, energy(200.0))]
    total, source = aggregate.gpu_energy(samples)
    assert source == "power_integral" and total == pytest.approx(400.0)


def test_counter_reset_is_not_negative_energy():
    samples = [_tick(0.0, "steady_start", 0, 100.0, 5000.0), _tick(1.0, "end", 0, 100.0, 3.0)]
    total, source = aggregate.gpu_energy(samples)
    assert source == "power_integral" and total == pytest.approx(100.0)


def test_unmarked_run_counts_everything_after_start():
    samples = [_tick(0.0, "start", 0, 10.0, util=0), _tick(1.0, "warmup", 0, 100.0, util=80),
               _tick(2.0, "end", 0, 200.0, util=100)]
    s = aggregate.gpu_summary(samples)
    assert s["power_w_mean"] == pytest.approx(150.0)
    assert s["gpu_util_pct_mean"] == pytest.approx(90.0)
    assert s["energy_j"] == pytest.approx(55.0 + 150.0)  # integral from the start sample


def test_unsupported_readings_give_none():
    samples = [{"t": 0.0, "phase": "start", "gpu": 0},
               {"t": 1.0, "phase": "end", "gpu": 0}]
    s = aggregate.gpu_summary(samples, images=10, images_per_sec=5.0)
    for key in aggregate.GPU_COLUMNS:
        assert s[key] is None, key
    assert aggregate.gpu_summary([])["power_w_mean"] is None


def test_host_summary():
    samples = [{"t": 0.0, "phase": "start", "cpu_util_pct": 0.0, "proc_cpu_pct": 0.0,
                "rss_bytes": 1 << 30},
               {"t": 1.0, "phase": "warmup", "cpu_util_pct": 20.0, "proc_cpu_pct": 30.0,
                "rss_bytes": 2 << 30},
               {"t": 1.5, "phase": "steady_start", "cpu_util_pct": 40.0, "proc_cpu_pct": 50.0,
                "rss_bytes": 2 << 30},
               {"t": 2.0, "phase": "steady", "cpu_util_pct": 80.0, "proc_cpu_pct": 150.0,
                "rss_bytes": 3 << 30},
               {"t": 3.0, "phase": "end", "cpu_util_pct": 60.0, "proc_cpu_pct": 130.0,
                "rss_bytes": 3 << 30}]
    s = aggregate.host_summary(samples)
    # Each reading weighted by the time it covers: 80% over 0.5 s, 60% over 1 s.
    assert s["cpu_util_pct_mean"] == pytest.approx((0.5 * 80 + 1.0 * 60) / 1.5)
    assert s["cpu_util_pct_max"] == pytest.approx(80.0)
    assert s["process_cpu_pct_mean"] == pytest.approx((0.5 * 150 + 1.0 * 130) / 1.5)
    assert s["host_rss_gb_max"] == pytest.approx(3.0)


# Two repeats of a timed loop with a cooldown between them and a final checkpoint after them:
# energy, power and the other steady figures cover the two timed windows only.
def _windows_run(energy=True):
    rows = [(0.0, "start", 50.0, 0.0), (1.0, "warmup", 100.0, 100.0),
            (2.0, "steady_start", 100.0, 200.0),    # repeat 1 starts
            (3.0, "steady", 300.0, 500.0),
            (4.0, "steady_end", 300.0, 800.0),      # repeat 1 ends; cooldown
            (5.0, "paused", 60.0, 860.0), (6.0, "paused", 60.0, 920.0),
            (7.0, "steady_resume", 60.0, 980.0),    # repeat 2 starts
            (8.0, "steady", 300.0, 1280.0),
            (9.0, "steady_end", 300.0, 1580.0),     # repeat 2 ends; final checkpoint
            (10.0, "paused", 80.0, 1660.0), (11.0, "end", 80.0, 1740.0)]
    return [_tick(t, phase, 0, power, e if energy else None, util=100 if power == 300 else 5,
                  temp=70 if power == 300 else 45) for t, phase, power, e in rows]


def test_figures_cover_each_timed_window_and_nothing_between():
    samples = _windows_run()
    assert [s["t"] for s in aggregate.steady_samples(samples)] == [3.0, 4.0, 8.0, 9.0]
    s = aggregate.gpu_summary(samples, images=12, images_per_sec=4.0)
    assert s["energy_j"] == pytest.approx((800.0 - 200.0) + (1580.0 - 980.0))
    assert s["energy_source"] == "counter"
    assert s["joules_per_image"] == pytest.approx(1200.0 / 12)
    assert s["power_w_mean"] == pytest.approx(300.0)
    assert s["images_per_sec_per_watt"] == pytest.approx(4.0 / 300.0)
    assert s["gpu_util_pct_mean"] == pytest.approx(100.0)
    assert s["temp_c_max"] == 70


def test_power_integral_per_window():
    s = aggregate.gpu_summary(_windows_run(energy=False), images=12)
    assert s["energy_source"] == "power_integral"
    # Trapezoids inside each window only: (2..4 s) 200 + 300, (7..9 s) 180 + 300.
    assert s["energy_j"] == pytest.approx(500.0 + 480.0)


def test_a_new_measurement_supersedes_the_earlier_windows():
    """--eval --eval_interval_secs: each evaluation is measured anew (its steps replace the
    last ones), so the figures cover the last evaluation's window only."""
    rows = [(0.0, "start", 50.0, 0.0), (1.0, "steady_start", 50.0, 50.0),
            (2.0, "steady_end", 200.0, 250.0), (3.0, "paused", 40.0, 290.0),
            (4.0, "steady_start", 40.0, 330.0), (5.0, "steady", 250.0, 580.0),
            (6.0, "steady_end", 250.0, 830.0), (7.0, "end", 40.0, 870.0)]
    samples = [_tick(t, phase, 0, power, e) for t, phase, power, e in rows]
    s = aggregate.gpu_summary(samples, images=10)
    assert s["energy_j"] == pytest.approx(830.0 - 330.0)
    assert s["power_w_mean"] == pytest.approx(250.0)


def test_host_figures_cover_the_windows_too():
    samples = [{"t": float(t), "phase": phase, "cpu_util_pct": cpu, "proc_cpu_pct": cpu,
                "rss_bytes": 1 << 30}
               for t, phase, cpu in ((0, "start", None), (1, "steady_start", 10.0),
                                     (2, "steady", 90.0), (3, "steady_end", 90.0),
                                     (4, "paused", 5.0), (5, "steady_resume", 5.0),
                                     (6, "steady_end", 80.0), (7, "end", 5.0))]
    s = aggregate.host_summary(samples)
    assert s["cpu_util_pct_mean"] == pytest.approx((90.0 + 90.0 + 80.0) / 3)
