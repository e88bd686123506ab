"""--trace_file: the profile and the Chrome trace on both module layouts of TensorFlow's trace
converter (2.21's `_pywrap_profiler_plugin`, 2.17's `_pywrap_profiler`), and one notice line
for each file that cannot be written."""

import importlib
import json
import sys
import types

import pytest
import tensorflow as tf

from helpers import only_row, run_inprocess
from tfbench.engine import tracing

pytestmark = pytest.mark.slow

PACKAGE = "tensorflow.python.profiler.internal"
PLUGIN = PACKAGE + "._pywrap_profiler_plugin"
PROFILER = PACKAGE + "._pywrap_profiler"


@tf.function
def traced_step():
    return tf.reduce_sum(tf.matmul(tf.ones([8, 8]), tf.ones([8, 8])))


class Steps:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return traced_step().numpy()


def _real_converter():
    """The installed TensorFlow's own converter, wherever its layout keeps it (2.21: the plugin
    module; 2.17: `_pywrap_profiler`)."""
    for name in (PLUGIN, PROFILER):
        try:
            return importlib.import_module(name).xspace_to_tools_data
        except (ImportError, AttributeError):
            continue
    raise AssertionError("no xspace_to_tools_data in this TensorFlow")


def _hide_plugin(monkeypatch):
    """The 2.17.1 wheel's layout: no `_pywrap_profiler_plugin` module at all."""
    package = importlib.import_module(PACKAGE)
    monkeypatch.delattr(package, "_pywrap_profiler_plugin", raising=False)
    monkeypatch.setitem(sys.modules, PLUGIN, None)


def _fake_profiler(monkeypatch, convert=None):
    """`_pywrap_profiler` with (2.17) or without (2.21) `xspace_to_tools_data`."""
    module = types.ModuleType(PROFILER)
    if convert is not None:
        module.xspace_to_tools_data = convert
    package = importlib.import_module(PACKAGE)
    monkeypatch.setattr(package, "_pywrap_profiler", module)
    monkeypatch.setitem(sys.modules, PROFILER, module)


def _steps_traced(path):
    """How many calls of traced_step a Chrome trace JSON holds (one event per call)."""
    with open(path) as handle:
        events = json.load(handle)["traceEvents"]
    return sum(e.get("name") == "traced_step" for e in events)


def test_chrome_trace_on_the_installed_layout(tmp_path):
    notices, steps = [], Steps()
    written = tracing.trace_steps(steps, str(tmp_path / "t.json"), notices.append)
    assert notices == [] and steps.calls == tracing.TRACE_STEPS
    assert written[-1] == str(tmp_path / "t.json") and written[0].endswith(".xplane.pb")
    assert written[0].startswith(str(tmp_path / "t_profile" / "plugins" / "profile"))
    assert _steps_traced(tmp_path / "t.json") == tracing.TRACE_STEPS


def test_chrome_trace_on_the_2_17_layout(tmp_path, monkeypatch):
    real = _real_converter()
    calls = []

    def xspace_to_tools_data(paths, tool, options={}):  # 2.17.1's .pyi signature
        calls.append((list(paths), tool, dict(options)))
        return real(paths, tool, options)

    _hide_plugin(monkeypatch)
    _fake_profiler(monkeypatch, xspace_to_tools_data)
    with pytest.raises(ImportError):
        importlib.import_module(PLUGIN)
    notices, steps = [], Steps()
    written = tracing.trace_steps(steps, str(tmp_path / "logs"), notices.append)
    assert notices == []
    chrome = str(tmp_path / "logs" / "trace.json")
    assert written[-1] == chrome and calls == [([written[0]], "trace_viewer@", {})]
    assert _steps_traced(chrome) == tracing.TRACE_STEPS


def test_no_converter_is_one_line_and_the_profile_stays(tmp_path, monkeypatch):
    _hide_plugin(monkeypatch)
    _fake_profiler(monkeypatch)
    notices, steps = [], Steps()
    written = tracing.trace_steps(steps, str(tmp_path / "t.json"), notices.append)
    assert steps.calls == tracing.TRACE_STEPS
    assert len(written) == 1 and written[0].endswith(".xplane.pb")
    assert notices == [
        "Chrome trace not written to %s: this TensorFlow has no trace converter "
        "(xspace_to_tools_data in none of _pywrap_profiler_plugin, _pywrap_profiler); "
        "the TensorBoard profile is in %s" % (tmp_path / "t.json", tmp_path / "t_profile")]
    assert not (tmp_path / "t.json").exists()


