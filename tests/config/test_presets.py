"""tfbench.config.presets: flagfiles read as absl reads them, and relative preset paths found
from any directory."""

import os

import pytest

from helpers import ROOT
from tfbench.config import presets
from tfbench.config.argv import parse_params
from tfbench.errors import UsageError


def test_flagfiles_expand_in_place_with_comments_and_nesting(tmp_path):
    inner = tmp_path / "inner.flags"
    inner.write_text("--device=cpu\n")
    outer = tmp_path / "outer.flags"
    outer.write_text("# a preset\n--sweep=num_gpus=1,2\n\n// more\n  --flagfile=%s  \n" % inner)
    assert presets.expand_flagfiles(["--model=x", "--flagfile=%s" % outer, "--xla"]) == [
        "--model=x", "--sweep=num_gpus=1,2", "--device=cpu", "--xla"]
    assert presets.expand_flagfiles(["--flagfile", str(inner), "--", "--flagfile=x"]) == [
        "--device=cpu", "--", "--flagfile=x"]


def test_a_missing_or_looping_flagfile_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as missing:
        presets.expand_flagfiles(["--flagfile=flags/none.flags"])
    assert str(missing.value) == (
        "--flagfile=flags/none.flags: no such file here or among the presets in %s "
        "(`tfbench presets` lists them)" % ROOT)
    loop = tmp_path / "loop.flags"
    loop.write_text("--flagfile=%s\n" % loop)
    with pytest.raises(UsageError, match="includes itself"):
        presets.expand_flagfiles(["--flagfile=%s" % loop])


def test_relative_preset_paths_work_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert presets.root() == ROOT      # a checkout: its own flags/ and scripts/
    assert presets.find("flags/vgg16.flags") == os.path.join(ROOT, "flags", "vgg16.flags")
    assert presets.find("scripts/local_rsh.sh") == os.path.join(ROOT, "scripts", "local_rsh.sh")
    assert presets.find("flags/none.flags") is None
    (tmp_path / "flags").mkdir()
    (tmp_path / "flags" / "vgg16.flags").write_text("--model=resnet50\n")
    assert presets.find("flags/vgg16.flags") == "flags/vgg16.flags"   # the user's own first
    p = parse_params(["tfbench", "--flagfile=flags/resnet50_fp16.flags", "--batch_size=2"])
    assert (p.model, p.batch_size, p.use_fp16) == ("resnet50", 2, True)


def test_listing_names_every_preset_and_script_with_its_first_sentence():
    listed = dict(presets.listing())
    assert listed["flags/vgg16.flags"] == "VGG-16 training on synthetic data, fp32"
    assert "flags/sweeps/batch_size_study.flags" in listed
    assert "flags/evaluate/gpu_evaluation.flags" in listed
    assert listed["scripts/local_rsh.sh"].startswith("A stand-in for ssh")
    assert not any(path.endswith(".py") for path in listed)
