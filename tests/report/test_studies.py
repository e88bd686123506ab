"""Study math on hand-made rows: scaling efficiency, knee, precision speed-ups, resolution."""

import math

import pytest

from tfbench.report import load, studies, tables


def row(**kw):
    base = {"run_id": "r", "status": "ok", "model": "resnet50", "mode": "training",
            "precision": "fp32", "xla": "0", "batch_size": "64", "num_devices": "1",
            "num_workers": "1", "image_size": "224", "device_name": "GPU-X",
            "images_per_sec": "100"}
    base.update({k: str(v) for k, v in kw.items()})
    if "global_batch_size" not in kw:
        base["global_batch_size"] = str(int(base["batch_size"]) * int(base["num_devices"]))
    return base


def frame(*rows):
    return load.rows_frame(list(rows))


def test_weak_scaling_efficiency():
    df = frame(row(num_devices=1, images_per_sec=400), row(num_devices=2, images_per_sec=760),
               row(num_devices=4, images_per_sec=1440), row(num_devices=8, images_per_sec=2560))
    table = studies.scaling_table(df, "weak")
    assert list(table["devices"]) == [1, 2, 4, 8]
    assert list(table["global_batch_size"]) == [64, 128, 256, 512]
    assert table["speedup"].round(3).tolist() == [1.0, 1.9, 3.6, 6.4]
    assert table["efficiency_pct"].round(3).tolist() == [100.0, 95.0, 90.0, 80.0]
    assert table["images_per_sec_per_device"].tolist() == [400, 380, 360, 320]


def test_strong_scaling_groups_by_global_batch():
    df = frame(row(num_devices=1, batch_size=256, images_per_sec=400),
               row(num_devices=2, batch_size=128, images_per_sec=700),
               row(num_devices=4, batch_size=64, images_per_sec=1000))
    assert studies.scaling_table(df, "weak").empty  # batch/device differs: no weak group
    table = studies.scaling_table(df, "strong")
    assert list(table["batch_size"]) == [256, 128, 64]
    assert table["efficiency_pct"].round(3).tolist() == [100.0, 87.5, 62.5]
    assert set(table["scaling"]) == {"strong"}


def test_a_served_run_is_no_repeat_of_the_in_process_run():
    """The same model and batch in-process (100, 110 images/sec), as a SavedModel (80) and
    through TF-TRT FP16 (300): three configurations, the in-process one repeated twice."""
    df = frame(row(mode="forward_only", images_per_sec=100),
               row(mode="forward_only", images_per_sec=110),
               row(mode="forward_only", serving_path="saved_model", images_per_sec=80),
               row(mode="forward_only", serving_path="tftrt", trt_mode="FP16",
                   images_per_sec=300))
    table = studies.summary_table(df)
    assert table[["serving_path", "trt_mode", "images_per_sec", "num_runs"]].values.tolist() \
        == [["", "", 105.0, 2], ["saved_model", "", 80.0, 1], ["tftrt", "FP16", 300.0, 1]]


def test_scaling_baseline_is_fewest_devices_and_counts_workers():
    df = frame(row(num_devices=2, images_per_sec=200),
               row(num_devices=2, num_workers=2, images_per_sec=360))
    table = studies.scaling_table(df, "weak")
    assert list(table["devices"]) == [2, 4]
    # (360 / 200) / (4 / 2) = 90%.
    assert table["efficiency_pct"].round(3).tolist() == [100.0, 90.0]


def test_repeats_use_the_median_and_failed_rows_are_ignored():
    df = frame(row(images_per_sec=90), row(images_per_sec=100), row(images_per_sec=130),
               row(num_devices=2, images_per_sec=180),
               row(num_devices=2, status="oom", images_per_sec=""))
    table = studies.scaling_table(df, "weak")
    assert table["images_per_sec"].tolist() == [100, 180]
    agg = studies.aggregate(df, ["num_devices"])
    assert agg[["num_runs", "images_per_sec_min", "images_per_sec_max"]].values.tolist() == [
        [3, 90, 130], [1, 180, 180]]


