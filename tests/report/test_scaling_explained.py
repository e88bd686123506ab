"""Where a scaling study's efficiency goes (tfbench.report.scaling_explained), on hand-made rows
whose parts are worked out here; the report's stacked-bar plot, and its page in Chromium."""

import os

import numpy as np
import pytest

from tfbench.report import browser_check, build, load, plots, scaling_explained, studies


def row(**kw):
    base = {"run_id": "r", "status": "ok", "model": "resnet50", "mode": "training",
            "precision": "fp32", "xla": "0", "batch_size": "32", "num_devices": "1",
            "num_workers": "1", "image_size": "224", "device_kind": "gpu",
            "device_name": "Tesla V100-PCIE-16GB", "variable_update": "replicated",
            "images_per_sec": "100"}
    base.update({k: str(v) for k, v in kw.items()})
    base["global_batch_size"] = str(int(base["batch_size"]) * int(base["num_devices"])
                                    * int(base["num_workers"]))
    return base


PROBED = {"allreduce_mib": 97.5, "expected_busbw_gbs": 15.8,
          "link": "PCIe 3.0 x16; GPU 3's PCIe link runs at x4 of x16"}
# One GPU: 100 images/sec at 32 -> 320 ms. Two: 160 images/sec at 64 -> 400 ms (80%). Four:
# 256 images/sec at 128 -> 500 ms (64%).
STUDY = [row(),
         row(num_devices=2, images_per_sec=160, one_device_step_ms=300,
             slowest_device_step_ms=330, allreduce_ms=50, allreduce_busbw_gbs=4.0,
             slowest_device="GPU 1", slowest_device_ratio=1.02, **PROBED),
         row(num_devices=4, images_per_sec=256, one_device_step_ms=300,
             slowest_device_step_ms=420, allreduce_ms=60, allreduce_busbw_gbs=4.9,
             slowest_device="GPU 3", slowest_device_ratio=1.3, **PROBED)]


def _explained(rows):
    table = studies.scaling_table(load.rows_frame(rows), "weak")
    return scaling_explained.explain_table(table)


def test_each_point_against_the_one_device_row_adds_up_to_its_lost_efficiency():
    t = _explained(STUDY)
    assert list(t["devices"]) == [2, 4] and set(t["explained_by"]) == {"one-device row"}
    assert t["step_ms"].tolist() == pytest.approx([400.0, 500.0])
    assert t["reference_ms"].tolist() == pytest.approx([320.0, 320.0])
    assert t["efficiency_pct"].tolist() == pytest.approx([80.0, 64.0])
    # 2 GPUs: compute 330 - 320 = 10 ms, all-reduce min(400 - 330, 50) = 50, rest 20.
    # 4 GPUs: compute 100 ms, all-reduce min(500 - 420, 60) = 60, rest 20.
    assert t["lost_ms_compute"].tolist() == pytest.approx([10.0, 100.0])
    assert t["lost_ms_allreduce"].tolist() == pytest.approx([50.0, 60.0])
    assert t["lost_ms_unexplained"].tolist() == pytest.approx([20.0, 20.0])
    assert t["lost_pts_compute"].tolist() == pytest.approx([2.5, 20.0])
    assert t["lost_pts_allreduce"].tolist() == pytest.approx([12.5, 12.0])
    points = t[list(scaling_explained.EXPLAINED_PTS)].sum(axis=1)
    assert points.tolist() == pytest.approx((100 - t["efficiency_pct"]).tolist())
    assert t["largest"].tolist() == ["allreduce", "compute"]
    assert t["verdict"][0].startswith("Largest cause: the all-reduce of 97.5 MiB takes 50.0 ms")
    assert "GPU 3's PCIe link runs at x4 of x16: reseat the card" in t["verdict"][0]
    assert "GPU 3 computes 1.30x the median device's step" in t["verdict"][1]


