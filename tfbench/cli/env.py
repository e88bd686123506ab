"""`tfbench env [--format=text|json]`: print the environment manifest.

text (default): the short summary, then every field as `path: value`; json: the manifest.
"""

from __future__ import annotations

import json
import sys
from typing import Optional, Sequence, TextIO

from tfbench.measure import environment
from tfbench.output import environment as environment_text
from tfbench.errors import UsageError

USAGE = "usage: tfbench env [--format=text|json]"
FORMATS = ("text", "json")


def parse_args(argv: Sequence[str]) -> Optional[str]:
    """The output format, or None when help was asked for."""
    fmt = "text"
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            return None
        if arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg == "--format":
            if not args:
                raise UsageError("--format needs a value: text or json")
            fmt = args.pop(0)
        else:
            raise UsageError("env: unknown argument %r (%s)" % (arg, USAGE))
        if fmt not in FORMATS:
            raise UsageError("--format=%s is not one of text, json" % fmt)
    return fmt


def main(argv: Sequence[str], out: Optional[TextIO] = None) -> int:
    """argv: the arguments after `env`. Returns the exit code; UsageError on bad arguments."""
    out = out or sys.stdout
    fmt = parse_args(argv)
    if fmt is None:
        out.write(USAGE + "\n")
        return 0
    env = environment.capture(["tfbench", "env"] + list(argv))
    if fmt == "json":
        json.dump(env, out, indent=1, sort_keys=True, default=str)
        out.write("\n")
    else:
        lines = environment_text.summary_lines(env)
        warning = environment.vm_warning(env)
        if warning:
            lines.append("Note: " + warning)
        out.write("\n".join(lines) + "\n\n" + environment_text.text_report(env) + "\n")
    out.flush()
    return 0
