"""Every figure's multi-worker and strong-scaling arithmetic, against hand-computed numbers: how
the rows of one multi-worker run make the run's figure (per worker, summed, largest, mean,
images over all resources; tfbench.report.load.combine_workers, as each figure declares it),
and what a scaling table makes of points with a fixed global batch (per device, efficiency)."""

import types

import pytest

from tfbench import figures
from tfbench.launch import run as launch_run
from tfbench.output import csv_out
from tfbench.report import load, studies

# Two workers' rows whose every number is 2 on the chief and 8 on the other: what each way of
# combining gives, by hand.
CHIEF, OTHER = 2.0, 8.0
BY_HAND = {
    "same": 2.0,         # every row holds the run's figure: the chief's
    "none": 2.0,         # each worker's own record: the chief's stands for the run
    "sum": 10.0,         # 2 + 8
    "max": 8.0,
    "min": 2.0,
    "mean": 5.0,         # (2 + 8) / 2
    "per_worker": 3.2,   # 2 / (1/2 + 1/8)
}
NUMERIC = [f for f in figures.CSV_FIGURES if f.type != "text"]


def _rows(*values):
    """Typed rows of one run, the chief's first, each with every numeric figure = its value."""
    rows = []
    for i, value in enumerate(values):
        row = {name: "" for name in csv_out.COLUMN_NAMES}
        row.update({f.name: str(value) for f in NUMERIC})
        row.update(run_id="r%d" % i, status="ok", hostname="h%d" % i, model="resnet50",
                   num_workers=str(len(values)))
        rows.append(row)
    return load.rows_frame(rows)


def test_every_way_of_combining_is_pinned():
    assert set(BY_HAND) == set(figures.figure.WORKERS)


@pytest.mark.parametrize("figure", NUMERIC, ids=[f.name for f in NUMERIC])
def test_each_figure_of_a_two_worker_run(figure):
    combined = load.combine_workers(_rows(CHIEF, OTHER))
    if figure.role == "config":
        # What ran: the same in every row (num_workers says how many there were).
        assert figure.workers == "same", figure.name
    if figure.name == "num_workers":
        assert combined[figure.name] == 2
    else:
        assert combined[figure.name] == pytest.approx(BY_HAND[figure.workers]), figure.workers


def test_a_two_worker_run_by_its_definitions():
    """Two hosts, 400 images/sec over both (200 each, batch 32 per worker, 0.1 s steps, 2,000
    images each in 10 s); the chief's GPUs draw 100 W (300 J) and peak at 4 GiB together, the
    other's 300 W (500 J) and 1 GiB."""
    chief = {"images_per_sec": 400.0, "step_images_per_sec": 320.0, "power_w_mean": 100.0,
             "energy_j": 300.0, "peak_mem_gb": 2.0, "temp_c_max": 70.0,
             "images_per_sec_per_watt": 200.0 / 100.0, "images_per_sec_per_gb": 200.0 / 4.0,
             "joules_per_image": 300.0 / 2000,
             "one_device_step_ms": 50.0, "gpu_util_pct_mean": 90.0}
    other = {"images_per_sec": 398.0, "step_images_per_sec": 320.0, "power_w_mean": 300.0,
             "energy_j": 500.0, "peak_mem_gb": 3.5, "temp_c_max": "",
             "images_per_sec_per_watt": 200.0 / 300.0, "images_per_sec_per_gb": 200.0 / 1.0,
             "joules_per_image": 500.0 / 2000,
             "one_device_step_ms": 40.0, "gpu_util_pct_mean": 70.0}
    rows = []
    for i, values in enumerate((chief, other)):
        row = {name: "" for name in csv_out.COLUMN_NAMES}
        row.update(run_id="r%d" % i, status="ok", hostname="h%d" % i, num_workers="2",
                   num_devices="2", batch_size="16", global_batch_size="64")
        row.update({k: str(v) for k, v in values.items()})
        rows.append(row)
    run = load.combine_workers(load.rows_frame(rows))
    assert (run["run_id"], run["hostname"]) == ("r0", "h0")
    assert run["images_per_sec"] == 400.0              # the chief's: every worker's images
    assert run["step_images_per_sec"] == 640.0         # 64 images / 0.1 s: both Step lines
    assert run["power_w_mean"] == 400.0 and run["energy_j"] == 800.0    # summed
    assert run["peak_mem_gb"] == 3.5                   # the largest device peak
    assert run["temp_c_max"] == 70.0                   # an empty cell is left out
    assert run["images_per_sec_per_watt"] == pytest.approx(400.0 / 400.0)   # all over all
    assert run["images_per_sec_per_gb"] == pytest.approx(400.0 / 5.0)
    assert run["joules_per_image"] == pytest.approx(800.0 / 4000.0)    # all joules, images
    assert run["one_device_step_ms"] == 40.0           # the fastest device of either host
    assert run["gpu_util_pct_mean"] == pytest.approx(80.0)
    assert run["devices"] == 4 and run["global_batch_size"] == 64


def test_a_launch_point_combines_its_hosts_rows_only_when_all_are_ok():
    rows = _rows(CHIEF, OTHER)
    as_strings = [{k: str(v) for k, v in r.items()} for _, r in rows.iterrows()]
    point = launch_run.run_row(types.SimpleNamespace(rows=as_strings))
    assert point["energy_j"] == 10.0 and point["peak_mem_gb"] == 8.0
    as_strings[1]["status"] = "error"
    point = launch_run.run_row(types.SimpleNamespace(rows=as_strings))
    assert point["energy_j"] == 2.0 and point["status"] == "ok"   # the chief's row as it is


def _point(devices, workers, batch, ips):
    row = {name: "" for name in csv_out.COLUMN_NAMES}
    row.update(run_id="r", status="ok", model="resnet50", mode="training", precision="fp32",
               xla="0", num_devices=str(devices), num_workers=str(workers),
               batch_size=str(batch), global_batch_size="256", images_per_sec=str(ips),
               image_size="224", device_name="GPU-X")
    return row


def test_strong_scaling_keeps_the_global_batch_and_divides_it_per_device():
    """Global batch 256 on 1 device (400 images/sec), 2 devices (700) and 2 devices on each
    of 2 workers (1,200): 256, 128 and 64 per device; 400, 350 and 300 images/sec per
    device; efficiency (700/400)/2 = 87.5% and (1200/400)/4 = 75%."""
    df = load.rows_frame([_point(1, 1, 256, 400), _point(2, 1, 128, 700),
                          _point(2, 2, 64, 1200)])
    table = studies.scaling_table(df, "strong")
    assert table[["devices", "batch_size", "global_batch_size"]].values.tolist() == [
        [1, 256, 256], [2, 128, 256], [4, 64, 256]]
    assert table["images_per_sec_per_device"].tolist() == [400.0, 350.0, 300.0]
    assert table["speedup"].tolist() == [1.0, 1.75, 3.0]
    assert table["efficiency_pct"].tolist() == [100.0, 87.5, 75.0]
