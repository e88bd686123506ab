"""tfbench.config.argv: benchmark flags read as the CLI reads them, for a run or for the children,
tasks and points a subcommand starts."""

import pytest

from tfbench import errors
from tfbench.config.argv import params_of_flags, strip_flags


def test_params_of_flags_parse_flags_as_the_cli_does():
    p = params_of_flags(["--model=a", "--batch_size", "8", "-xla_compile", "--use_fp16",
                         "--noforward_only"])
    assert (p.model, p.batch_size, p.xla_compile, p.forward_only) == ("a", 8, True, False)
    assert p.is_explicit("batch_size") and not p.is_explicit("num_gpus")
    with pytest.raises(errors.UsageError, match="--use_fp16 asks for fp16"):
        params_of_flags(["--use_fp16", "--precision=fp32"])


def test_params_of_flags_read_a_preset_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = params_of_flags(["--flagfile=flags/scaling_study.flags", "--batch_size=8"])
    assert (p.model, p.batch_size, p.variable_update) == ("resnet50", 8, "replicated")


def test_strip_flags_drops_every_spelling_of_the_named_flags():
    flags = ["--model=m", "--csv_file=a.csv", "--csv_file", "b.csv", "--xla", "--noxla",
             "--batch_size", "8", "--xla=false"]
    assert strip_flags(flags, ["csv_file", "xla"]) == ["--model=m", "--batch_size", "8"]
    assert strip_flags(flags, []) == flags