def test_a_series_without_one_device_uses_each_points_probe():
    t = _explained(STUDY[1:])
    assert list(t["devices"]) == [4] and list(t["explained_by"]) == ["one-device probe"]
    assert t["reference_ms"][0] == 300.0 and t["efficiency_pct"][0] == pytest.approx(60.0)


def test_rows_without_probes_make_no_table_and_no_section():
    plain = [row(), row(num_devices=2, images_per_sec=160)]
    assert _explained(plain).empty
    slugs = [s.slug for s in studies.study_sections(load.rows_frame(plain), ["scaling"])]
    assert slugs == ["scaling"]


def test_the_section_shows_points_bandwidth_and_link_with_each_verdict():
    (section,) = [s for s in studies.study_sections(load.rows_frame(STUDY), ["scaling"])
                  if s.slug == "scaling_explained"]
    assert section.columns[-7:] == ["lost_pts_compute", "lost_pts_input", "lost_pts_allreduce",
                                    "lost_pts_unexplained", "allreduce_busbw_gbs",
                                    "expected_busbw_gbs", "link"]
    assert "2 devices: Largest cause: the all-reduce" in section.note
    assert "4 devices: Largest cause: the slowest device's extra compute" in section.note


def test_the_stacked_bars_are_the_parts_and_the_step_is_marked(tmp_path):
    t = _explained(STUDY)
    fig = plots.scaling_explained_plot(t, str(tmp_path / "p.png"))
    ax = fig.axes[0]
    bars = [(round(p.get_x() + p.get_width() / 2), p.get_y(), p.get_height())
            for p in ax.patches]
    # x = 0 (2 GPUs): 320 one device, +10 compute, +0 input, +50 all-reduce, +20 unexplained.
    assert np.allclose([b[1:] for b in bars if b[0] == 0],
                       [(0, 320), (320, 10), (330, 0), (330, 50), (380, 20)])
    marker = [line for line in ax.lines if line.get_label() == "measured step"][0]
    assert np.allclose(marker.get_ydata(), [400, 500])
    assert ax.get_ylabel() == "Time per step (ms)"
    assert os.path.getsize(tmp_path / "p.png") > 0


@pytest.mark.slow
def test_the_report_holds_the_section_and_its_plot_and_passes_the_browser_check(tmp_path):
    import csv
    from tfbench.output.csv_out import COLUMN_NAMES
    path = tmp_path / "results.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMN_NAMES, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(STUDY)
    report = build.build_report([str(path)], str(tmp_path / "report"))
    assert "scaling_explained" in [s.slug for s in report.sections]
    plotted = [p for p in report.plots if "scaling_explained" in os.path.basename(p)]
    assert len(plotted) == 1
    with open(report.html_path) as handle:
        assert "Where the scaling efficiency goes" in handle.read()
    if browser_check.find_browser() is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    result = browser_check.check(report.html_path, str(tmp_path / "report" / "shot.png"))
    assert result.ok, result.summary()


def test_an_evaluation_on_several_gpus_explains_each_training_run_against_its_probe():
    from tfbench.report import evaluation as ev
    from tfbench.report import evaluation_report
    rows = [row(num_devices=4, images_per_sec=256, one_device_step_ms=320,
                slowest_device_step_ms=420, allreduce_ms=60, allreduce_busbw_gbs=4.9,
                slowest_device="GPU 3", slowest_device_ratio=1.3, **PROBED),
            row(num_devices=1, batch_size=1, mode="forward_only", images_per_sec=500)]
    (section,) = evaluation_report._scaling_sections(ev.with_method_columns(
        load.rows_frame(rows)))
    t = section.frame
    assert list(t["execution_mode"]) == ["native"] and list(t["devices"]) == [4]
    assert list(t["explained_by"]) == ["one-device probe"]
    assert t["efficiency_pct"][0] == pytest.approx(64.0)   # 320 of 500 ms
    assert t["lost_pts_compute"][0] == pytest.approx(20.0)
    assert "4 devices: Largest cause: the slowest device's extra compute" in section.note
