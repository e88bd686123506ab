"""The `tfbench` command's own answers (tfbench.cli): `--version`."""

import os
import subprocess
import sys

import pytest

from helpers import ROOT


@pytest.mark.slow
def test_tfbench_version_prints_the_versions_without_importing_tensorflow(tmp_path):
    code = ("import sys; from tfbench import cli; cli.main(['tfbench', '--version']); "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout.splitlines()
    fields = dict(part.strip().split(" ", 1) for part in out[0].split("|"))
    assert list(fields) == ["tfbench", "TensorFlow", "Keras", "Python"]
    assert fields["tfbench"].startswith("0.1.0") and fields["TensorFlow"][:2] == "2."
    assert out[1] == "False"


def test_a_study_names_itself_and_its_history_to_its_children_only_while_it_runs(monkeypatch,
                                                                                  capsys):
    """sweep, evaluate, validate and launch hand their children TFBENCH_HISTORY_SOURCE and their
    --history through the environment; run inside a longer process (the tests, a notebook),
    the environment is as it was afterwards, and a malformed --history is refused first."""
    import os

    from tfbench import cli
    monkeypatch.delenv("TFBENCH_HISTORY_SOURCE", raising=False)
    monkeypatch.setenv("TFBENCH_HISTORY", "")
    seen = {}

    def fake_main(args):
        seen.update(source=os.environ.get("TFBENCH_HISTORY_SOURCE"),
                    history=os.environ.get("TFBENCH_HISTORY"))
        return 0
    import tfbench.cli.sweep as sweep_cli
    monkeypatch.setattr(sweep_cli, "main", fake_main)
    assert cli.main(["tfbench", "sweep", "--history=/tmp/x.sqlite", "--sweep=batch_size=1"]) == 0
    assert seen == {"source": "sweep", "history": "/tmp/x.sqlite"}
    assert "TFBENCH_HISTORY_SOURCE" not in os.environ
    assert os.environ["TFBENCH_HISTORY"] == ""
    assert cli.main(["tfbench", "sweep", "--history=mysql://db/x"]) == 2
    assert capsys.readouterr().err.startswith("tfbench: error: --history=mysql://db/x: ")
    assert "TFBENCH_HISTORY_SOURCE" not in os.environ
