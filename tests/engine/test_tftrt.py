"""--trt_mode: refused in one line where TF-TRT cannot run (here: pip TensorFlow >= 2.18, no GPU),
and, with a stand-in converter that follows TensorFlow 2.17's TF-TRT API, the conversion as a run
does it: engines built before warm-up, INT8 calibrated on the run's own input, segments counted
as TF-TRT's summary() counts them, zero segments said, a failed conversion one error line and a
row with its status."""

import inspect
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from helpers import run_inprocess, write_fake_cifar10
from tfbench.cli import run
from tfbench.engine import serving, tftrt
from tfbench.models import catalog
from tftrt_runs import (  # noqa: F401 - stand_in: fixture
    TINY, converted_graph, row_and_manifest, run_logged, stand_in)
from tftrt_stand_in import StandInConverter

CONTAINER = "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"


def _linked_tensorrt():
    from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils
    return tuple(_pywrap_py_utils.get_linked_tensorrt_version())


# --- where TF-TRT cannot run ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    # The legacy script's own TF-TRT benchmark (leading_indicators_test.py,
    # FrozenResnet50BenchmarksInference.benchmark_trt_synth_forward_batch128).
    ["--model=resnet50", "--num_gpus=1", "--distortions=False", "--forward_only=True",
     "--freeze_when_forward_only=True", "--batch_size=128", "--trt_mode=FP32"],
    # Its fp16 variant, commented out there ("not supported yet" in TF1's TF-TRT).
    ["--model=resnet50", "--num_gpus=1", "--distortions=False", "--forward_only=True",
     "--freeze_when_forward_only=True", "--batch_size=16", "--use_fp16=True", "--trt_mode=FP16"],
    TINY + ["--trt_mode=INT8"],
], ids=["legacy_leading_indicator", "legacy_fp16", "int8_on_cpu"])
def test_refused_here_in_one_line_with_exit_2(argv, tmp_path, capsys):
    if _linked_tensorrt() != (0, 0, 0) or tf.config.list_physical_devices("GPU"):
        pytest.skip("this TensorFlow has TensorRT or a GPU: the refusal differs")
    code, lines = run_inprocess(argv + ["--csv_file=r.csv", "--json_dir=j"], tmp_path)
    mode = argv[-1].split("=")[1]
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "tfbench: error: --trt_mode=%s cannot run here: TensorFlow %s is built without TensorRT "
        "(as every pip TensorFlow from 2.18 on); TensorRT runs on NVIDIA GPUs and this run is "
        "on the CPU. TF-TRT runs in NVIDIA's TensorFlow container (%s) on a GPU; --saved_model "
        "times the serving path without TensorRT" % (mode, tf.__version__, CONTAINER)]
    assert not any(l.startswith(("Generating", "Running warm up")) for l in lines)
    assert os.listdir(tmp_path) == []   # refused before anything ran: no row, no manifest


# --- segments, counted as TF-TRT's summary() counts them -------------------------------------
def test_segment_counts():
    counts = tftrt.segment_counts(converted_graph())
    assert counts == tftrt.Counts(segments=2, ops_in_tensorrt=12, ops_in_tensorflow=3,
                                  precisions=("FP16",))
    mixed = tftrt.segment_counts(converted_graph(("FP32", "FP16"), (1, 2)))
    assert mixed.precisions == ("FP16", "FP32") and mixed.ops_in_tensorrt == 3
    none = tftrt.segment_counts(converted_graph((), ()))
    assert none == tftrt.Counts(0, 0, 3, ())


# --- the stand-in is TF-TRT's API --------------------------------------------------------------
@pytest.mark.parametrize("method", ["__init__", "convert", "build", "save", "summary"])
def test_the_stand_in_has_the_converters_parameters(method):
    from tensorflow.python.compiler.tensorrt import trt_convert
    real = inspect.signature(getattr(trt_convert.TrtGraphConverterV2, method))
    stand_in = inspect.signature(getattr(StandInConverter, method))
    assert list(stand_in.parameters) == list(real.parameters)
    assert tf.experimental.tensorrt.Converter is trt_convert.TrtGraphConverterV2


