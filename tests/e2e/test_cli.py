"""End-to-end: the real CLI in a subprocess, read the way legacy parsers read it."""

import json
import os

import pytest

import zygote
from helpers import ROOT, only_row, run_cli

pytestmark = pytest.mark.slow

FAST = ["--device=cpu", "--model=trivial", "--num_warmup_batches=2"]


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("train")
    code, out = run_cli(FAST + ["--num_batches=20", "--batch_size=32"], cwd)
    return code, out, cwd


def test_exit_zero_and_footer_is_last(training_run):
    code, out, _ = training_run
    assert code == 0, out
    lines = out.rstrip("\n").split("\n")
    assert lines[-1] == "-" * 64
    assert lines[-3] == "-" * 64
    assert lines[-2].startswith("total images/sec: ")
    # Lambda's log2csv: lines[-2].split(' ')[-1]; shell users: cut -d':' -f2 / cut -d' ' -f3.
    value = float(lines[-2].split(" ")[-1])
    assert value > 0
    assert float(lines[-2].split(":")[1]) == value
    assert float(lines[-2].split(" ")[2]) == value
    assert "Traceback" not in out


def test_header_and_step_lines(training_run):
    _, out, _ = training_run
    lines = out.split("\n")
    start = lines.index("TensorFlow:  " + ".".join(__import__("tensorflow").__version__
                                                 .split(".")[:2]))
    assert lines[start + 1:start + 5] == ["Model:       trivial",
                                          "Dataset:     imagenet (synthetic)",
                                          "Mode:        training", "SingleSess:  False"]
    assert "Batch size:  32 global" in lines and "             32 per device" in lines
    assert "Devices:     ['/cpu:0']" in lines and "Data format: NHWC" in lines
    body = lines[lines.index("=========="):]
    assert body[1:5] == ["Generating training model", "Initializing graph", "Running warm up",
                         "Done warm up"]
    assert body[5] == "Step\tImg/sec\ttotal_loss"
    steps = [l for l in body if l[:1].isdigit() and "images/sec:" in l]
    assert [s.split("\t")[0] for s in steps] == ["1", "10", "20"]
    for s in steps:
        tokens = s.split()
        assert len(tokens) == 9 and tokens[1] == "images/sec:" and tokens[3] == "+/-"


def test_csv_row_and_json_manifest(training_run):
    _, _, cwd = training_run
    row = only_row(os.path.join(cwd, "tfbench_results.csv"))
    assert row["status"] == "ok" and row["model"] == "trivial" and row["mode"] == "training"
    assert row["batch_size"] == "32" and row["global_batch_size"] == "32"
    assert row["device_kind"] == "cpu" and row["num_devices"] == "1"
    assert row["data_source"] == "synthetic" and row["precision"] == "fp32"
    assert row["num_batches"] == "20" and row["steps_run"] == "20"
    assert float(row["images_per_sec"]) > 0 and float(row["first_step_sec"]) > 0
    assert row["notices"].startswith("No GPU visible") or row["notices"] == ""
    manifest = json.load(open(os.path.join(cwd, "tfbench_runs", row["run_id"] + ".json")))
    assert manifest["flags"]["model"] == "trivial"
    assert len(manifest["step_times"]) == 20
    assert manifest["csv_row"]["images_per_sec"] == row["images_per_sec"]


def test_no_gpu_notice_when_device_not_given(tmp_path):
    code, out = run_cli(["--model=trivial", "--num_batches=1", "--num_warmup_batches=0",
                         "--csv_file="], tmp_path)
    assert code == 0
    assert "No GPU visible: running on CPU (--device=cpu)" in out
    assert "Data format: NHWC" in out
    assert not os.path.exists(tmp_path / "tfbench_results.csv")


