"""The options of a validation, one table for the two commands that take them: `tfbench
validate` on one host and `tfbench launch --hosts=... -- validate` over many, which hands
every host's validate the options the table marks as the hosts' and keeps its own. The
commands' parsers (tfbench.cli) take their options from here.

    add_options(parser, over_hosts)   the table's options on an argparse parser
    check(args, over_hosts)           the rules across options (UsageError: one line)
    host_args(args)                   the options as every host's `tfbench validate` gets them
                                      (--baseline aside: launch sends the file itself)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from tfbench import errors

LEVELS = ("quick", "standard", "long")
DEFAULT_SOAK_MINUTES = 30.0

# Where an option applies: both commands (and every host's validate gets it), `tfbench
# validate` alone (launch refuses it after `--`, naming its own), or launch alone.
BOTH, ONE_HOST, OVER_HOSTS = "both", "one host", "over hosts"


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    where: str
    kwargs: dict[str, Any]


OPTIONS = (
    Option("level", BOTH, dict(default="quick", choices=LEVELS,
                               help="the plan: quick (minutes), standard (the figures repeated "
                                    "3 times), long (standard and a soak) (default %(default)s)")),
    Option("baseline", BOTH, dict(default=None, metavar="FILE",
                                  help="an earlier validate.json or tfbench results file to hold "
                                       "each figure against (default: the published ranges)")),
    Option("tolerance_pct", BOTH, dict(type=float, default=5.0, metavar="PCT",
                                       help="a figure passes at (100 - PCT)%% of its baseline, "
                                            "0 to 50 (default %(default)g)")),
    Option("min_efficiency_pct", BOTH, dict(type=float, default=80.0, metavar="PCT",
                                            help="without a baseline, the least scaling "
                                                 "efficiency that passes (default %(default)g)")),
    Option("soak_minutes", BOTH, dict(type=float, default=None, metavar="MIN",
                                      help="--level=long: the soak's length (default %g)"
                                           % DEFAULT_SOAK_MINUTES)),
    Option("out_dir", ONE_HOST, dict(default=None,
                                     help="validate.json, validate.csv, every check's log "
                                          "(default tfbench_validate_<UTC time>)")),
    Option("host_timeout_secs", OVER_HOSTS, dict(
        type=float, default=None, metavar="S",
        help="a host whose validate has not ended after S seconds is stopped and fails "
             "(default 3x the level's time limit)")),
)


def add_options(parser: argparse.ArgumentParser, over_hosts: bool) -> None:
    for option in OPTIONS:
        if option.where == OVER_HOSTS and not over_hosts:
            continue
        parser.add_argument("--" + option.name, **option.kwargs)


def check(args: argparse.Namespace, over_hosts: bool) -> None:
    """The rules no single option's type says; UsageError naming the option."""
    if not 0 <= args.tolerance_pct <= 50:
        raise errors.UsageError("--tolerance_pct=%g: give a percentage from 0 to 50"
                                % args.tolerance_pct)
    if not 0 < args.min_efficiency_pct <= 100:
        raise errors.UsageError("--min_efficiency_pct=%g: give a percentage above 0, at most "
                                "100" % args.min_efficiency_pct)
    if args.soak_minutes is not None:
        if args.level != "long":
            raise errors.UsageError("--soak_minutes is the soak of --level=long; this is "
                                    "--level=%s" % args.level)
        if args.soak_minutes <= 0:
            raise errors.UsageError("--soak_minutes=%g: give minutes above 0"
                                    % args.soak_minutes)
    if args.baseline is not None and not os.path.isfile(args.baseline):
        raise errors.UsageError("--baseline=%s: no such file" % args.baseline)
    if over_hosts:
        if args.out_dir is not None:
            raise errors.UsageError("validate --out_dir=%s: over several hosts the results go "
                                    "to tfbench launch's --out_dir (before --)" % args.out_dir)
        if args.host_timeout_secs is not None and args.host_timeout_secs <= 0:
            raise errors.UsageError("--host_timeout_secs=%g: give seconds above 0"
                                    % args.host_timeout_secs)


def host_args(args: argparse.Namespace) -> list[str]:
    """The options every host's `tfbench validate` gets: each of both commands' that has a
    value, given or the default (the hosts run what the launcher decided), --baseline aside."""
    out = []
    for option in OPTIONS:
        value = getattr(args, option.name)
        if option.where == BOTH and option.name != "baseline" and value is not None:
            out.append("--%s=%s" % (option.name, "%g" % value if isinstance(value, float)
                                    else value))
    return out
