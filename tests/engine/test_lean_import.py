"""lean_import: optional libraries are unimportable only inside the block, then import as usual."""

import gc
import os
import subprocess
import sys

import pytest

from tfbench.engine import lean_import
from paths import ROOT
from helpers import only_row


def test_hidden_modules_raise_import_error_inside_and_import_after():
    name = "json.tool"          # a stdlib module that is importable and rarely preloaded
    sys.modules.pop(name, None)
    with lean_import.hidden([name]):
        with pytest.raises(ImportError):
            __import__(name)
    assert name not in sys.modules
    __import__(name)
    assert sys.modules[name] is not None


def test_already_imported_modules_are_left_alone():
    import json
    with lean_import.hidden(["json"]):
        assert sys.modules["json"] is json
        import json as again
        assert again is json


def test_a_module_that_needs_a_hidden_library_is_imported_anyway(tmp_path, monkeypatch):
    (tmp_path / "needs_tool.py").write_text("import json.tool\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("json.tool", None)
    lean_import.import_lean(["needs_tool"], optional=["json.tool"])
    assert sys.modules["needs_tool"].VALUE == 7 and sys.modules["json.tool"] is not None
    sys.modules.pop("needs_tool")


@pytest.mark.slow
def test_frameworks_import_without_the_optional_libraries_in_a_fresh_process():
    code = ("import sys\n"
            "from tfbench.engine import lean_import\n"
            "lean_import.import_frameworks()\n"
            "assert 'tensorflow' in sys.modules and 'keras' in sys.modules\n"
            "import gc\n"
            "assert gc.isenabled() and gc.get_freeze_count() > 100000, gc.get_freeze_count()\n"
            "print(sorted(m for m in lean_import.OPTIONAL if m in sys.modules))\n"
            "import importlib.util\n"
            "for m in lean_import.OPTIONAL:\n"
            "    if importlib.util.find_spec(m) is not None:\n"
            "        __import__(m)\n"
            "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "ok"]


@pytest.mark.parametrize("enabled_before", [True, False])
def test_collector_paused_inside_then_frozen_and_restored(enabled_before):
    (gc.enable if enabled_before else gc.disable)()
    frozen_before = gc.get_freeze_count()
    try:
        with lean_import.collector_paused():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]   # tracked objects alive at the end of the block
        assert gc.isenabled() is enabled_before
        assert gc.get_freeze_count() >= frozen_before + len(kept)
    finally:
        gc.unfreeze()
        gc.enable()


@pytest.mark.slow
def test_a_numpy_1_tensorflow_beside_numpy_2_ends_in_one_line_before_importing_it(tmp_path):
    """As after `pip install .` into TensorFlow 2.17: pip upgraded numpy for pandas."""
    site = tmp_path / "site"
    for name, version, requires in (
            ("tf-nightly", "2.17.0.dev20240601", ["numpy<2.0.0,>=1.23.5"]),
            ("numpy", "2.0.0", [])):   # shadows the real numpy's metadata (read, not imported)
        info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
        info.mkdir(parents=True)
        (info / "METADATA").write_text("".join(
            ["Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)]
            + ["Requires-Dist: %s\n" % r for r in requires]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), ROOT]))
    out = subprocess.run([sys.executable, "-m", "tfbench", "--device=cpu", "--model=trivial",
                          "--num_batches=2", "--csv_file=r.csv", "--json_dir="],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("tfbench: error: TensorFlow ")
    assert "is built for numpy 1.x and cannot import with numpy 2.0.0: pip install " \
           "\"numpy<2\" pandas matplotlib repairs it" in out.stderr
    row = only_row(tmp_path / "r.csv")
    assert row["status"] == "error" and out.stderr.strip().endswith(row["error"])
