"""The generated references in docs/ match the tables they document (tfbench.output.docgen); the
README's commands and the links between the documents: repo/test_docs.py."""

import os

from helpers import ROOT
from tfbench.output import csv_out, docgen
from tfbench.config import flagdefs

REGENERATE = "run `python -m tfbench.output.docgen`"


def _read(relpath):
    with open(os.path.join(ROOT, relpath)) as handle:
        return handle.read()


def test_reference_docs_are_current():
    assert sorted(docgen.TARGETS) == sorted(docgen.SECTIONS)
    for name, relpath in docgen.TARGETS.items():
        text = _read(relpath)
        assert docgen.sections_in(text) == [name], relpath
        assert docgen.render(text) == text, "%s has drifted: %s" % (relpath, REGENERATE)


def test_docgen_check_mode_reports_drift(tmp_path, capsys):
    path = tmp_path / "flags.md"
    path.write_text("intro\n<!-- flags:start -->\nstale\n<!-- flags:end -->\nafter\n")
    assert docgen.main(["docgen", "--check", str(path)]) == 1
    assert "stale" in path.read_text()
    assert docgen.main(["docgen", str(path)]) == 0
    text = path.read_text()
    assert text.startswith("intro\n<!-- flags:start -->\n| flag |") and text.endswith("after\n")
    assert "`--model`" in text
    assert docgen.main(["docgen", "--check", str(path)]) == 0
    (tmp_path / "plain.md").write_text("no markers here\n")
    assert docgen.main(["docgen", str(tmp_path / "plain.md")]) == 2
    assert "no marked section" in capsys.readouterr().err


def test_every_flag_and_column_documented():
    flags_doc = _read(docgen.TARGETS["flags"])
    for spec in flagdefs.ALL_FLAGS:
        assert "`--%s`" % spec.name in flags_doc
    csv_doc = _read(docgen.TARGETS["csv"])
    for name in csv_out.COLUMN_NAMES:
        assert "`%s`" % name in csv_doc


def test_flag_presets_parse():
    from tfbench.config.argv import parse_settings
    flag_dir = os.path.join(ROOT, "flags")
    presets = sorted(f for f in os.listdir(flag_dir) if f.endswith(".flags"))
    assert len(presets) >= 5
    for name in presets:
        p = parse_settings(["tfbench", "--flagfile=" + os.path.join(flag_dir, name)])
        assert p.workload.model
