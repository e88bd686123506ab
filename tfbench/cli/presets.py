"""`tfbench presets [--path NAME]`: the flagfile presets and helper scripts, and where they are.

    tfbench presets                                  every preset and script, one line each
    tfbench presets --path scripts/scaling_test.sh   the full path of one (for the shell)
"""

from __future__ import annotations

import argparse
import os
from typing import Sequence

from tfbench.cli.guard import Parser
from tfbench.config import presets
from tfbench.errors import UsageError


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="tfbench presets", description=(
        "List the flagfile presets (--flagfile=flags/NAME.flags) and helper scripts "
        "(scripts/NAME.sh) installed with tfbench. tfbench finds a relative flags/... or "
        "scripts/... path among them when it does not exist in the current directory, so "
        "--flagfile=flags/NAME.flags and --rsh=scripts/local_rsh.sh work from any directory; "
        "a shell runs a script from its full path: \"$(tfbench presets --path "
        "scripts/NAME.sh)\"."))
    p.add_argument("--path", metavar="NAME", default=None,
                   help="print the full path of one preset or script (flags/NAME.flags, "
                        "scripts/NAME.sh) and nothing else")
    return p


def main(argv: Sequence[str]) -> int:
    """Entry point for `tfbench presets ...` (argv without the subcommand)."""
    args = _parser().parse_args(list(argv))
    if args.path is not None:
        found = presets.find(args.path)
        if found is None:
            raise UsageError("--path=%s: no such preset in %s (`tfbench presets` lists them)"
                             % (args.path, presets.where()))
        print(os.path.abspath(found))
        return 0
    entries = presets.listing()
    if not entries:
        raise UsageError("no presets found: %s" % presets.where())
    print("Presets and helper scripts in %s" % presets.root())
    print("(use the relative path from any directory: tfbench --flagfile=flags/NAME.flags, "
          "tfbench launch --rsh=scripts/local_rsh.sh; a script from the shell: "
          "\"$(tfbench presets --path scripts/NAME.sh)\")")
    width = max(len(path) for path, _ in entries)
    for path, summary in entries:
        print("  %-*s  %s" % (width, path, summary))
    return 0
