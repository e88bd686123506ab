"""A run's time series plot (tfbench/report/plots.py): throughput per step beside each GPU's
temperature, or the host's CPU utilisation when no GPU was sampled."""

import pytest

from tfbench.report import plots


def test_timeseries_without_samples_or_steps(tmp_path):
    row = {"model": "m", "device_name": "", "device_kind": "cpu", "num_devices": 1,
           "batch_size": 2, "global_batch_size": 2, "run_id": "x", "precision": "fp32"}
    fig = plots.timeseries_plot({"step_times": [0.1, 0.2]}, row, str(tmp_path / "a.png"))
    assert len(fig.axes) == 1 and "no temperature samples" in fig.axes[0].get_title()
    assert plots.timeseries_plot({"extra": {"samples": []}}, row, str(tmp_path / "b.png")) is None
    assert not (tmp_path / "b.png").exists()


def test_timeseries_with_samples_per_monitor_and_gpu(tmp_path):
    row = {"model": "m", "device_name": "GPU", "num_devices": 2, "batch_size": 2,
           "global_batch_size": 4, "run_id": "x", "precision": "fp32"}
    samples = {"nvml": [{"t": t, "gpu": g, "temp_c": 50 + t + g, "phase": phase}
                        for t, phase in ((0.0, "steady_start"), (0.5, "steady"),
                                         (1.0, "steady_end")) for g in (0, 1)],
               "host": [{"t": 0.0, "cpu_util_pct": 50.0, "phase": "steady_start"}]}
    fig = plots.timeseries_plot({"step_times": [0.1] * 5, "extra": {"samples": samples}}, row,
                                str(tmp_path / "a.png"))
    temp_ax = fig.axes[1]
    assert [line.get_label() for line in temp_ax.lines] == ["GPU 0 temperature",
                                                            "GPU 1 temperature"]
    assert list(temp_ax.lines[1].get_ydata()) == [51.0, 51.5, 52.0]


def test_timeseries_counts_each_step_as_the_step_lines_do(tmp_path):
    """Two workers, global batch 16, 8 images per worker: a 0.1 s step is 80 images/sec on the
    plot, as on the Step lines (step_line_batch), not the 160 of every worker's images."""
    row = {"model": "m", "device_name": "GPU", "num_devices": 2, "num_workers": 2,
           "batch_size": 4, "global_batch_size": 16, "run_id": "x", "precision": "fp32"}
    fig = plots.timeseries_plot({"step_times": [0.1, 0.2], "step_line_batch": 8}, row,
                                str(tmp_path / "a.png"))
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx([80.0, 40.0])


def test_timeseries_falls_back_to_host_cpu_utilisation(tmp_path):
    row = {"model": "m", "device_name": "", "device_kind": "cpu", "num_devices": 1,
           "batch_size": 2, "global_batch_size": 2, "run_id": "x", "precision": "fp32"}
    samples = {"host": [{"t": 0.0, "cpu_util_pct": 10.0, "phase": "steady_start"},
                        {"t": 0.25, "cpu_util_pct": 90.0, "phase": "steady_end"}]}
    fig = plots.timeseries_plot({"step_times": [0.1] * 3, "extra": {"samples": samples}}, row,
                                str(tmp_path / "a.png"))
    assert fig.axes[1].get_ylabel() == "Host CPU utilisation (%)"
    assert "no temperature samples" in fig.axes[0].get_title()


@pytest.mark.slow
def test_timeseries_draws_the_timed_window_only(tmp_path):
    """The host monitor starts before the model is built and stops after FLOPs are counted;
    its first reading in its thread is psutil's meaningless 0.0. The plot draws the timed steps:
    samples from mark_steady() (t 2.0 here) to the last pause (t 3.5), on the steps' clock (0 at
    the first timed step, the 1 s evaluation between the windows left out), nothing from the
    warm-up or the seconds after the last step."""
    row = {"model": "m", "device_name": "", "device_kind": "cpu", "num_devices": 1,
           "batch_size": 2, "global_batch_size": 2, "run_id": "x", "precision": "fp32"}
    host = [(0.0, "start", None), (0.25, "warmup", 0.0), (1.0, "warmup", 60.0),
            (2.0, "steady_start", 95.0), (2.5, "steady", 96.0), (3.0, "steady_end", 97.0),
            (3.5, "paused", 20.0), (4.0, "steady_resume", 30.0), (4.25, "steady", 98.0),
            (4.5, "steady_end", 99.0), (6.0, "end", 5.0)]
    samples = {"host": [{"t": t, "phase": ph, "cpu_util_pct": v} for t, ph, v in host]}
    manifest = {"warmup_times": [0.5, 0.5], "step_times": [0.25] * 6,
                "extra": {"samples": samples}}
    fig = plots.timeseries_plot(manifest, row, str(tmp_path / "a.png"))
    throughput, cpu = fig.axes[0].lines[0], fig.axes[1].lines[0]
    assert list(throughput.get_xdata()) == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    assert list(throughput.get_ydata()) == [8.0] * 6
    assert list(cpu.get_xdata()) == [0.0, 0.5, 1.0, 1.0, 1.25, 1.5]
    assert list(cpu.get_ydata()) == [95.0, 96.0, 97.0, 30.0, 98.0, 99.0]
    assert "over the timed steps" in fig.axes[0].get_title()
