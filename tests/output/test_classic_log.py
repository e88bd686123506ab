"""Golden tests for the classic tf_cnn_benchmarks log format."""

import numpy as np
import pytest

from tfbench.engine.base import should_display
from tfbench.measure.stats import perf_stats
from tfbench.output import classic_log
from tfbench.engine.runlog import DIAGNOSIS_PARTS, Header, StepReport
from tfbench.output.classic_log import ClassicLog

# The legacy header for `--model=trivial --batch_size=32 --num_batches=20 --device=cpu
# --data_format=NHWC` (spec §2.1), byte for byte.
LEGACY_HEADER = """TensorFlow:  2.21
Model:       trivial
Dataset:     imagenet (synthetic)
Mode:        training
SingleSess:  False
Batch size:  32 global
             32 per device
Num batches: 20
Num epochs:  0.00
Devices:     ['/cpu:0']
NUMA bind:   False
Data format: NHWC
Optimizer:   sgd
Variables:   parameter_server
=========="""


def test_header_matches_legacy_bytes():
    lines = classic_log.header_lines(
        tf_version="2.21.0", model="trivial", dataset="imagenet (synthetic)", mode="training",
        batch_size=32, global_batch_size=32, num_batches=20, num_epochs=20 * 32 / 1281167,
        devices=["/cpu:0"], data_format="NHWC", optimizer="sgd",
        variable_update="parameter_server")
    assert "\n".join(lines) == LEGACY_HEADER


def test_header_multi_device_and_allreduce_lines():
    lines = classic_log.header_lines(
        tf_version="2.21.0", model="trivial", dataset="imagenet (synthetic)", mode="training",
        batch_size=16, global_batch_size=32, num_batches=10, num_epochs=0.0,
        devices=["/cpu:0", "/cpu:1"], data_format="NHWC", optimizer="sgd",
        variable_update="replicated", all_reduce_spec=None, show_all_reduce=True)
    assert "Batch size:  32 global" in lines
    assert "             16 per device" in lines
    assert "Devices:     ['/cpu:0', '/cpu:1']" in lines
    assert lines[-2] == "AllReduce:   None"
    assert lines[-1] == "=========="


def test_step_line_format_and_tokens():
    line = classic_log.step_line(10, 1711.73, 8.14, 31.27, 9.7041)
    assert line == "10\timages/sec: 1711.7 +/- 8.1 (jitter = 31.3)\t9.704"
    # Legacy parsers split on whitespace: 9 tokens, loss at [8].
    assert len(line.split()) == 9 and line.split()[8] == "9.704"
    acc = classic_log.step_line(5, 2648.2, 60.4, 98.2, 9.704, 0.0, 0.03125)
    assert acc.endswith("\t9.704\t0.000\t0.031")
    assert len(acc.split()) == 11


def test_step_header():
    assert classic_log.step_header("total_loss", False) == "Step\tImg/sec\ttotal_loss"
    assert classic_log.step_header("base_loss", True) == \
        "Step\tImg/sec\tbase_loss\ttop_1_accuracy\ttop_5_accuracy"


def test_perf_stats_formulas():
    times = [0.02, 0.025, 0.021, 0.03]
    mean, pm, jitter = perf_stats(32, times)
    speeds = 32 / np.array(times)
    assert mean == pytest.approx(32 / np.mean(times))
    assert pm == pytest.approx(np.std(speeds) / 2)
    assert jitter == pytest.approx(1.4826 * np.median(np.abs(speeds - np.median(speeds))))
    assert perf_stats(32, [0.02])[1:] == (0.0, 0.0)


def test_perf_stats_ewma_weights_recent_steps():
    mean, _, _ = perf_stats(10, [1.0, 0.5], ewma=0.5)
    # weights (1-a)^(n-1-i): 0.5 for the older step, 1 for the newest.
    assert mean == pytest.approx(10 / ((0.5 * 1.0 + 1.0 * 0.5) / 1.5))


def test_display_rule():
    shown = [i + 1 for i in range(25) if should_display(i, 10)]
    assert shown == [1, 10, 20]
    assert [i + 1 for i in range(12) if should_display(i, 5)] == [1, 5, 10]


def test_eval_and_footer_lines():
    assert classic_log.eval_progress_line(10, 1365.14) == "10\t1365.1 examples/sec"
    acc = classic_log.accuracy_line(0.005, 0.0225, 400)
    assert acc == "Accuracy @ 1 = 0.0050 Accuracy @ 5 = 0.0225 [400 examples]"
    assert len(acc.split()) == 12 and acc.split()[4] == "0.0050" and acc.split()[9] == "0.0225"
    footer = classic_log.footer_lines(1719.754)
    assert footer == ["-" * 64, "total images/sec: 1719.75", "-" * 64]