# --- runs with the stand-in --------------------------------------------------------------------
def ours(directory):
    """tfbench's temporary SavedModel directories in `directory` (TensorFlow's autograph leaves
    its own files there until the process exits)."""
    return [n for n in os.listdir(directory) if n.startswith(serving.TEMP_PREFIX)]


@pytest.mark.slow
def test_fp16_engines_are_built_before_warm_up(stand_in, tmp_path):
    events = stand_in
    assert run_logged(["--trt_mode=FP16", "--trt_max_workspace_size_bytes=123456",
                       "--freeze_when_forward_only"], events) == 0
    kinds = [e[0] if e[0] != "line" else e[1] for e in events]
    assert kinds.index("build") < kinds.index("Running warm up")
    (init,) = [e[1] for e in events if e[0] == "init"]
    assert init["precision_mode"] == "FP16" and init["max_workspace_size_bytes"] == 123456
    assert init["use_calibration"] is False
    # Dynamic shape with a profile for the run's batch: TensorRT 10 has no implicit batch.
    assert (init["use_dynamic_shape"], init["dynamic_shape_profile_strategy"]) == (True,
                                                                                   "Optimal")
    assert init["input_saved_model_signature_key"] == "serving_default"
    assert os.path.basename(init["input_saved_model_dir"]) == "saved_model"
    assert [e[1] for e in events if e[0] == "build"] == [[(4, 32, 32, 3, "float32")]]
    assert "calibrate" not in kinds
    row, manifest = row_and_manifest(tmp_path)
    assert row["status"] == "ok" and row["serving_path"] == "tftrt"
    assert (row["trt_mode"], row["trt_precisions"], row["tensorrt_version"]) == (
        "FP16", "FP16", "10.8.0")
    assert (row["trt_segments"], row["trt_ops_in_tensorrt"], row["trt_ops_in_tensorflow"]) == (
        "2", "12", "3")
    assert row["trt_calibration_batches"] == ""
    for name in ("trt_convert_sec", "trt_build_sec", "export_sec", "load_sec",
                 "latency_ms_p50"):
        assert float(row[name]) > 0, name
    extra = manifest["extra"]
    assert extra["trt_summary"][-1] == "[*] Total number of TensorRT engines: 2"
    assert extra["trt_engines"] == 2   # one per segment, read from the saved SavedModel
    assert extra["served_max_abs_diff"] == 0.0   # the stand-in serves the export itself
    lines = [e[1] for e in events if e[0] == "line"]
    (trt_line,) = [l for l in lines if l.startswith("TF-TRT:")]
    assert trt_line.startswith("TF-TRT: FP16 (engines FP16), 2 TensorRT segments with 12 ops in "
                               "TensorRT, 3 ops left in TensorFlow, 2 engines built; convert ")
    assert trt_line.endswith("; TensorRT 10.8.0")
    assert any(l.startswith("Latency (ms/batch, TF-TRT FP16 SavedModel serving signature): p50 ")
               for l in lines)
    # The legacy TF-TRT runs' --freeze_when_forward_only: TF-TRT freezes, nothing is ignored.
    assert not any("freeze_when_forward_only" in l for l in lines) and row["notices"] == ""
    assert ours(tmp_path / "tmp") == []   # the converted SavedModel went with the run


