"""Writes config/settings_groups.py, the typed group of each concern, from the flag table.

The groups are generated source, not built at import time, so that a reader (and an editor)
sees every field, its type and its meaning. tests/config/test_settings.py fails when the file
is not what the table gives; `python -m tfbench.config.settings_source` writes it again.
"""

from __future__ import annotations

import os
import textwrap

from tfbench.config import flagdefs

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "settings_groups.py")

_TYPES = {"bool": "bool", "int": "int", "float": "float", "string": "str", "enum": "str",
          "list": "tuple[str, ...]"}


def class_name(concern: str) -> str:
    return concern.capitalize()


def _type(spec: flagdefs.FlagSpec) -> str:
    kind = _TYPES[spec.kind]
    if spec.kind == "float" and isinstance(spec.default, int):
        kind = "float"
    return "Optional[%s]" % kind if spec.default is None else kind


def _comment(spec: flagdefs.FlagSpec) -> list[str]:
    return ["    # " + line for line in textwrap.wrap(spec.help, 91)]


def _docstring(meaning: str) -> list[str]:
    lines = textwrap.wrap('"""%s."""' % (meaning[0].upper() + meaning[1:]), 95)
    if len(lines) > 1:
        lines = lines[:-1] + [lines[-1][:-3], '"""']
    return ["    " + line for line in lines]


def render() -> str:
    out = ['"""The settings of a run, one frozen group per concern (flagdefs.CONCERNS).',
           "",
           "Generated from the flag table by tfbench.config.settings_source: do not edit; run",
           "`python -m tfbench.config.settings_source` after changing a flag. Each field is the",
           "flag of the same name, as parsed and validated (config.params). Longer than the",
           "layout guide's 420 lines: generated, every flag in it.",
           '"""',
           "",
           "from __future__ import annotations",
           "",
           "import dataclasses",
           "from typing import Optional"]
    for concern, (meaning, names) in flagdefs.CONCERNS.items():
        out += ["", "", "@dataclasses.dataclass(frozen=True)",
                "class %s:" % class_name(concern),
                ] + _docstring(meaning)
        for name in names:
            spec = flagdefs.BY_NAME[name]
            out += [""] + _comment(spec) + ["    %s: %s" % (name, _type(spec))]
    out += ["", "", "GROUPS = {"] + ['    "%s": %s,' % (c, class_name(c))
                                     for c in flagdefs.CONCERNS] + ["}", ""]
    return "\n".join(out)


if __name__ == "__main__":
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(render())
    print("wrote %s" % PATH)