def test_repeats_are_judged_by_the_rule_of_tfbench_evaluate():
    """spread = (max - min) / median; unstable above the threshold (10% unless given); a
    single row keeps what its own --num_runs measured; one unrepeated row has no verdict."""
    df = frame(row(batch_size=8, images_per_sec=90), row(batch_size=8, images_per_sec=100),
               row(batch_size=8, images_per_sec=130),
               row(batch_size=16, images_per_sec=200), row(batch_size=16, images_per_sec=205),
               row(batch_size=32, images_per_sec=300, num_runs=3, images_per_sec_min=250,
                   images_per_sec_max=310, spread_pct=20, unstable=1),
               row(batch_size=64, images_per_sec=400))
    agg = studies.aggregate(df, ["batch_size"])
    got = agg[["batch_size", "num_runs", "spread_pct", "unstable", "stable"]]
    assert [(b, n, round(s, 1) if s == s else None, u if u == u else None, v)
            for b, n, s, u, v in got.values.tolist()] == [
        (8, 3, 40.0, 1, "no"), (16, 2, 2.5, 0, "yes"), (32, 3, 20.0, 1, "no"),
        (64, 1, None, None, "")]
    lenient = studies.aggregate(df, ["batch_size"], unstable_threshold_pct=50.0)
    assert lenient["stable"].tolist() == ["yes", "yes", "no", ""]   # row 32 judged by its run
    # The rule is the one a run applies to its own --num_runs repeats.
    from tfbench.measure import stats
    assert stats.repeat_summary([90, 100, 130])["spread_pct"] == pytest.approx(40.0)


def test_scaling_groups_split_by_model():
    df = frame(row(model="a", images_per_sec=100), row(model="a", num_devices=2,
                                                        images_per_sec=150),
               row(model="b", images_per_sec=10), row(model="b", num_devices=2,
                                                       images_per_sec=20))
    table = studies.scaling_table(df)
    assert table[["model", "efficiency_pct"]].values.tolist() == [
        ["a", 100.0], ["a", 75.0], ["b", 100.0], ["b", 100.0]]
    assert table["group"].nunique() == 2


def test_knee_is_smallest_batch_reaching_the_threshold():
    speeds = {8: 200, 16: 350, 32: 460, 64: 500, 128: 490}
    df = frame(*[row(batch_size=b, images_per_sec=v, peak_mem_gb=b / 10)
                 for b, v in speeds.items()])
    table = studies.batch_size_study(df, knee_pct=90)
    assert table["pct_of_best"].round(1).tolist() == [40.0, 70.0, 92.0, 100.0, 98.0]
    assert studies.knees(table)["batch_size"].tolist() == [32]
    assert studies.knees(studies.batch_size_study(df, knee_pct=95))["batch_size"].tolist() == \
        [64]
    assert table["peak_mem_gb"].tolist() == [0.8, 1.6, 3.2, 6.4, 12.8]


def test_precision_matrix_speedups_over_fp32():
    df = frame(row(precision="fp32", images_per_sec=400),
               row(precision="fp16", images_per_sec=1000),
               row(precision="bf16", images_per_sec=960),
               row(precision="fp16", xla=1, images_per_sec=1200),
               row(precision="fp32", xla=1, images_per_sec=480))
    table = studies.precision_matrix(df)
    assert table[["execution", "speedup_vs_fp32"]].values.tolist() == [
        ["fp32", 1.0], ["fp16 mixed", 2.5], ["bf16 mixed", 2.4], ["fp16 mixed + XLA", 3.0],
        ["fp32 + XLA", 1.2]]


def test_precision_matrix_without_fp32_has_no_speedup():
    table = studies.precision_matrix(frame(row(precision="fp16"), row(precision="bf16")))
    assert table["speedup_vs_fp32"].isna().all()


def test_resolution_relative_to_first_size_in_order_given():
    df = frame(row(image_size=384, images_per_sec=300, peak_mem_gb=6),
               row(image_size=224, images_per_sec=900, peak_mem_gb=2),
               row(image_size=512, images_per_sec=150, peak_mem_gb=10))
    table = studies.resolution_study(df)
    assert table["image_size"].tolist() == [384, 224, 512]
    assert table["images_per_sec_rel"].round(4).tolist() == [1.0, 3.0, 0.5]
    assert table["peak_mem_rel"].round(4).tolist() == [1.0, round(1 / 3, 4), round(10 / 6, 4)]
    assert table["pixels_rel"].round(4).tolist()[1] == round((224 / 384) ** 2, 4)


