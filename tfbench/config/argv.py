"""argv -> Params -> Settings: the benchmark flags, defined from the flag table on a fresh
absl FlagValues.

The one parser of benchmark command lines: the CLI runs it, and every subcommand that starts
benchmarks (sweep, evaluate, launch, allreduce) reads what they will run with it
(settings_of_flags). It reads no global FLAGS and imports no TensorFlow.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from absl import flags

from tfbench.config import flagdefs, presets
from tfbench.config import settings
from tfbench.config.params import Params, make_params
from tfbench.config.settings import Settings
from tfbench.errors import UsageError


class _EnumParser(flags.EnumParser):
    """absl's enum parser, refusing a value in the words of flagdefs.choices (absl's own
    '<|fp32|fp16|bf16>' shows an empty value as an empty choice)."""

    def __init__(self, spec: flagdefs.FlagSpec) -> None:
        super().__init__(list(spec.enum_values))
        self.spec = spec

    def parse(self, argument: str) -> str:
        if argument not in self.enum_values:
            raise ValueError("value should be one of %s" % flagdefs.choices(self.spec))
        return argument


def define_flags(values: flags.FlagValues) -> None:
    for spec in flagdefs.ALL_FLAGS:
        helptext = spec.help + ("  [TF1-only: accepted, no effect]" if spec.role == flagdefs.TF1_ONLY else "")
        if spec.kind == "bool":
            flags.DEFINE_boolean(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "int":
            flags.DEFINE_integer(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "float":
            flags.DEFINE_float(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "string":
            flags.DEFINE_string(spec.name, spec.default, helptext, flag_values=values)
        elif spec.kind == "enum":
            flags.DEFINE(_EnumParser(spec), spec.name, spec.default, helptext,
                         flag_values=values)
        elif spec.kind == "list":
            flags.DEFINE_list(spec.name, spec.default, helptext, flag_values=values)
        else:
            raise ValueError("unknown flag kind %s" % spec.kind)


def parse_params(argv: Sequence[str]) -> Params:
    """argv (program name first) -> validated Params. UsageError on bad input.

    --flagfile is read here (tfbench.config.presets), so that a preset's relative path
    (flags/NAME.flags) works from any directory."""
    values = flags.FlagValues()
    define_flags(values)
    argv = list(argv[:1]) + presets.expand_flagfiles(argv[1:])
    try:
        rest = values(argv, known_only=False)
    except flags.Error as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    if len(rest) > 1:
        raise UsageError("Received unknown positional arguments: %s (booleans are --name or "
                         "--noname; values are --name=value)" % " ".join(rest[1:]))
    given = {name for name in values if values[name].present}
    return make_params({spec.name: values[spec.name].value for spec in flagdefs.ALL_FLAGS},
                       explicit=given)


def parse_settings(argv: Sequence[str]) -> Settings:
    """argv (program name first) -> the run's Settings; UsageError on bad input."""
    return settings.of(parse_params(argv))


def settings_of_flags(flags: Sequence[str]) -> Settings:
    """The Settings a benchmark started with `flags` (no program name) runs with; UsageError
    when it would refuse them. A subcommand reads what a child, task or point runs from here,
    never from the raw flags."""
    return parse_settings(["tfbench"] + list(flags))


def strip_flags(flags: Sequence[str], names: Iterable[str]) -> list[str]:
    """`flags` without any occurrence of the named flags (=value, space-separated, --noX)."""
    names = set(names)
    out: list[str] = []
    skip = False
    for token in flags:
        if skip:
            skip = False
            continue
        name = token[2:].split("=", 1)[0] if token.startswith("--") else None
        if name in names:
            spec = flagdefs.BY_NAME.get(name)
            skip = "=" not in token and not (spec is not None and spec.kind == "bool")
            continue
        if name and name.startswith("no") and name[2:] in names:
            continue
        out.append(token)
    return out