@pytest.mark.slow
def test_int8_calibrates_on_the_runs_own_batches(stand_in, tmp_path):
    events = stand_in
    assert run_logged(["--trt_mode=INT8", "--trt_calibration_batches=3"], events) == 0
    assert [e[1]["use_calibration"] for e in events if e[0] == "init"] == [True]
    batches = [e[1][0] for e in events if e[0] == "calibrate"]
    assert [b.shape for b in batches] == [(4, 32, 32, 3)] * 3
    # Synthetic images as the run's (truncated normal around 127), a new batch each time.
    assert all(7 < b.min() and b.max() < 247 for b in batches)
    assert not (batches[0] == batches[1]).all() and not (batches[1] == batches[2]).all()
    # Dynamic-shape mode (2.17's build()): the profile from the run's batch, then calibration.
    kinds = [e[0] for e in events]
    assert kinds.index("convert") < kinds.index("build") < kinds.index("calibrate")
    assert [e[1] for e in events if e[0] == "build"] == [[(4, 32, 32, 3, "float32")]]
    row, manifest = row_and_manifest(tmp_path)
    assert (row["trt_mode"], row["trt_calibration_batches"]) == ("INT8", "3")
    assert manifest["extra"]["trt_engines"] == 2
    lines = [e[1] for e in events if e[0] == "line"]
    (trt_line,) = [l for l in lines if l.startswith("TF-TRT:")]
    assert re.search(r"; convert \d+\.\d{3} s, engine build \d+\.\d{3} s with 3 calibration "
                     r"batches, save \d+\.\d{3} s; TensorRT 10\.8\.0$", trt_line), trt_line


@pytest.mark.slow
def test_int8_on_real_data_calibrates_on_its_batches(stand_in, tmp_path):
    events = stand_in
    (tmp_path / "cifar").mkdir()
    test_images = write_fake_cifar10(tmp_path / "cifar")
    (tmp_path / "ckpt").mkdir()
    tf.train.Checkpoint(model=catalog.get("trivial", "cifar10").build(32, "NHWC")).save(
        str(tmp_path / "ckpt" / "model.ckpt"))
    argv = [a for a in TINY if a != "--forward_only"] + [
        "--eval", "--train_dir=ckpt", "--data_dir=cifar", "--num_eval_batches=2",
        "--trt_mode=INT8", "--trt_calibration_batches=3"]
    code = run.run_benchmark(["tfbench"] + argv + ["--csv_file=r.csv", "--json_dir=j"],
                             emit=lambda line: events.append(("line", line)))
    assert code == 0, events[-3:]
    batches = [e[1][0] for e in events if e[0] == "calibrate"]
    # The evaluation's own batches, in order (its pipeline is not shuffled): pixels / 127.5 - 1.
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        np.testing.assert_allclose(batch, test_images[4 * i:4 * i + 4] / 127.5 - 1.0, atol=1e-6)
    row, _ = row_and_manifest(tmp_path)
    assert (row["mode"], row["steps_run"], row["trt_calibration_batches"]) == ("eval", "2", "3")


@pytest.mark.slow
def test_zero_segments_are_said(stand_in, tmp_path, monkeypatch):
    monkeypatch.setattr(StandInConverter, "GRAPH_DEF", None)   # the signature's own graph
    events = stand_in
    assert run_logged(["--trt_mode=FP32"], events) == 0
    row, manifest = row_and_manifest(tmp_path)
    assert (row["trt_segments"], row["trt_ops_in_tensorrt"], row["trt_precisions"]) == (
        "0", "0", "")
    left = int(row["trt_ops_in_tensorflow"])
    assert left > 0
    notice = ("TF-TRT made no TensorRT segment of trivial (FP32): the timed steps run all %d ops "
              "of the converted graph in TensorFlow" % left)
    assert notice in row["notices"].split("; ")
    lines = [e[1] for e in events if e[0] == "line"]
    assert lines.index(notice) < lines.index("Running warm up")
    assert any(l.startswith("TF-TRT: FP32 (no TensorRT engine), 0 TensorRT segments") for l in lines)


