"""`tfbench presets`: the listing of every preset and helper script, --path for the shell, and
an unknown name refused in one line."""

import os

from helpers import ROOT
from tfbench import cli
from tfbench.cli import presets as presets_cli
from tfbench.errors import EXIT_USAGE


def _checkout_presets():
    """Every flagfile under flags/ and shell script under scripts/ of the checkout."""
    found = []
    for top, ending in (("flags", ".flags"), ("scripts", ".sh")):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            found += [os.path.relpath(os.path.join(folder, n), ROOT) for n in names
                      if n.endswith(ending)]
    return sorted(found)


def test_the_listing_names_where_they_are_and_each_one_once(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert presets_cli.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Presets and helper scripts in %s" % ROOT
    assert lines[1].startswith("(use the relative path from any directory")
    listed = [line.split()[0] for line in lines[2:]]
    assert all(line.startswith("  ") for line in lines[2:])
    assert sorted(listed) == _checkout_presets() and len(set(listed)) == len(listed)


def test_path_prints_the_full_path_alone(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert presets_cli.main(["--path", "scripts/local_rsh.sh"]) == 0
    assert capsys.readouterr().out == os.path.join(ROOT, "scripts", "local_rsh.sh") + "\n"


def test_an_unknown_path_is_one_error_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["tfbench", "presets", "--path", "flags/none.flags"]) == EXIT_USAGE
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == ("tfbench: error: --path=flags/none.flags: no such preset in %s "
                       "(`tfbench presets` lists them)\n" % ROOT)
