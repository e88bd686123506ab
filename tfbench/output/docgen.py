"""Generates the README's flag and CSV reference from the tables they document.

`python -m tfbench.output.docgen` rewrites the marked sections of README.md; a test fails when the
README has drifted from flagdefs or csv_out.
"""

from __future__ import annotations

import re
import sys

from tfbench.output import csv_out
from tfbench.config import flagdefs

ROLE = {"K": "", "G": "TF1-only: accepted, warns, no effect", "T": "tfbench"}


def _default(spec: flagdefs.FlagSpec) -> str:
    if spec.default is None:
        return "None"
    if isinstance(spec.default, list):
        return "[]" if not spec.default else ",".join(spec.default)
    if spec.default == "":
        return "''"
    return str(spec.default)


def flags_markdown() -> str:
    rows = ["| flag | type | default | meaning |", "|---|---|---|---|"]
    for spec in flagdefs.ALL_FLAGS:
        kind = spec.kind + (" (%s)" % "/".join(v or "''" for v in spec.enum_values)
                            if spec.enum_values else "")
        note = ROLE[spec.role]
        meaning = spec.help.replace("|", "\\|") + (" *[%s]*" % note if note else "")
        rows.append("| `--%s` | %s | `%s` | %s |" % (spec.name, kind, _default(spec), meaning))
    return "\n".join(rows)


def csv_markdown() -> str:
    rows = ["| column | meaning |", "|---|---|"]
    rows += ["| `%s` | %s |" % (name, meaning.replace("|", "\\|"))
             for name, meaning in csv_out.COLUMNS]
    return "\n".join(rows)


SECTIONS = {"flags": flags_markdown, "csv": csv_markdown}


def render(readme: str) -> str:
    for name, make in SECTIONS.items():
        pattern = re.compile(r"(<!-- %s:start -->\n).*?(<!-- %s:end -->)" % (name, name), re.S)
        readme = pattern.sub(lambda m: m.group(1) + make() + "\n" + m.group(2), readme)
    return readme


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else "README.md"
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(render(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
