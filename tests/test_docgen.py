"""The README's flag and CSV reference must match the tables they document."""

import os

from helpers import ROOT
from tfbench import csv_out, docgen, flagdefs


def test_readme_reference_sections_are_current():
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    assert docgen.render(text) == text, "run `python -m tfbench.docgen README.md`"


def test_every_flag_and_column_documented():
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    for spec in flagdefs.ALL_FLAGS:
        assert "`--%s`" % spec.name in text
    for name in csv_out.COLUMN_NAMES:
        assert "`%s`" % name in text


def test_quick_start_has_exactly_two_commands():
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = quick.split("```sh\n")[1:]
    commands = [b.split("```")[0].strip() for b in blocks]
    assert len(commands) == 2
    assert commands[0].startswith("pip install") and "tfbench" in commands[0]
    assert commands[1].startswith("pip install") and "pytest" in commands[1]
    with open(os.path.join(ROOT, ".ci", "run")) as handle:
        assert commands[1] in handle.read()


def test_flag_presets_parse():
    from tfbench.cli import parse_params
    flag_dir = os.path.join(ROOT, "flags")
    presets = sorted(f for f in os.listdir(flag_dir) if f.endswith(".flags"))
    assert len(presets) >= 5
    for name in presets:
        p = parse_params(["tfbench", "--flagfile=" + os.path.join(flag_dir, name)])
        assert p.model