@pytest.mark.slow
def test_segments_without_an_engine_are_said(stand_in, tmp_path, monkeypatch):
    monkeypatch.setattr(StandInConverter, "FAILED_ENGINES", frozenset({"TRTEngineOp_000_001"}))
    events = stand_in
    assert run_logged(["--trt_mode=FP16"], events) == 0
    row, manifest = row_and_manifest(tmp_path)
    assert (row["trt_segments"], manifest["extra"]["trt_engines"]) == ("2", 1)
    notice = ("TF-TRT built 1 TensorRT engine for the 2 segments of trivial (FP16) before "
              "warm-up: TensorRT failed to build the others (TensorFlow's log says why), whose "
              "ops the timed steps run in TensorFlow")
    assert notice in row["notices"].split("; ")
    lines = [e[1] for e in events if e[0] == "line"]
    assert lines.index(notice) < lines.index("Running warm up")


def test_engines_are_counted_as_tensorflow_serializes_them(tmp_path):
    """SerializeTRTResource's file per TRTEngineOp: a TFRecord record per engine built, an
    empty file when the engine failed to build; no assets at all when build() never ran."""
    assert tftrt.engines_saved(str(tmp_path)) == 0
    (tmp_path / "assets").mkdir()
    for name, records in (("TRTEngineOp_000_000", 1), ("TRTEngineOp_000_001", 0),
                          ("TRTEngineOp_001_000", 2)):
        with tf.io.TFRecordWriter(str(tmp_path / "assets" / (tftrt.ENGINE_FILE_PREFIX + name))
                                  ) as writer:
            for i in range(records):
                writer.write(b"engine %d" % i)
    (tmp_path / "assets" / "vocabulary.txt").write_text("not an engine\n")
    assert tftrt.engines_saved(str(tmp_path)) == 3


def test_the_profile_strategy_is_one_tensorflow_accepts():
    from tensorflow.python.compiler.tensorrt import trt_convert
    assert tftrt.PROFILE_STRATEGY in trt_convert.supported_profile_strategies()
    trt_convert.TrtGraphConverterV2._verify_profile_strategy(None, tftrt.PROFILE_STRATEGY)
    with pytest.raises(ValueError, match="not supported"):
        trt_convert.TrtGraphConverterV2._verify_profile_strategy(None, "Fastest")


def test_tensorflows_own_converter_takes_tfbenchs_arguments(tmp_path):
    """Here TensorFlow has no TensorRT: the real converter binds every argument tfbench passes
    (a wrong name would be a TypeError) and then refuses in _check_trt_version_compatibility."""
    if _linked_tensorrt() != (0, 0, 0):
        pytest.skip("this TensorFlow has TensorRT: the converter would start")
    with pytest.raises(tftrt.ConversionFailed) as failed:
        tftrt.convert(str(tmp_path / "in"), str(tmp_path / "out"), precision_mode="FP16",
                      max_workspace_size_bytes=1 << 30, signature_key="serving_default",
                      build_input=lambda: iter([]))
    assert str(failed.value) == ("TF-TRT (FP16) could not create the converter: Tensorflow has "
                                 "not been built with TensorRT support.")
    assert failed.value.detail.startswith("RuntimeError: ")


@pytest.mark.slow
def test_a_failed_conversion_is_one_line_and_a_row(stand_in, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(StandInConverter, "FAIL_IN", "convert")
    events = stand_in
    assert run_logged(["--trt_mode=FP16"], events) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["tfbench: error: TF-TRT (FP16) could not convert: Specified device is not a "
                   "GPU: /job:localhost/replica:0/task:0/device:CPU:0"]
    row, manifest = row_and_manifest(tmp_path)
    assert row["status"] == "error" and row["error"] == err[0][len("tfbench: error: "):]
    assert float(row["export_sec"]) > 0 and row["trt_mode"] == "FP16"
    assert manifest["extra"]["exception"].startswith("ValueError: Specified device is not a GPU")
    assert "Running warm up" not in [e[1] for e in events if e[0] == "line"]
    assert ours(tmp_path / "tmp") == []