def test_summary_table_carries_scaling_efficiency():
    df = frame(row(images_per_sec=100), row(num_devices=2, images_per_sec=150))
    summary = studies.summary_table(df)
    assert summary["efficiency_pct"].tolist() == [100.0, 75.0]


def test_sections_pick_studies_present_in_the_rows():
    df = frame(row(batch_size=32, images_per_sec=50), row(batch_size=64, images_per_sec=100))
    sections = studies.study_sections(df)
    assert [s.slug for s in sections] == ["batch_size"]
    md = tables.markdown(sections[0].frame, sections[0].columns)
    parsed = tables.parse_markdown(md)
    assert [(r["Batch/device"], r["Knee"]) for r in parsed] == [("32", ""), ("64", "yes")]


def test_markdown_round_trip_escapes_pipes_and_blanks_nan():
    df = frame(row(), row(status="error", images_per_sec=""))
    df.loc[1, "error"] = "a | b"
    failed = studies.failed_rows(df)
    parsed = tables.parse_markdown(tables.markdown(failed))
    assert parsed[0]["Error"] == "a | b" and parsed[0]["Status"] == "error"
    shown = tables.display_frame(df, ["images_per_sec"])
    assert shown["Images/sec"].tolist() == ["100.0", ""]
    assert math.isnan(df.loc[1, "images_per_sec"])


def test_unknown_scaling_mode_is_rejected():
    with pytest.raises(ValueError):
        studies.scaling_table(frame(row()), "diagonal")


def test_scaling_tables_drop_strong_groups_that_are_weak_study_by_products():
    # A weak study at batch 64 plus a batch-size point at 128 on one device: the pair
    # (1 x 128, 2 x 64) has the same global batch but is not a strong-scaling measurement.
    df = frame(row(images_per_sec=100), row(num_devices=2, images_per_sec=190),
               row(batch_size=128, images_per_sec=110))
    table = studies.scaling_tables(df)
    assert set(table["scaling"]) == {"weak"}
    # A real strong study (2 x 64 and 4 x 32 appear in no weak group) is kept.
    df = frame(row(batch_size=128, images_per_sec=100), row(num_devices=2, images_per_sec=190),
               row(num_devices=4, batch_size=32, images_per_sec=300))
    assert set(studies.scaling_tables(df)["scaling"]) == {"strong"}


# --- scaling relates like with like --------------------------------------------------------

def test_scaling_keeps_variable_update_series_apart():
    df = frame(row(images_per_sec=100, variable_update="parameter_server"),
               row(num_devices=2, images_per_sec=180, variable_update="replicated"),
               row(num_devices=2, images_per_sec=100, variable_update="parameter_server"))
    table = studies.scaling_table(df, "weak")
    got = {(r.variable_update, r.devices): r.efficiency_pct for r in table.itertuples()}
    # One device shares no variables: its row is the baseline of both series.
    assert got == {("parameter_server", 1): 100.0, ("parameter_server", 2): 50.0,
                   ("replicated", 1): 100.0, ("replicated", 2): 90.0}
    assert table["group"].nunique() == 2


def test_one_device_row_is_the_baseline_whatever_its_variable_update():
    # --xla on several devices runs replicated instead of parameter_server (a notice says so);
    # the one-device row keeps the asked-for label.
    df = frame(row(images_per_sec=100, variable_update="parameter_server", xla=1),
               row(num_devices=2, images_per_sec=190, variable_update="replicated", xla=1),
               row(num_devices=4, images_per_sec=360, variable_update="replicated", xla=1))
    table = studies.scaling_table(df, "weak")
    assert table["efficiency_pct"].tolist() == [100.0, 95.0, 90.0]


def test_worker_splits_of_one_device_count_are_not_merged():
    # 4 devices on one worker and 2 x 2 workers: the same count, not the same configuration.
    df = frame(row(images_per_sec=100),
               row(num_devices=4, images_per_sec=360, global_batch_size=256),
               row(num_devices=2, num_workers=2, images_per_sec=200, global_batch_size=256))
    table = studies.scaling_table(df, "weak")
    got = [(r.group, r.num_devices, r.num_workers, r.images_per_sec, r.efficiency_pct)
           for r in table.itertuples()]
    assert got == [("weak0", 1, 1, 100.0, 100.0), ("weak0", 4, 1, 360.0, 90.0),
                   ("weak1", 1, 1, 100.0, 100.0), ("weak1", 2, 2, 200.0, 50.0)]


