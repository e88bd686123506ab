"""--saved_model: the model exported with a serving signature, loaded back and timed as a
deployment calls it; its outputs are the in-process model's; export and load are reported
apart; its directory is temporary unless kept; what it cannot do is refused in one line."""

import gc
import json
import os
import tempfile
import weakref

import numpy as np
import pytest
import tensorflow as tf

from helpers import only_row, read_rows, run_inprocess, write_fake_cifar10
from tfbench.config.settings import make_settings
from tfbench.engine import base, resolved as resolved_lib, serving
from tfbench.errors import UsageError
from tfbench.models import catalog

pytestmark = pytest.mark.slow

TINY = ["--model=trivial", "--data_name=cifar10", "--device=cpu", "--batch_size=4",
        "--num_batches=3", "--num_warmup_batches=1"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """trivial (cifar10, 32 x 32) and its SavedModel, loaded."""
    model = catalog.get("trivial", "cifar10").build(32, "NHWC")
    path = str(tmp_path_factory.mktemp("export") / "saved_model")
    serving.export(model, path, 32, "float32")
    return model, tf.saved_model.load(path)


def test_the_signature_serves_the_models_logits(exported):
    model, loaded = exported
    signature = loaded.signatures["serving_default"]
    _, inputs = signature.structured_input_signature
    assert inputs == {"images": tf.TensorSpec([None, 32, 32, 3], tf.float32, name="images")}
    assert list(signature.structured_outputs) == ["logits"]
    rng = np.random.default_rng(3)
    for batch in (1, 5):   # any batch size, as a deployment sends
        images = tf.constant(rng.uniform(0, 255, (batch, 32, 32, 3)).astype(np.float32))
        got = signature(images=images)["logits"].numpy()
        np.testing.assert_allclose(got, model(images, training=False).numpy(), rtol=1e-5,
                                   atol=1e-5)
        assert got.shape == (batch, 11)


def test_host_accuracy_is_in_top_k():
    rng = np.random.default_rng(0)
    logits = rng.integers(0, 4, (64, 11)).astype(np.float32)   # many ties
    logits[3, :] = np.nan
    logits[5, 2] = np.inf
    labels = rng.integers(0, 11, 64)
    labels[5] = 2
    want = [float(tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, k), tf.float32)))
            for k in (1, 5)]
    assert serving.host_accuracy(logits, labels) == pytest.approx(want, abs=1e-7)


def test_the_served_step_scores_the_labels_it_is_given(exported):
    model, loaded = exported
    rng = np.random.default_rng(1)
    batches = [(tf.constant(rng.uniform(0, 255, (8, 32, 32, 3)).astype(np.float32)),
                tf.constant(rng.integers(0, 11, 8).astype(np.int32))) for _ in range(3)]
    step = serving.ServedStep(loaded.signatures["serving_default"], "/cpu:0", True, 10, 0)
    stream = iter(batches)
    for images, labels in batches:
        out = step(stream).numpy()
        logits = model(images, training=False)
        want = [float(tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, k), tf.float32)))
                for k in (1, 5)]
        assert out[:2].tolist() == [0.0, 0.0]
        assert out[2:].tolist() == pytest.approx(want)


# --- the CLI -----------------------------------------------------------------------------------
def _watch_the_in_process_weights(monkeypatch):
    """Whether the in-process model's first variable is still alive (after a collection) at
    each served step: the served copy should be the only one left."""
    refs, alive = [], []
    serve, call = base.ModeRunner.serve, serving.ServedStep.__call__

    def watched_serve(self, model, *args):
        refs.append(weakref.ref(model.variables[0]))
        return serve(self, model, *args)

    def watched_call(self, inputs):
        if not alive:   # the first step: warm-up
            gc.collect()
        alive.append(refs[0]() is not None)
        return call(self, inputs)
    monkeypatch.setattr(base.ModeRunner, "serve", watched_serve)
    monkeypatch.setattr(serving.ServedStep, "__call__", watched_call)
    return alive


def test_forward_only_serves_the_saved_model(tmp_path, monkeypatch):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    alive = _watch_the_in_process_weights(monkeypatch)
    code, lines = run_inprocess(TINY + ["--forward_only", "--saved_model", "--csv_file=r.csv",
                                        "--json_dir=j"], tmp_path)
    assert code == 0, lines
    row = only_row(tmp_path / "r.csv")
    assert row["serving_path"] == "saved_model" and row["status"] == "ok"
    assert float(row["export_sec"]) > 0 and float(row["load_sec"]) > 0
    assert float(row["latency_ms_p50"]) > 0 and row["trt_mode"] == ""
    (name,) = os.listdir(tmp_path / "j")
    with open(tmp_path / "j" / name) as handle:
        manifest = json.load(handle)
    assert manifest["extra"]["served_max_abs_diff"] <= 1e-4
    assert len(manifest["step_times"]) == 3 and len(manifest["warmup_times"]) == 1
    (path_line,) = [l for l in lines if l.startswith("Serving path:")]
    assert path_line.startswith("Serving path: SavedModel serving signature, export ")
    assert "(before warm-up, not timed); max |served - in-process| logit " in path_line
    assert any(l.startswith("Latency (ms/batch, SavedModel serving signature): p50 ")
               for l in lines)
    assert lines[-2].startswith("total images/sec: ")
    assert [n for n in os.listdir(tmp_path / "tmp") if n.startswith(serving.TEMP_PREFIX)] == []
    assert sorted(os.listdir(tmp_path)) == ["j", "r.csv", "tmp"]
    assert alive == [False] * 4   # warm-up and timed steps hold one copy of the weights


