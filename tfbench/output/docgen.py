"""Generates the flag and CSV references in docs/ from the tables they document.

    python -m tfbench.output.docgen            rewrite docs/flags.md, docs/csv.md and the
                                               figure table of docs/measurements.md
    python -m tfbench.output.docgen --check    only say which file has drifted (exit 1)

Each file holds a marked section (<!-- flags:start --> ... <!-- flags:end -->, `csv` and `figures`)
that is rewritten from flagdefs.ALL_FLAGS or the figures' declaration (tfbench/figures/table.py:
the CSV columns, how a multi-worker run's rows combine, and what the console calls each
figure); the text around it is left alone. Paths may be given instead of the defaults (docs/ of
the checkout this module is in).
tests/output/test_docgen.py fails when the docs have drifted.
"""

from __future__ import annotations

import os
import re
import sys

from tfbench import figures
from tfbench.config import flagdefs

ROLE = {flagdefs.LEGACY: "", flagdefs.TF1_ONLY: "TF1-only: accepted, warns, no effect",
        flagdefs.TFBENCH: "tfbench"}

# The checkout's root (tfbench/output/docgen.py -> three levels up).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# section name -> the file that holds it, relative to ROOT.
TARGETS = {"flags": os.path.join("docs", "flags.md"), "csv": os.path.join("docs", "csv.md"),
           "figures": os.path.join("docs", "measurements.md")}
COMMAND = "python -m tfbench.output.docgen"


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
        empty = " Empty: %s." % spec.empty if spec.empty else ""
        meaning = (spec.help + empty).replace("|", "\\|") + (" *[%s]*" % note if note else "")
        rows.append("| `--%s` | %s | `%s` | %s |" % (spec.name, kind, _default(spec), meaning))
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# How the rows of one multi-worker run make the run's figure (Figure.workers), as a reader of
# the CSV is told it.
WORKERS = {"same": "the same in every row", "sum": "sum of the rows", "max": "largest row",
           "min": "smallest row", "mean": "mean of the rows",
           "per_worker": "harmonic mean of the rows", "none": "each worker's own"}


def csv_markdown() -> str:
    """The CSV's columns in order, from the figures' declaration (csv_out.COLUMNS)."""
    rows = ["| column | unit | meaning | several workers |", "|---|---|---|---|"]
    rows += ["| `%s` | %s | %s | %s |" % (f.name, f.unit, _cell(f.definition), WORKERS[f.workers])
             for f in figures.CSV_FIGURES]
    return "\n".join(rows)


def figures_markdown() -> str:
    """Each figure the console prints: its label there, unit, and where else it is kept."""
    rows = ["| console label | figure (JSON key) | unit | CSV |", "|---|---|---|---|"]
    rows += ["| %s | `%s` | %s | %s |" % (_cell(f.label), f.name, f.unit,
                                          "yes" if f.csv else "no")
             for f in figures.FIGURES if f.label]
    return "\n".join(rows)


SECTIONS = {"flags": flags_markdown, "csv": csv_markdown, "figures": figures_markdown}


def _pattern(name: str) -> "re.Pattern[str]":
    return re.compile(r"(<!-- %s:start -->\n).*?(<!-- %s:end -->)" % (name, name), re.S)


def sections_in(text: str) -> list[str]:
    """The names of the marked sections `text` holds."""
    return [name for name in SECTIONS if _pattern(name).search(text)]


def render(text: str) -> str:
    """`text` with every marked section it holds regenerated; the rest unchanged."""
    for name, make in SECTIONS.items():
        text = _pattern(name).sub(lambda m: m.group(1) + make() + "\n" + m.group(2), text)
    return text


def default_paths() -> list[str]:
    return [os.path.join(ROOT, TARGETS[name]) for name in SECTIONS]


def main(argv: list[str]) -> int:
    args = argv[1:]
    check = "--check" in args
    paths = [a for a in args if a != "--check"] or default_paths()
    stale = []
    for path in paths:
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError as exc:
            print("docgen: error: cannot read %s (%s); run it from a checkout" % (path, exc),
                  file=sys.stderr)
            return 2
        if not sections_in(text):
            print("docgen: error: %s holds no marked section (%s)"
                  % (path, ", ".join("<!-- %s:start -->" % n for n in SECTIONS)), file=sys.stderr)
            return 2
        new = render(text)
        if new == text:
            continue
        stale.append(path)
        if not check:
            with open(path, "w") as handle:
                handle.write(new)
    for path in stale:
        print("%s %s" % ("drifted:" if check else "rewrote", path))
    if check and stale:
        print("run `%s` to regenerate" % COMMAND)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
