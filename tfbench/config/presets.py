"""The presets (flags/*.flags, flags/sweeps/, flags/evaluate/) and helper scripts (scripts/*.sh),
and how a relative path such as `flags/resnet50_fp16.flags` finds them from any directory.

They live once, in the checkout's flags/ and scripts/. A built package carries a copy as package
data, tfbench/presets/flags and tfbench/presets/scripts (setup.py's build step), so that
`pip install .` brings them; a checkout or an editable install reads the checkout's own. Either
way PRESET_DIRS sit side by side under one root, as in the checkout, so a script that reaches
`$here/flags/...` finds them too.
"""

from __future__ import annotations

import os
import re
from typing import Optional, Sequence

from tfbench.errors import UsageError

PRESET_DIRS = ("flags", "scripts")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../tfbench
INSTALLED = os.path.join(_PACKAGE, "presets")
_FLAGFILE = ("--flagfile", "-flagfile")


def root() -> Optional[str]:
    """The directory holding flags/ and scripts/: the installed copy, else the checkout's."""
    for candidate in (INSTALLED, os.path.dirname(_PACKAGE)):
        if os.path.isdir(os.path.join(candidate, "flags")):
            return candidate
    return None


def where() -> str:
    """Where presets live, for messages."""
    return root() or "nowhere: this tfbench was installed without them"


def find(path: str) -> Optional[str]:
    """`path` when it exists; else, for a relative path (`flags/NAME.flags`,
    `scripts/NAME.sh`), the preset it names; None when neither exists."""
    path = os.path.expanduser(path)
    if os.path.exists(path):
        return path
    base = root()
    if base is None or os.path.isabs(path):
        return None
    candidate = os.path.join(base, path)
    return candidate if os.path.exists(candidate) else None


def listing() -> list[tuple[str, str]]:
    """(path relative to the root, first comment line) of every preset and script."""
    base = root()
    out = []
    if base is None:
        return out
    for top in PRESET_DIRS:
        for folder, dirs, names in os.walk(os.path.join(base, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            for name in sorted(names):
                if name.endswith((".flags", ".sh")):
                    path = os.path.join(folder, name)
                    out.append((os.path.relpath(path, base), _summary(path)))
    return out


def _summary(path: str, width: int = 90) -> str:
    """The first sentence of the file's leading comment, cut to `width` characters."""
    words: list[str] = []
    with open(path) as handle:
        for line in handle:
            if line.startswith("#!"):
                continue
            if not line.startswith("#") or not line.strip("# \n"):
                if words:
                    break
                continue
            words += line.strip("# \n").split()
    text = " ".join(words)
    text = re.split(r"(?<!\.)\.\s", text + " ", maxsplit=1)[0].strip()
    if len(text) > width:
        text = text[:width - 3].rsplit(" ", 1)[0].rstrip(",;:(") + "..."
    return text


def expand_flagfiles(argv: Sequence[str], _stack: tuple[str, ...] = ()) -> list[str]:
    """argv with every --flagfile=PATH (or `--flagfile PATH`) replaced by the flags in it, as
    absl reads a flagfile: one flag per line, blank lines and lines starting with # or // left
    out, nested --flagfile lines expanded in place. PATH is found with find(), so presets work
    from any directory. UsageError for a file that cannot be read, or a loop."""
    out: list[str] = []
    args = list(argv)
    while args:
        token = args.pop(0)
        if token == "--":   # the rest is not for absl (as absl stops there)
            return out + [token] + args
        name, eq, value = token.partition("=")
        if name not in _FLAGFILE:
            out.append(token)
            continue
        if not eq:
            if not args:
                raise UsageError("--flagfile needs a file name")
            value = args.pop(0)
        out += _read_flagfile(value, _stack)
    return out


def _read_flagfile(given: str, stack: tuple[str, ...]) -> list[str]:
    path = find(given)
    if path is None:
        raise UsageError("--flagfile=%s: no such file here or among the presets in %s "
                         "(`tfbench presets` lists them)" % (given, where()))
    real = os.path.realpath(path)
    if real in stack:
        raise UsageError("--flagfile=%s includes itself (through %s)" % (given, " -> ".join(
            os.path.basename(s) for s in stack)))
    try:
        with open(path) as handle:
            lines = [line.strip() for line in handle]
    except OSError as exc:
        raise UsageError("--flagfile=%s: %s" % (given, exc.strerror)) from None
    flags = [line for line in lines if line and not line.startswith(("#", "//"))]
    return expand_flagfiles(flags, stack + (real,))