def test_saved_model_dir_keeps_it_and_must_be_new(tmp_path, capsys):
    keep = tmp_path / "keep"
    code, _ = run_inprocess(TINY + ["--forward_only", "--saved_model", "--saved_model_dir=keep",
                                    "--csv_file=", "--json_dir="], tmp_path)
    assert code == 0
    assert os.listdir(keep) == ["saved_model"]
    assert "saved_model.pb" in os.listdir(keep / "saved_model")
    loaded = tf.saved_model.load(str(keep / "saved_model"))
    assert list(loaded.signatures) == ["serving_default"]
    capsys.readouterr()
    code, lines = run_inprocess(TINY + ["--forward_only", "--saved_model",
                                        "--saved_model_dir=keep", "--csv_file=r.csv"], tmp_path)
    assert code == 2 and not (tmp_path / "r.csv").exists()
    assert capsys.readouterr().err.splitlines() == [
        "tfbench: error: --saved_model_dir=keep is not empty: give a new or empty directory"]


def test_eval_on_real_data_scores_as_in_process(tmp_path):
    data = tmp_path / "cifar"
    data.mkdir()
    write_fake_cifar10(data)
    common = ["--model=trivial", "--data_name=cifar10", "--data_dir=%s" % data, "--device=cpu",
              "--batch_size=4", "--train_dir=ckpt", "--csv_file=r.csv", "--json_dir="]
    tf.train.Checkpoint(model=catalog.get("trivial", "cifar10").build(32, "NHWC")).save(
        str(tmp_path / "ckpt" / "model.ckpt"))
    accuracy = {}
    for flag in ("--nosaved_model", "--saved_model"):
        code, lines = run_inprocess(common + ["--eval", "--num_eval_batches=4", flag], tmp_path)
        assert code == 0, lines
        accuracy[flag] = next(l for l in lines if l.startswith("Accuracy @ 1"))
    assert accuracy["--saved_model"] == accuracy["--nosaved_model"]
    served = read_rows(tmp_path / "r.csv")[-1]
    assert (served["mode"], served["serving_path"], served["steps_run"]) == (
        "eval", "saved_model", "4")
    assert float(served["top_5_accuracy"]) > 0   # labels from the data, scored


# --- what it refuses ---------------------------------------------------------------------------
@pytest.mark.parametrize("values, message", [
    ({"saved_model": True}, "--saved_model times the served model of an inference run: add "
                            "--forward_only, or --eval with --train_dir"),
    ({"trt_mode": "FP16"}, "--trt_mode times the served model of an inference run"),
    ({"saved_model_dir": "d", "forward_only": True},
     "--saved_model_dir keeps the export of --saved_model or --trt_mode: add --saved_model"),
    ({"saved_model": True, "forward_only": True, "num_gpus": 2},
     "--saved_model times one served model on one device, as a deployment runs it: use "
     "--num_gpus=1 and no --variable_update=horovod (got --num_gpus=2)"),
    ({"trt_mode": "INT8", "forward_only": True, "variable_update": "horovod"},
     "(got --variable_update=horovod)"),
    ({"trt_mode": "FP16", "forward_only": True, "xla": True},
     "--trt_mode hands the graph to TensorRT, --xla to XLA: give one of them"),
    ({"saved_model": True, "eval": True, "train_dir": "t", "eval_interval_secs": 60},
     "--saved_model exports one checkpoint before the timed steps: --eval_interval_secs "
     "cannot be combined with it"),
    ({"saved_model": True, "forward_only": True, "data_only": True},
     "--saved_model serves a model, and --data_only runs none: give one of them"),
])
def test_refused_combinations(values, message):
    with pytest.raises(UsageError) as err:
        make_settings(values)
    assert message in str(err.value)


def test_one_process_only(monkeypatch):
    for name in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID", "TF_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    p = make_settings({"saved_model": True, "forward_only": True, "device": "cpu",
                     "model": "trivial", "job_name": "worker", "task_index": 0,
                     "worker_hosts": "127.0.0.1:1,127.0.0.1:2"})
    with pytest.raises(UsageError, match="--saved_model times one served model on one device "
                                         "of one process, as a deployment runs it: this run has "
                                         "1 device.s. on 2 worker.s."):
        resolved_lib.resolve(p)
