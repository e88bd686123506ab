"""The README's flag and CSV reference must match the tables they document."""

import os

from helpers import ROOT
from tfbench.output import csv_out, docgen
from tfbench.config import flagdefs


def test_readme_reference_sections_are_current():
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    assert docgen.render(text) == text, "run `python -m tfbench.output.docgen README.md`"


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
        assert handle.read().rstrip().splitlines()[-1] == commands[1]


def test_the_test_command_installs_the_full_tensorflow_wheel():
    """It registers GPU kernels on CPU-only machines, so the GPU-kernel test runs in CI."""
    with open(os.path.join(ROOT, "README.md")) as handle:
        quick = handle.read().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    test_command = quick.split("```sh\n")[2].split("```")[0].strip()
    assert test_command == 'pip install -e ".[tf,test]" && python -m pytest -q tests'
    with open(os.path.join(ROOT, "setup.py")) as handle:
        setup = handle.read()
    assert '"tf": ["tensorflow" + TF_RANGE]' in setup
    assert '"cpu": ["tensorflow-cpu" + TF_RANGE]' in setup   # kept for users


def test_flag_presets_parse():
    from tfbench.config.argv import parse_params
    flag_dir = os.path.join(ROOT, "flags")
    presets = sorted(f for f in os.listdir(flag_dir) if f.endswith(".flags"))
    assert len(presets) >= 5
    for name in presets:
        p = parse_params(["tfbench", "--flagfile=" + os.path.join(flag_dir, name)])
        assert p.model