def test_forward_only_and_accuracy_columns(tmp_path):
    code, out = run_cli(FAST + ["--forward_only", "--num_batches=12", "--display_every=5",
                                "--csv_file="], tmp_path)
    assert code == 0, out
    assert "Mode:        forward only" in out
    assert "Step\tImg/sec\ttotal_loss\ttop_1_accuracy\ttop_5_accuracy" in out
    steps = [l for l in out.split("\n") if "images/sec:" in l and l[:1].isdigit()]
    assert [s.split("\t")[0] for s in steps] == ["1", "5", "10"]
    assert all(len(s.split()) == 11 and s.split()[8] == "0.000" for s in steps)


def test_train_then_eval_from_checkpoint(tmp_path):
    train_dir = str(tmp_path / "ckpt")
    code, out = run_cli(["--device=cpu", "--model=trivial", "--num_batches=10",
                         "--train_dir=" + train_dir, "--csv_file="], tmp_path)
    assert code == 0, out
    assert os.path.exists(os.path.join(train_dir, "model.ckpt-20.index"))
    code, out = run_cli(["--device=cpu", "--model=trivial", "--eval", "--train_dir=" + train_dir,
                         "--batch_size=16", "--num_batches=25", "--csv_file="], tmp_path)
    assert code == 0, out
    lines = out.rstrip("\n").split("\n")
    assert "Mode:        evaluation" in lines
    assert "Num epochs:  0.01" in lines
    assert "Successfully loaded model from %s/model.ckpt-20." % train_dir in lines
    progress = [l for l in lines if l.endswith("examples/sec")]
    assert [p.split("\t")[0] for p in progress] == ["10", "20"]
    acc = [l for l in lines if l.startswith("Accuracy @ 1 = ")]
    assert len(acc) == 1 and acc[0].endswith("[400 examples]")
    assert lines[-2].startswith("total images/sec: ")


def test_eval_without_checkpoint_is_clear_error(tmp_path):
    code, out, err = run_cli(["--device=cpu", "--eval", "--train_dir=" + str(tmp_path / "none"),
                              "--csv_file="], tmp_path, merged=False)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("tfbench: error: Checkpoint not found in")
    assert "Traceback" not in err


def test_legacy_script_path_and_flagfile(tmp_path):
    flagfile = tmp_path / "t.flags"
    flagfile.write_text("--model=trivial\n--device=cpu\n--num_batches=2\n"
                        "--num_warmup_batches=1\n--csv_file=\n")
    proc = zygote.run(["--flagfile=%s" % flagfile], tmp_path, dict(os.environ), 300,
                      script=os.path.join(ROOT, "scripts", "tf_cnn_benchmarks.py"))
    assert proc.returncode == 0, proc.stdout
    assert "Num batches: 2" in proc.stdout
    assert proc.stdout.rstrip("\n").split("\n")[-2].startswith("total images/sec:")


# The full bad-input matrix runs in-process (test_bad_input.py); these check real processes.
@pytest.mark.parametrize("args, message", [
    (["--model=nosuchnet"], "Invalid model name 'nosuchnet': did you mean nasnet? `tfbench "
                            "models` lists all"),
    (["--device=gpu"], "--device=gpu asks for GPUs but none is visible"),
    (["--distortions", "False"], "Received unknown positional arguments: False"),
])
def test_bad_input_one_line_no_traceback(tmp_path, args, message):
    code, out, err = run_cli(args + ["--csv_file="], tmp_path, merged=False)
    assert code == 2, (out, err)
    errors = [l for l in err.splitlines() if l.startswith("tfbench: error:")]
    assert len(errors) == 1 and message in errors[0], err
    assert "Traceback" not in err + out


def test_graph_only_flag_warns_once(tmp_path):
    code, out = run_cli(FAST + ["--num_batches=1", "--winograd_nonfused=false",
                                "--csv_file="], tmp_path)
    assert code == 0
    warnings = [l for l in out.split("\n") if "--winograd_nonfused" in l]
    assert warnings == ["--winograd_nonfused has no effect under TF2 (TF1 graph-only flag); "
                        "ignored"]


