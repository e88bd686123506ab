"""The engine reports a run through RunLog (ClassicLog prints it as the legacy log, event by event:
output/test_classic_log.py)."""

import ast
import inspect
import json
import pathlib

import pytest

from helpers import only_row, run_inprocess
from tfbench.engine.runlog import RunLog, SilentLog, StepReport, record_notice
from tfbench.output.classic_log import ClassicLog
from tfbench.results import RunResult

TFBENCH = pathlib.Path(__file__).resolve().parents[2] / "tfbench"

EVENTS = sorted(name for name, value in vars(RunLog).items()
                if callable(value) and not name.startswith("_"))


def test_classic_log_and_silent_log_implement_every_event():
    assert len(EVENTS) == 24
    for cls in (ClassicLog, SilentLog):
        for name in EVENTS:
            want = list(inspect.signature(getattr(RunLog, name)).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == want, (cls, name)
    assert isinstance(ClassicLog(print), RunLog) and isinstance(SilentLog(), RunLog)


def test_silent_log_says_nothing(capsys):
    log = SilentLog()
    log.show_notice("x")
    log.probe_started("x")
    log.step(StepReport(step=1, images_per_sec=1.0, plusminus=0.0, jitter=0.0, loss=0.0))
    assert capsys.readouterr() == ("", "")


def test_record_notice_records_each_notice_and_shows_it():
    class Shown(SilentLog):
        def __init__(self):
            self.lines = []

        def show_notice(self, text):
            self.lines.append(text)

    log, res = Shown(), RunResult()
    record_notice(log, res, "--a has no effect", "--b ignored")
    assert res.notices == log.lines == ["--a has no effect", "--b ignored"]


def _show_notice_uses():
    """(module, innermost enclosing function) of every mention of `show_notice` in tfbench/."""
    uses = []
    for path in sorted(TFBENCH.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        scope = {}
        for node in ast.walk(tree):   # outer functions first: the innermost name is kept
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for inner in ast.walk(node):
                    scope[inner] = getattr(node, "name", "<lambda>")
        uses += [(path.relative_to(TFBENCH).as_posix(), scope.get(node, "<module>"))
                 for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr == "show_notice"]
    return uses


def test_only_record_notice_shows_a_notice():
    """A notice shown without being recorded never reaches the CSV's notices column (--num_
    learning_rate_warmup_epochs' once did: the optimizer got RunLog's show method)."""
    assert _show_notice_uses() == [("engine/runlog.py", "record_notice")]


# Flags that make a run change what was asked (or leave a figure out), and the start of the
# notice each must give. One training and one forward-only run in this process.
NOTICE_RUNS = {
    "training": (["--num_learning_rate_warmup_epochs=1", "--batch_group_size=2",
                  "--accum_steps=2", "--gpu_indices=0", "--use_synthetic_data",
                  "--data_dir={tmp}", "--explain_scaling", "--trace_file={tmp}/a_file/t.json",
                  "--variable_update=collective_all_reduce"],
                 ["--num_learning_rate_warmup_epochs has no effect without",
                  "--batch_group_size has no effect under TF2 (TF1 graph-only flag)",
                  "Gradient accumulation: 2 micro-batches of 2 per device",
                  "--gpu_indices=0 has no effect on the CPU",
                  "--use_synthetic_data: synthetic inputs, --data_dir={tmp} not read",
                  "--variable_update=collective_all_reduce without a cluster",
                  "Trace not written to {tmp}/a_file/t_profile",
                  "--explain_scaling: one device, no scaling to explain"]),
    "forward_only": (["--forward_only", "--model=resnet20", "--data_name=cifar10",
                      "--accum_steps=2", "--estimate_dataset_size=1000",
                      "--freeze_when_forward_only", "--variable_update=replicated",
                      "--all_reduce_spec=nccl"],
                     ["--accum_steps applies to training only; ignored in forward_only mode",
                      "--estimate_dataset_size estimates training time: no estimate",
                      "--freeze_when_forward_only has no effect under TF2",
                      "One device: nothing to all-reduce (--all_reduce_spec unused)",
                      "Batch norm folded into 19 convolutions for inference"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(NOTICE_RUNS))
def test_every_notice_printed_is_in_the_row_and_every_one_recorded_is_printed(
        mode, tmp_path, monkeypatch):
    flags, expected = NOTICE_RUNS[mode]
    tmp = tmp_path.as_posix()
    (tmp_path / "a_file").write_text("")
    shown = []
    show = ClassicLog.show_notice

    def spy(self, text):
        shown.append(text)
        show(self, text)
    monkeypatch.setattr(ClassicLog, "show_notice", spy)
    code, lines = run_inprocess(
        ["--model=trivial", "--device=cpu", "--batch_size=2", "--image_size=32",
         "--num_batches=2", "--num_warmup_batches=1", "--csv_file=r.csv", "--json_dir=j"]
        + [f.format(tmp=tmp) for f in flags], tmp_path)
    assert code == 0
    row = only_row(tmp_path / "r.csv")
    (manifest,) = (tmp_path / "j").glob("*.json")
    # The manifest keeps the notices one by one; the CSV joins them (a notice may hold "; ").
    notices = json.loads(manifest.read_text())["notices"]
    assert row["notices"] == "; ".join(notices)
    for start in expected:
        assert [n for n in notices if n.startswith(start.format(tmp=tmp))], start
    assert shown and [n for n in shown if n not in notices] == []
    assert [n for n in notices if n not in lines] == []
