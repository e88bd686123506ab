"""What is derived from the figures' declarations (tfbench.figures) is what the report reads: the
columns that identify a configuration (one tuple, which every report uses), how each column
is read, the aggregated figures, the Results and compare columns, and the titles with their
units. The literal lists are the ones the report held before it read the declaration, with
the differences named: a figure declared later adds to them, none of these leaves."""

import re

import pandas as pd

from tfbench import figures
from tfbench.output import csv_out
from tfbench.report import build, compare, load, studies, tables

# The configuration key report/studies.py held (16 columns), in CSV order, and the serving
# path: a --saved_model or --trt_mode run is no repeat of the in-process run of the same model.
CONFIGURATION = ("model", "dataset", "mode", "precision", "xla", "batch_size",
                 "global_batch_size", "num_devices", "device_kind", "device_name", "num_workers",
                 "variable_update", "data_source", "data_format", "image_size", "accum_steps",
                 "serving_path", "trt_mode")
TEXT = {"run_id", "timestamp", "status", "error", "model", "dataset", "mode", "precision",
        "device_kind", "device_name", "variable_update", "data_source", "data_format",
        "expected_range", "expected_range_source", "tf_version", "keras_version",
        "tfbench_version", "hostname", "notices", "command", "slowest_device", "link",
        "serving_path", "trt_mode", "trt_precisions", "tensorrt_version"} | {
    # --validate_devices' devices ("GPU 3"), which the report's list did not have: numbers
    "slowest_alone_device", "slowest_matmul_device", "slowest_conv_device"}
# The report's list, plus the two other integers that say what ran (0 in a failed row).
INT_CONFIG = {"xla", "batch_size", "global_batch_size", "num_devices", "num_workers",
              "image_size", "accum_steps", "num_batches"} | {"num_warmup_batches",
                                                             "trt_calibration_batches"}
AGGREGATED = {
    "images_per_sec": "median", "latency_ms_p50": "median", "latency_ms_p99": "median",
    "peak_mem_gb": "median", "power_w_mean": "median", "images_per_sec_per_gb": "median",
    "images_per_sec_per_watt": "median", "temp_c_max": "max",
    "step_images_per_sec_plusminus": "median",
    # --explain_scaling's probes: medians; text, the first row's
    "allreduce_ms": "median", "allreduce_mib": "median", "allreduce_busbw_gbs": "median",
    "expected_busbw_gbs": "median", "one_device_step_ms": "median",
    "slowest_device_step_ms": "median", "slowest_device_ratio": "median",
    "input_step_ms": "median", "slowest_device": "first", "link": "first"}


def test_one_configuration_key_read_by_every_report():
    assert figures.CONFIGURATION == CONFIGURATION
    assert studies.CONFIG_COLUMNS is figures.CONFIGURATION
    assert compare.MATCH_COLUMNS is figures.CONFIGURATION
    assert compare.EVALUATION_MATCH_COLUMNS == tuple(
        c for c in CONFIGURATION if c not in ("mode", "precision", "xla", "serving_path",
                                              "trt_mode")) + ("kind", "execution_mode")


def _in_order(some, derived):
    """`some` are all in `derived`, in the same order."""
    return [c for c in derived if c in some] == list(some)


def test_how_the_report_reads_each_column():
    assert TEXT <= set(load.TEXT_COLUMNS) and INT_CONFIG <= set(load.INT_CONFIG_COLUMNS)
    assert not set(load.NUMERIC_COLUMNS) & (TEXT | INT_CONFIG)
    assert set(load.NUMERIC_COLUMNS) | set(load.TEXT_COLUMNS) | set(
        load.INT_CONFIG_COLUMNS) == set(csv_out.COLUMN_NAMES)
    row = {name: "" for name in csv_out.COLUMN_NAMES}
    row.update(run_id="r", status="oom", xla="1", num_warmup_batches="")
    df = load.rows_frame([row])
    assert df.loc[0, "xla"] == 1 and df.loc[0, "num_warmup_batches"] == 0
    assert pd.isna(df.loc[0, "steps_run"]) and df.loc[0, "devices"] == 1


def test_the_figures_each_table_aggregates_and_shows():
    assert {name: figures.AGGREGATED.get(name) for name in AGGREGATED} == AGGREGATED
    assert _in_order(("latency_ms_p50", "latency_ms_p99", "peak_mem_gb", "power_w_mean",
                      "images_per_sec_per_watt"), compare.RATIO_METRICS)
    assert build.SUMMARY_COLUMNS[:11] == ["model", "device_name", "devices", "mode",
                                          "precision", "xla", "serving_path", "trt_mode",
                                          "batch_size", "image_size", "data_source"]
    assert build.SUMMARY_COLUMNS[-1] == "efficiency_pct"
    assert _in_order([
        "model", "device_name", "devices", "mode", "precision", "xla", "batch_size",
        "image_size", "data_source", "images_per_sec", "latency_ms_p50", "latency_ms_p99",
        "peak_mem_gb", "images_per_sec_per_gb", "power_w_mean", "images_per_sec_per_watt",
        "expected_range", "efficiency_pct"], build.SUMMARY_COLUMNS)


def _normalised(text):
    return re.sub(r"\s+", " ", text.lower().replace("/", " per ")).strip()


def test_every_title_says_its_figures_unit():
    titled = [f for f in figures.CSV_FIGURES if f.title]
    assert len(titled) >= 35
    assert [(f.name, f.title, f.unit) for f in titled
            if _normalised(f.unit) not in _normalised(f.title)] == []


def test_cells_as_the_declaration_formats_them():
    cell = {name: style[1] for name, style in tables.COLUMN_STYLE.items()}
    assert tables.COLUMN_STYLE["image_size"][0] == "Image size (px)"
    assert (cell["xla"](1), cell["xla"](0)) == ("on", "off")
    assert cell["batch_size"](64.0) == "64" and cell["images_per_sec"](1234.56) == "1,234.6"
    assert cell["power_w_mean"](249.6) == "250" and cell["peak_mem_gb"](1.5) == "1.500"
    assert cell["link"]("PCIe 4.0 x16; NCCL over P2P") == "PCIe 4.0 x16"
    assert cell["images_per_sec_per_watt"](3.6) == "3.60"
