"""The README and docs/: the README's quick start and command lines stay valid, and every link
between the documents resolves."""

import glob
import os
import re
import shlex

import pytest

from helpers import ROOT
from tfbench.output import docgen


def _read(relpath):
    with open(os.path.join(ROOT, relpath)) as handle:
        return handle.read()


def _quick_start():
    return _read("README.md").split("## Quick start", 1)[1].split("\n## ", 1)[0]


def _command_lines(markdown):
    """Shell lines of the ```sh blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, re.S):
        block = re.sub(r"\\\n\s*", " ", block)
        lines += [l.split(" # ")[0].strip() for l in block.splitlines()
                  if l.strip() and not l.lstrip().startswith("#")]
    return lines


def _benchmark_commands(markdown):
    """The lines that run a benchmark (no subcommand), as argv."""
    out = []
    for line in _command_lines(markdown):
        argv = shlex.split(line)
        if argv[0] in ("tfbench", "tf_cnn_benchmarks") and argv[1:] and \
                argv[1].startswith("--") and "..." not in argv:
            out.append(argv)
    return out


def _slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown):
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", markdown, re.M)}


LINKED_DOCS = ["README.md", "benchmarks/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def test_references_live_in_docs_not_in_the_readme():
    readme = _read("README.md")
    for name in docgen.SECTIONS:
        assert "<!-- %s:start -->" % name not in readme


def test_quick_start_has_exactly_two_commands():
    blocks = _quick_start().split("```sh\n")[1:]
    commands = [b.split("```")[0].strip() for b in blocks]
    assert len(commands) == 2
    assert commands[0].startswith("pip install") and "tfbench" in commands[0]
    assert commands[1].startswith("pip install") and "pytest" in commands[1]
    with open(os.path.join(ROOT, ".ci", "run")) as handle:
        assert handle.read().rstrip().splitlines()[-1] == commands[1]


def test_the_test_command_installs_the_full_tensorflow_wheel():
    """It registers GPU kernels on CPU-only machines, so the GPU-kernel test runs in CI."""
    test_command = _quick_start().split("```sh\n")[2].split("```")[0].strip()
    assert test_command == 'pip install -e ".[tf,test]" && python -m pytest -q tests'
    setup = _read("setup.py")
    assert '"tf": ["tensorflow" + TF_RANGE]' in setup
    assert '"cpu": ["tensorflow-cpu" + TF_RANGE]' in setup   # kept for users


@pytest.mark.parametrize("doc", ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))))
def test_documented_command_lines_parse(doc, monkeypatch, tmp_path):
    """Every benchmark command line shown in the README and docs/ is accepted by the parser,
    from any directory (--flagfile=flags/... finds the presets)."""
    from tfbench.config.argv import parse_settings
    monkeypatch.chdir(tmp_path)
    for argv in _benchmark_commands(_read(doc)):
        assert parse_settings(argv).workload.model, " ".join(argv)


def test_the_readme_shows_common_command_lines():
    readme = _read("README.md")
    section = readme.split("## Common command lines", 1)[1].split("\n## ", 1)[0]
    assert len(_command_lines(section)) == 12
    assert len(_benchmark_commands(section)) >= 5


def test_the_readme_lists_every_subcommand():
    """The paragraph of the README's common command lines that starts "Subcommands:" names
    each `tfbench NAME` of tfbench.cli.SUBCOMMANDS, and no other."""
    from tfbench.cli import SUBCOMMANDS
    section = _read("README.md").split("## Common command lines", 1)[1].split("\n## ", 1)[0]
    paragraph = section[section.index("Subcommands:"):].split("\n\n", 1)[0]
    named = re.findall(r"`tfbench ([a-z_]+)[` ]", paragraph)
    assert sorted(set(named)) == sorted(SUBCOMMANDS), \
        "README.md's Subcommands paragraph names %s" % sorted(set(named) ^ set(SUBCOMMANDS))


@pytest.mark.parametrize("doc", LINKED_DOCS)
def test_relative_links_resolve(doc):
    text = re.sub(r"```.*?```", "", _read(doc), flags=re.S)
    here = os.path.dirname(os.path.join(ROOT, doc))
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, doc)
        assert os.path.exists(full), "%s links to %s, which does not exist" % (doc, target)
        if anchor and full.endswith(".md"):
            with open(full) as handle:
                assert anchor in _anchors(handle.read()), "%s: no heading for %s" % (doc, target)


def test_the_readme_links_every_doc():
    readme = _read("README.md")
    for path in glob.glob(os.path.join(ROOT, "docs", "*.md")):
        assert "](docs/%s)" % os.path.basename(path) in readme, os.path.basename(path)
