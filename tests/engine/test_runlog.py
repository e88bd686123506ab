"""The engine reports a run through RunLog; ClassicLog prints it as the legacy log, event by
event."""

import inspect

from tfbench.engine.runlog import DIAGNOSIS_PARTS, Header, RunLog, SilentLog, StepReport
from tfbench.output.classic_log import ClassicLog

EVENTS = sorted(name for name, value in vars(RunLog).items()
                if callable(value) and not name.startswith("_"))


def test_classic_log_and_silent_log_implement_every_event():
    assert len(EVENTS) == 22
    for cls in (ClassicLog, SilentLog):
        for name in EVENTS:
            want = list(inspect.signature(getattr(RunLog, name)).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == want, (cls, name)
    assert isinstance(ClassicLog(print), RunLog) and isinstance(SilentLog(), RunLog)


def test_silent_log_says_nothing(capsys):
    log = SilentLog()
    log.notice("x")
    log.step(StepReport(step=1, images_per_sec=1.0, plusminus=0.0, jitter=0.0, loss=0.0))
    assert capsys.readouterr() == ("", "")


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
    log.notice("No GPU visible: running on CPU (--device=cpu)")
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