def test_converter_without_data_is_said(tmp_path, monkeypatch):
    _hide_plugin(monkeypatch)
    _fake_profiler(monkeypatch, lambda paths, tool, options={}: (b"", False))
    notices = []
    written = tracing.trace_steps(Steps(), str(tmp_path / "t.json"), notices.append)
    assert notices == [
        "Chrome trace not written to %s: TensorFlow's trace converter returned no trace for "
        "%s; the TensorBoard profile is in %s"
        % (tmp_path / "t.json", written[0], tmp_path / "t_profile")]


def test_the_converters_own_reason_is_said(tmp_path, monkeypatch):
    # What both versions return for a file they cannot read (checked on 2.17.1 and 2.21.0).
    _hide_plugin(monkeypatch)
    _fake_profiler(monkeypatch, lambda paths, tool, options={}: (
        b"/nonexistent.xplane.pb; No such file or directory", False))
    notices = []
    written = tracing.trace_steps(Steps(), str(tmp_path / "t.json"), notices.append)
    assert notices == [
        "Chrome trace not written to %s: TensorFlow's trace converter failed on %s: "
        "/nonexistent.xplane.pb; No such file or directory; the TensorBoard profile is in %s"
        % (tmp_path / "t.json", written[0], tmp_path / "t_profile")]


def test_unwritable_chrome_file_is_said(tmp_path):
    (tmp_path / "logs" / "trace.json").mkdir(parents=True)
    notices = []
    written = tracing.trace_steps(Steps(), str(tmp_path / "logs"), notices.append)
    assert len(written) == 1
    assert notices == ["Chrome trace not written to %s: Is a directory; the TensorBoard profile "
                       "is in %s" % (tmp_path / "logs" / "trace.json", tmp_path / "logs")]


def test_uncreatable_log_directory_is_said_and_the_steps_still_run(tmp_path):
    (tmp_path / "file").write_text("")
    notices, steps = [], Steps()
    assert tracing.trace_steps(steps, str(tmp_path / "file" / "t.json"), notices.append) == []
    assert steps.calls == tracing.TRACE_STEPS
    assert notices == ["Trace not written to %s: Not a directory"
                       % (tmp_path / "file" / "t_profile")]


def test_a_previous_runs_profile_is_not_taken_for_this_one(tmp_path, monkeypatch):
    first = tracing.trace_steps(Steps(), str(tmp_path / "t.json"), [].append)
    assert len(first) == 2
    (tmp_path / "t.json").unlink()
    monkeypatch.setattr(tracing.tf.profiler.experimental, "start", lambda logdir: None)
    monkeypatch.setattr(tracing.tf.profiler.experimental, "stop", lambda: None)
    notices = []
    assert tracing.trace_steps(Steps(), str(tmp_path / "t.json"), notices.append) == []
    assert notices == ["Trace not written to %s: the profiler wrote no .xplane.pb file"
                       % (tmp_path / "t_profile")]
    assert not (tmp_path / "t.json").exists()


ARGS = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=2",
        "--num_batches=2", "--num_warmup_batches=1", "--json_dir=", "--monitor_interval_ms=0",
        "--csv_file=r.csv"]


def test_cli_writes_the_chrome_trace_on_the_2_17_layout(tmp_path, monkeypatch):
    real = _real_converter()
    _hide_plugin(monkeypatch)
    _fake_profiler(monkeypatch, real)
    code, lines = run_inprocess(ARGS + ["--trace_file=t.json"], tmp_path)
    assert code == 0, lines
    assert "Dumping trace to t.json" in lines
    with open(tmp_path / "t.json") as handle:
        assert json.load(handle)["traceEvents"]


def test_cli_says_a_trace_not_written_and_keeps_the_results(tmp_path, monkeypatch):
    _hide_plugin(monkeypatch)
    _fake_profiler(monkeypatch)
    code, lines = run_inprocess(ARGS + ["--trace_file=t.json"], tmp_path)
    assert code == 0, lines
    said = [i for i, line in enumerate(lines) if line.startswith("Chrome trace not written")]
    assert len(said) == 1
    assert lines.index("Dumping trace to t.json") < said[0] < lines.index("Done warm up")
    assert any(line.startswith("total images/sec:") for line in lines)
    assert lines[-1].startswith("-" * 20)
    row = only_row(tmp_path / "r.csv")
    assert float(row["images_per_sec"]) > 0