def test_mode_labels():
    assert classic_log.mode_label(False, False) == "training"
    assert classic_log.mode_label(True, False) == "forward only"
    assert classic_log.mode_label(False, True) == "evaluation"
    assert classic_log.mode_label(False, False, True) == "training + evaluation"


def test_every_event_prints_the_legacy_line():
    """ClassicLog, event by event, against the legacy script's log_fn strings (benchmark_cnn.py
    at 8fb7907, line numbers in the comments) and tfbench's own lines (docs/output.md)."""
    from tfbench.engine.runlog import Header, StepReport
    lines = []
    log = classic_log.ClassicLog(lines.append)
    log.show_notice("No GPU visible: running on CPU (--device=cpu)")
    log.header(Header(tf_version="2.21.0", model="trivial", dataset="imagenet (synthetic)",
                      mode="training", train_and_eval=True, batch_size=4, global_batch_size=8,
                      num_batches=20, num_epochs=0.5, devices=("/cpu:0", "/cpu:1"),
                      data_format="NHWC", optimizer="sgd", variable_update="replicated",
                      all_reduce_spec="pscpu", show_all_reduce=True, job_name="worker",
                      horovod_device="gpu"))
    assert lines == [
        "No GPU visible: running on CPU (--device=cpu)",
        "TensorFlow:  2.21", "Model:       trivial", "Dataset:     imagenet (synthetic)",
        "Mode:        training + evaluation", "SingleSess:  False", "Batch size:  8 global",
        "             4 per device", "Num batches: 20", "Num epochs:  0.50",
        "Devices:     ['/cpu:0', '/cpu:1']", "NUMA bind:   False", "Data format: NHWC",
        "Optimizer:   sgd", "Variables:   replicated", "AllReduce:   pscpu", "Sync:        True",
        "Horovod on:  gpu", "=========="]            # 1761-1791
    del lines[:]
    log.cluster_lines(["Starting worker 1"])                                      # 1864
    log.generating_training_model()                                               # 3032
    log.generating_evaluation_model()                                             # 2798
    log.generating_input_pipeline()
    log.initializing()                                                            # 2173
    log.warmup_started()                                                          # 2360
    log.tracing("/tmp/t.json")                                                    # 901
    log.warmup_done()                                                             # 2394
    log.repeat_started(2, 3)
    log.steps_started("base_loss", True)
    log.step(StepReport(step=10, images_per_sec=123.456, plusminus=1.25, jitter=2.75,
                        loss=7.1234, top_1=0.5, top_5=0.75))                      # 880
    log.step(StepReport(step=20, images_per_sec=9.96, plusminus=0.04, jitter=0.06, loss=0.0))
    log.checkpoint_loaded("/tmp/ckpt/model.ckpt-20")                              # 971
    log.evaluation_started(40, final=False)                                       # 2447
    log.evaluation_progress(10, 1365.14)                                          # 2015
    log.accuracy(0.005, 0.0225, 400)                                              # 2032
    log.early_stop(0.75)                                                          # 2456
    log.training_resumed()                                                        # 2461
    log.training_done()                                                           # 2495
    log.evaluation_started(60, final=True)                                        # 2502
    log.probe_started("Probing where the scaling goes")
    for part in ("input_only", "synthetic", "real"):
        log.diagnosis_started(part)
    log.environment({})
    assert lines == [
        "Starting worker 1", "Generating training model", "Generating evaluation model",
        "Generating input pipeline", "Initializing graph", "Running warm up",
        "Dumping trace to /tmp/t.json", "Done warm up", "Repeat 2 of 3",
        "Step\tImg/sec\tbase_loss\ttop_1_accuracy\ttop_5_accuracy",
        "10\timages/sec: 123.5 +/- 1.2 (jitter = 2.8)\t7.123\t0.500\t0.750",
        "20\timages/sec: 10.0 +/- 0.0 (jitter = 0.1)\t0.000",
        "Successfully loaded model from /tmp/ckpt/model.ckpt-20.",
        "Running evaluation at global_step 40", "10\t1365.1 examples/sec",
        "Accuracy @ 1 = 0.0050 Accuracy @ 5 = 0.0225 [400 examples]",
        "Stopping, as eval accuracy at least 0.75 was reached", "Resuming training",
        "Done with training", "Running final evaluation at global_step 60",
        "Probing where the scaling goes", "Input diagnosis: the input pipeline alone", "Input diagnosis: synthetic data",
        "Input diagnosis: real data"] + lines[24:]
    assert classic_log.header_lines(
        tf_version="2.17.1", model="m", dataset="d", mode="forward only", batch_size=1,
        global_batch_size=1, num_batches=1, num_epochs=0.0, devices=["/gpu:0"],
        data_format="NCHW", optimizer="sgd", variable_update="parameter_server")[0] \
        == "TensorFlow:  2.17"
    del lines[:]
    log.header(Header(tf_version="2.21.0", model="trivial", dataset="imagenet (synthetic)",
                      mode="forward_only", train_and_eval=False, batch_size=1,
                      global_batch_size=1, num_batches=1, num_epochs=0.0, devices=("/cpu:0",),
                      data_format="NHWC", optimizer="sgd", variable_update="parameter_server",
                      all_reduce_spec=None, show_all_reduce=False, job_name="",
                      horovod_device=None))
    assert lines[3] == "Mode:        forward only" and lines[-2:] == [
        "Variables:   parameter_server", "=========="]
    assert classic_log._mode_text("data_only", False) == "input pipeline only"
    assert classic_log._mode_text("eval", False) == "evaluation"
    assert classic_log._mode_text("forward_only", False) == "forward only"