def test_benchmark_log_dir(tmp_path):
    log_dir = tmp_path / "logs"
    code, out = run_cli(FAST + ["--num_batches=10", "--print_training_accuracy",
                                "--benchmark_log_dir=%s" % log_dir,
                                "--benchmark_test_id=t1", "--csv_file="], tmp_path)
    assert code == 0, out
    info = json.load(open(log_dir / "benchmark_run.log"))
    assert info["model_name"] == "trivial" and info["test_id"] == "t1"
    assert info["dataset"] == {"name": "imagenet (synthetic)"}
    names = [p["name"] for p in info["run_parameters"]]
    assert names == sorted(names) and "batch_size_per_device" in names
    assert {"name": "single_sess", "bool_value": "False"} in info["run_parameters"]
    metrics = [json.loads(l) for l in open(log_dir / "metric.log")]
    assert [m["global_step"] for m in metrics if m["name"] == "current_examples_per_sec"] \
        == [1, 10]
    assert any(m["name"] == "top_5_accuracy" for m in metrics)
    last = metrics[-1]
    assert last["name"] == "average_examples_per_sec" and last["global_step"] == 10
    assert set(last) == {"name", "value", "unit", "global_step", "timestamp", "extras"}


# A child whose run leaves a line in C's stdout buffer, unflushed, as NCCL's logger does when
# NCCL_DEBUG is set without NCCL_DEBUG_FILE (src/debug.cc: fwrite to stdout; from NCCL 2.22 its
# version line under NCCL_DEBUG=WARN). With `fail`, the run's steps then fail.
_NATIVE_STDOUT = """
import ctypes
import sys
import tensorflow as tf
from tfbench.engine import runner, steps

fail = sys.argv.pop(1) == "fail"
run = runner.run
# C's stdout block-buffered, as on a pipe without PYTHONUNBUFFERED (which makes CPython set
# it unbuffered, and a fork inherits that from the test's server): glibc's _IOFBF is 0.
libc = ctypes.CDLL(None)
buffer = ctypes.create_string_buffer(8192)   # glibc keeps an unbuffered stream's 1-byte buffer
libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), buffer, 0, 8192)

def run_writing_natively(*args, **kwargs):
    try:
        return run(*args, **kwargs)
    finally:   # the last thing the run does
        libc.printf(b"NCCL version 2.23.4+cuda12.6\\n")

def failing_step(self, from_iterator=False):
    def step(inputs):
        raise tf.errors.InternalError(None, None, "NCCL: unhandled system error")
    return step

runner.run = run_writing_natively
if fail:
    steps.Steps.train_step = failing_step
from tfbench.cli import entry_point
sys.argv = ["tfbench"] + sys.argv[1:]
entry_point()
"""


@pytest.mark.parametrize("outcome", ["footer", "fail"])
def test_what_a_library_left_in_cs_stdout_comes_before_the_last_line(tmp_path, outcome):
    args = [outcome, "--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=2",
            "--num_batches=2", "--num_warmup_batches=1", "--json_dir="]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    merged = zygote.run(args, tmp_path, env, 300, code=_NATIVE_STDOUT).stdout
    lines = merged.rstrip("\n").split("\n")
    assert "NCCL version 2.23.4+cuda12.6" in lines, merged
    if outcome == "footer":
        assert lines[-1] == "-" * 64 and lines[-2].startswith("total images/sec: ")
        assert lines.index("NCCL version 2.23.4+cuda12.6") < len(lines) - 3
    else:
        assert lines[-1].startswith("tfbench: error: TensorFlow's runtime failed running "
                                    "trivial on CPU")
    stdout = zygote.run(args, tmp_path, env, 300, merged=False, code=_NATIVE_STDOUT).stdout
    assert "NCCL version 2.23.4+cuda12.6\n" in stdout
    if outcome == "footer":
        assert stdout.endswith("-" * 64 + "\n")
