"""An installed TensorFlow and what it depends on: keep them as they are; say when numpy broke it.

`python -m tfbench.pins` prints a pip constraints file: `name==version` for every installed
TensorFlow distribution and every installed package it depends on, directly or not. Installing
tfbench with it (`pip install . -c FILE`) cannot change any of them. Without it pip resolves
tfbench's requirements alone: the newest pandas needs numpy >= 2, so pip upgrades numpy under a
TensorFlow built for numpy 1.x (2.17, the last NVIDIA container's), which then fails to import.
Requirement markers are ignored on purpose: pinning an installed package to its installed version
never changes anything, whatever the marker says.

numpy_mismatch() names that broken state before TensorFlow is imported (imported with numpy 2,
a numpy 1.x TensorFlow prints pages of tracebacks and dies with a SystemError).

Standard library only: this runs from a checkout before tfbench's requirements are installed.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from typing import Iterable, Optional, Sequence

# The distributions a TensorFlow may be installed as (the environment manifest reads them too).
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos",
                    "tensorflow-intel", "intel-tensorflow", "tensorflow-rocm")

_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_EXTRA = re.compile(r"\bextra\s*==")
_SPEC = re.compile(r"(===|==|!=|~=|<=|>=|<|>)\s*([0-9][^\s,;)]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _find(name: str, path: Optional[Sequence[str]]) -> Optional[metadata.Distribution]:
    """The installed distribution `name` (first on the path), or None."""
    found = metadata.distributions(name=name, path=list(path if path is not None else sys.path))
    return next(iter(found), None)


def tensorflow_distributions(path: Optional[Sequence[str]] = None) -> list[metadata.Distribution]:
    """Every installed TensorFlow distribution (tensorflow, tensorflow-cpu, ...)."""
    return [d for d in (_find(n, path) for n in TF_DISTRIBUTIONS) if d is not None]


def _requirement_names(dist: metadata.Distribution, extras: bool) -> Iterable[str]:
    for requirement in dist.requires or ():
        match = _NAME.match(requirement)
        if match and (extras or not _EXTRA.search(requirement.partition(";")[2])):
            yield match.group(1)


def constraints(path: Optional[Sequence[str]] = None) -> list[str]:
    """`name==version` for each installed TensorFlow distribution and each installed package it
    depends on, directly or through others (numpy always), sorted by name. Other platforms'
    requirements count when installed; extras' only TensorFlow's own (tensorflow[and-cuda]'s
    CUDA libraries): a package's test or docs extras would pin what TensorFlow never needed."""
    tensorflow = tensorflow_distributions(path)
    pinned: dict[str, metadata.Distribution] = {}
    todo = list(tensorflow)
    numpy = _find("numpy", path)
    if tensorflow and numpy is not None:
        todo.append(numpy)   # TensorFlow imports it whether or not a build's metadata declares it
    while todo:
        dist = todo.pop()
        key = _canonical(dist.metadata["Name"])
        if key in pinned:
            continue
        pinned[key] = dist
        for name in _requirement_names(dist, extras=dist in tensorflow):
            if _canonical(name) not in pinned:
                found = _find(name, path)
                if found is not None:
                    todo.append(found)
    return ["%s==%s" % (pinned[k].metadata["Name"], pinned[k].version) for k in sorted(pinned)]


def _release(version: str) -> tuple[int, ...]:
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(x) for x in match.group().split(".")) if match else ()


def _excludes_numpy_2(requirement: str) -> bool:
    """Whether a numpy requirement ('numpy<2.0.0,>=1.23.5; python_version <= "3.11"') rules out
    every numpy 2.x."""
    for op, version in _SPEC.findall(requirement.split(";", 1)[0]):
        release = _release(version)
        if not release:
            continue
        if op == "<" and release + (0,) * (3 - len(release)) <= (2, 0, 0):
            return True
        if op in ("<=", "==", "===", "~=") and release[0] < 2:
            return True
    return False


def _fields(dist: metadata.Distribution, name: str) -> list[str]:
    """The values of one METADATA header, read without the email parser: numpy_mismatch runs
    before every benchmark, and parsing TensorFlow's and numpy's whole METADATA costs
    milliseconds."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    headers = text.split("\n\n", 1)[0]
    return re.findall(r"^%s:[ \t]*(.*?)\s*$" % re.escape(name), headers, re.MULTILINE)


def numpy_mismatch(path: Optional[Sequence[str]] = None) -> Optional[str]:
    """One line saying how to repair an installed TensorFlow built for numpy 1.x (every numpy
    requirement it declares excludes numpy 2) beside an installed numpy 2.x, else None."""
    numpy = _find("numpy", path)
    numpy_version = (_fields(numpy, "Version") or [""])[0] if numpy is not None else ""
    if not _release(numpy_version) or _release(numpy_version)[0] < 2:
        return None
    for dist in tensorflow_distributions(path):
        numpy_requirements = [r for r in _fields(dist, "Requires-Dist")
                              if _NAME.match(r) and _canonical(_NAME.match(r).group(1)) == "numpy"]
        if numpy_requirements and all(_excludes_numpy_2(r) for r in numpy_requirements):
            return ("TensorFlow %s (%s) is built for numpy 1.x and cannot import with numpy %s: "
                    "pip install \"numpy<2\" pandas matplotlib repairs it (pip then also picks "
                    "pandas and matplotlib releases that work with numpy 1.x); the README "
                    "(Installing) says how to install beside TensorFlow without this"
                    % (dist.version, dist.metadata["Name"], numpy_version))
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    pins = constraints()
    if not pins:
        sys.stderr.write("tfbench.pins: no installed TensorFlow found (looked for %s); install "
                         "with an extra instead, e.g. pip install \".[cpu]\"\n"
                         % ", ".join(TF_DISTRIBUTIONS))
        return 1
    sys.stdout.write("# installed TensorFlow and its dependencies, kept as they are\n")
    sys.stdout.write("\n".join(pins) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