def _header(**changes):
    values = dict(tf_version="2.21.0", model="trivial", dataset="imagenet (synthetic)",
                  mode="training", train_and_eval=False, batch_size=32, global_batch_size=32,
                  num_batches=20, num_epochs=20 * 32 / 1281167, devices=("/cpu:0",),
                  data_format="NHWC", optimizer="sgd", variable_update="parameter_server",
                  all_reduce_spec=None, show_all_reduce=False, job_name="",
                  horovod_device=None)
    values.update(changes)
    return Header(**values)


def test_a_training_run_with_an_evaluation_prints_the_legacy_lines():
    lines = []
    log = ClassicLog(lines.append)
    log.show_notice("No GPU visible: running on CPU (--device=cpu)")
    log.header(_header(train_and_eval=True))
    log.cluster_lines(["Starting worker 0"])
    log.generating_training_model()
    log.generating_evaluation_model()
    log.initializing()
    log.warmup_started()
    log.tracing("/tmp/t.json")
    log.warmup_done()
    log.steps_started("total_loss", False)
    log.step(StepReport(step=1, images_per_sec=1711.73, plusminus=8.14, jitter=31.27,
                        loss=9.7041))
    log.evaluation_started(2, final=False)
    log.evaluation_progress(1, 1365.14)
    log.accuracy(0.005, 0.0225, 400)
    log.early_stop(0.4)
    log.training_resumed()
    log.repeat_started(2, 3)
    log.training_done()
    log.evaluation_started(5, final=True)
    assert lines[0] == "No GPU visible: running on CPU (--device=cpu)"
    assert lines[4] == "Mode:        training + evaluation"
    assert lines[lines.index("==========") + 1:] == [
        "Starting worker 0", "Generating training model", "Generating evaluation model",
        "Initializing graph", "Running warm up", "Dumping trace to /tmp/t.json",
        "Done warm up", "Step\tImg/sec\ttotal_loss",
        "1\timages/sec: 1711.7 +/- 8.1 (jitter = 31.3)\t9.704",
        "Running evaluation at global_step 2", "1\t1365.1 examples/sec",
        "Accuracy @ 1 = 0.0050 Accuracy @ 5 = 0.0225 [400 examples]",
        "Stopping, as eval accuracy at least 0.4 was reached", "Resuming training",
        "Repeat 2 of 3", "Done with training", "Running final evaluation at global_step 5"]


def test_other_modes_and_parts():
    lines = []
    log = ClassicLog(lines.append)
    log.header(_header(mode="data_only"))
    log.header(_header(mode="eval"))
    log.header(_header(mode="forward_only"))
    assert [l for l in lines if l.startswith("Mode:")] == [
        "Mode:        input pipeline only", "Mode:        evaluation",
        "Mode:        forward only"]
    del lines[:]
    log.generating_input_pipeline()
    log.checkpoint_loaded("/ckpt/model.ckpt-20")
    log.step(StepReport(step=5, images_per_sec=2648.2, plusminus=60.4, jitter=98.2, loss=9.704,
                        top_1=0.0, top_5=0.03125))
    for part in DIAGNOSIS_PARTS:
        log.diagnosis_started(part)
    assert lines == ["Generating input pipeline",
                     "Successfully loaded model from /ckpt/model.ckpt-20.",
                     "5\timages/sec: 2648.2 +/- 60.4 (jitter = 98.2)\t9.704\t0.000\t0.031",
                     "Input diagnosis: the input pipeline alone",
                     "Input diagnosis: synthetic data", "Input diagnosis: real data"]