def test_a_split_with_the_baseline_count_is_not_a_scaling_step():
    df = frame(row(num_devices=2, images_per_sec=200),
               row(num_devices=1, num_workers=2, images_per_sec=150),
               row(num_devices=4, images_per_sec=360))
    table = studies.scaling_table(df, "weak")
    assert [(r.num_devices, r.num_workers, r.efficiency_pct) for r in table.itertuples()] == [
        (2, 1, 100.0), (4, 1, 90.0)]


@pytest.mark.parametrize("column, values", [("dataset", ("imagenet", "cifar10")),
                                            ("accum_steps", (1, 4)),
                                            ("data_format", ("NHWC", "NCHW"))])
def test_summary_efficiency_comes_from_the_rows_own_configuration(column, values):
    a, b = values
    df = frame(row(images_per_sec=100, **{column: a}),
               row(num_devices=2, images_per_sec=180, **{column: a}),
               row(images_per_sec=50, **{column: b}),
               row(num_devices=2, images_per_sec=60, **{column: b}))
    summary = studies.summary_table(df)
    got = {(str(r[column]), r["num_devices"]): r["efficiency_pct"] for _, r in summary.iterrows()}
    assert got == {(str(a), 1): 100.0, (str(a), 2): 90.0, (str(b), 1): 100.0, (str(b), 2): 60.0}


def test_strong_group_kept_when_its_rows_are_in_a_weak_group_of_another_dataset():
    # imagenet: a weak study at 64/device. cifar10: 1 x 128 and 2 x 64, a strong pair whose
    # 2 x 64 row is in no weak group (the imagenet 2 x 64 row is another configuration).
    df = frame(row(dataset="imagenet", images_per_sec=100),
               row(dataset="imagenet", num_devices=2, images_per_sec=190),
               row(dataset="cifar10", batch_size=128, images_per_sec=400),
               row(dataset="cifar10", num_devices=2, images_per_sec=700))
    table = studies.scaling_tables(df)
    strong = table[table["scaling"] == "strong"]
    assert strong[["dataset", "devices", "efficiency_pct"]].values.tolist() == [
        ["cifar10", 1, 100.0], ["cifar10", 2, 87.5]]


def test_scaling_section_shows_the_worker_split_when_workers_vary():
    df = frame(row(images_per_sec=100), row(num_devices=4, images_per_sec=360),
               row(num_devices=2, num_workers=2, images_per_sec=200, global_batch_size=256))
    section = studies.study_sections(df, ["scaling"], "weak")[0]
    parsed = tables.parse_markdown(tables.markdown(section.frame, section.columns))
    assert [(r["Devices/worker"], r["Workers"], r["Devices"], r["Scaling efficiency (%)"])
            for r in parsed] == [("1", "1", "1", "100.0"), ("4", "1", "4", "90.0"),
                                 ("1", "1", "1", "100.0"), ("2", "2", "4", "50.0")]
    single = studies.study_sections(frame(row(), row(num_devices=2)), ["scaling"], "weak")[0]
    assert "num_workers" not in single.columns and "num_devices" not in single.columns


SCALING_NOTE = (
    "efficiency = (images/sec on N / images/sec on N0) / (N / N0) x 100%, N = devices x "
    "workers, N0 the fewest in the series; a series holds rows that differ in device count alone "
    "(a one-device baseline shares no variables and serves every variable_update); weak "
    "scaling keeps the per-device batch, strong scaling the global batch")


def _shown(section):
    return [[round(v, 4) if isinstance(v, float) else v for v in r]
            for r in section.frame[section.columns].itertuples(index=False)]


