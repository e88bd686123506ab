"""One sweep child: how its end is classified, and the row written for a child that wrote none."""

import os
import sys

import pytest

from tfbench.sweep import child
import paths

REPO = paths.ROOT


@pytest.mark.parametrize("code, tail, status", [
    (3, "whatever", "oom"),
    (1, "Traceback\nMemoryError", "oom"),
    (-6, "terminate called after throwing an instance of 'std::bad_alloc'", "oom"),
    (-9, "", "oom"),
    (4, "loss is NaN", "nan"),
    (130, "", "interrupted"),
    (-15, "", "interrupted"),
    (1, "RuntimeError: boom", "error"),
    (-11, "", "error"),
])
def test_classify_failure(code, tail, status):
    assert child.classify_failure(child.ChildOutcome(code, 1.0), tail)[0] == status


@pytest.mark.parametrize("code", [-9, -2, 130, 1])
def test_a_child_stopped_with_an_interrupted_sweep_is_interrupted_not_oom(code):
    outcome = child.ChildOutcome(code, 1.0, interrupted=KeyboardInterrupt())
    status, error = child.classify_failure(outcome, "Running warm up\n")
    assert status == "interrupted"
    assert error.startswith("stopped with the interrupted sweep (")
    assert error.endswith("); last output: Running warm up")
    assert ("killed by SIGKILL" in error) == (code == -9)


def test_abort_under_a_memory_cap_is_oom():
    tail = "terminate called after throwing an instance of 'dnnl::error'\n  what():  could not" \
        " create a primitive"
    outcome = child.ChildOutcome(-6, 1.0)
    assert child.classify_failure(outcome, tail)[0] == "error"
    status, error = child.classify_failure(outcome, tail, memory_capped=True)
    assert status == "oom"
    assert error == "killed by SIGABRT under the memory cap (allocation failure): what():  " \
                    "could not create a primitive"


def test_classify_failure_message_has_last_line_and_exit_code():
    status, error = child.classify_failure(child.ChildOutcome(1, 1.0), "a\nRuntimeError: x\n\n")
    assert (status, error) == ("error", "RuntimeError: x (exit code 1)")


def test_failure_row_describes_the_configuration():
    row = child.failure_row(["--model=vgg16", "--batch_size=16", "--num_gpus=2",
                             "--use_fp16", "--forward_only=true"], "oom", "boom", "cmd")
    assert (row["model"], row["batch_size"], row["global_batch_size"], row["num_devices"],
            row["precision"], row["mode"], row["status"], row["error"]) == \
        ("vgg16", "16", "32", "2", "fp16", "forward_only", "oom", "boom")
    assert row["run_id"] and row["images_per_sec"] == ""


def test_failure_row_reads_the_flags_as_the_child_does():
    # The child's parser (absl) takes -flag too; the row says what the child would have run.
    row = child.failure_row(["-model=vgg16", "-use_fp16", "-xla_compile", "--batch_size", "8"],
                            "oom", "boom", "cmd")
    assert (row["model"], row["precision"], row["xla"], row["batch_size"]) == \
        ("vgg16", "fp16", "1", "8")
    row = child.failure_row(["--model=vgg16", "--xla=false", "--xla_compile"], "oom", "", "c")
    assert row["xla"] == "1"   # --xla or its legacy spelling --xla_compile



def test_the_child_imports_this_tfbench(tmp_path, monkeypatch):
    # The folder holding this tfbench package (not the package folder itself) leads the child's
    # path, so an installed tfbench elsewhere (another checkout) does not run the points.
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "child.log"
    code = "import os, tfbench; print(os.environ['PYTHONPATH']); print(tfbench.__file__)"
    assert child.run_child([sys.executable, "-c", code], str(log)).exit_code == 0
    path, module = log.read_text().splitlines()
    assert path.split(os.pathsep)[0] == REPO
    assert module == os.path.join(REPO, "tfbench", "__init__.py")