def test_each_study_section_shows_its_columns_and_says_how_it_is_computed():
    """The four report sections, pinned: title, the columns shown, the note, the figures."""
    (s,) = studies.study_sections(frame(
        row(num_devices=2, images_per_sec=200), row(num_devices=2, num_workers=2,
                                                    images_per_sec=360),
        row(num_devices=1, images_per_sec=110)), kinds=["scaling"])
    assert (s.slug, s.title, s.note) == ("scaling", "Scaling efficiency", SCALING_NOTE)
    assert s.columns == ["model", "device_name", "scaling", "num_devices", "num_workers",
                         "devices", "batch_size", "global_batch_size", "images_per_sec",
                         "images_per_sec_per_device", "speedup", "efficiency_pct"]
    # Baseline 1 device at 110: 200 / 110 on 2 devices is 90.9 %, 360 / 110 on 2 x 2 is 81.8 %.
    assert _shown(s) == [
        ["resnet50", "GPU-X", "weak", 1, 1, 1, 64, 64, 110.0, 110.0, 1.0, 100.0],
        ["resnet50", "GPU-X", "weak", 2, 1, 2, 64, 128, 200.0, 100.0, 1.8182, 90.9091],
        ["resnet50", "GPU-X", "weak", 2, 2, 4, 64, 128, 360.0, 90.0, 3.2727, 81.8182]]
    (s,) = studies.study_sections(frame(row(num_devices=1, images_per_sec=400),
                                        row(num_devices=2, images_per_sec=760)),
                                  kinds=["scaling"], scaling="weak")
    assert "num_workers" not in s.columns and _shown(s)[1][-2:] == [1.9, 95.0]
    (s,) = studies.study_sections(frame(
        row(batch_size=32, images_per_sec=300, peak_mem_gb=2),
        row(batch_size=64, images_per_sec=380, peak_mem_gb=3),
        row(batch_size=128, images_per_sec=400, peak_mem_gb=5)), kinds=["batch_size"])
    assert (s.slug, s.title) == ("batch_size", "Batch-size study")
    assert s.note == ("knee = smallest batch reaching 90% of the best throughput: "
                      "model=resnet50, device_name=GPU-X: batch 64, best batch 128")
    assert s.columns == ["model", "device_name", "batch_size", "global_batch_size",
                         "images_per_sec", "peak_mem_gb", "pct_of_best", "knee"]
    assert _shown(s) == [["resnet50", "GPU-X", 32, 32, 300.0, 2.0, 75.0, False],
                         ["resnet50", "GPU-X", 64, 64, 380.0, 3.0, 95.0, True],
                         ["resnet50", "GPU-X", 128, 128, 400.0, 5.0, 100.0, False]]
    (s,) = studies.study_sections(frame(
        row(precision="fp32", images_per_sec=100, peak_mem_gb=4),
        row(precision="fp16", images_per_sec=250, peak_mem_gb=3),
        row(precision="fp16", xla="1", images_per_sec=300, peak_mem_gb=2)),
        kinds=["precision"])
    assert (s.slug, s.title, s.note) == ("precision", "Precision / execution matrix",
                                         "speed-up over fp32 without XLA in the same "
                                         "configuration")
    assert _shown(s) == [["resnet50", "GPU-X", "fp32", 100.0, 1.0, 4.0],
                         ["resnet50", "GPU-X", "fp16 mixed", 250.0, 2.5, 3.0],
                         ["resnet50", "GPU-X", "fp16 mixed + XLA", 300.0, 3.0, 2.0]]
    (s,) = studies.study_sections(frame(
        row(image_size=224, images_per_sec=400, peak_mem_gb=4),
        row(image_size=299, images_per_sec=220, peak_mem_gb=7)), kinds=["resolution"])
    assert (s.slug, s.title, s.note) == ("resolution", "Resolution study",
                                         "relative to the first image size")
    assert s.columns == ["model", "device_name", "image_size", "pixels_rel", "images_per_sec",
                         "images_per_sec_rel", "peak_mem_gb", "peak_mem_rel"]
    # (299 / 224)^2 = 1.7817 times the pixels.
    assert _shown(s) == [["resnet50", "GPU-X", 224, 1.0, 400.0, 1.0, 4.0, 1.0],
                         ["resnet50", "GPU-X", 299, 1.7817, 220.0, 0.55, 7.0, 1.75]]
    assert studies.study_sections(frame(row()), kinds=list(studies.STUDY_KINDS)) == []
