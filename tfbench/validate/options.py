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
from tfbench.validate import figures
from tfbench.validate.plan import DEFAULT_SOAK_MINUTES, LEVELS, TIMEOUT_MARGIN_S, check_options

# Where an option applies: both commands (and every host's validate gets it), `tfbench
# validate` alone (launch refuses it after `--`, naming its own), or launch alone.
BOTH, ONE_HOST, OVER_HOSTS = "both", "one host", "over hosts"


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    where: str
    kwargs: dict[str, Any]


OPTIONS = (
    Option("level", BOTH, dict(default="quick",
                               help="the plan: %s; quick (minutes), standard (3 runs, the scaling "
                                    "efficiency), long (standard and a soak) (default "
                                    "%%(default)s)" % ", ".join(LEVELS))),
    Option("baseline", BOTH, dict(default=None, metavar="FILE",
                                  help="an earlier result to hold each figure against: a "
                                       "validate.json, a tfbench results CSV or a JSON manifest "
                                       "of the same model, precision, batch and GPU model; or "
                                       "`history`: this host's accepted level of the "
                                       "configuration in the results history (--history), else "
                                       "the fleet's median on its GPU model (default: the "
                                       "published range)")),
    Option("tolerance_pct", BOTH, dict(type=float, default=5.0, metavar="PCT",
                                       help="how far a figure may be from its expectation, 0 to "
                                            "50 (default %(default)g): a device slower than the "
                                            "median of its peers by more, a figure below the "
                                            "baseline by more")),
    Option("min_efficiency_pct", BOTH, dict(
        type=float, default=None, metavar="PCT",
        help="without a baseline, the least scaling efficiency that passes (default %g on GPUs "
             "and for hosts together; on one host's logical CPU devices only when given)"
             % figures.DEFAULT_MIN_EFFICIENCY_PCT)),
    Option("soak_minutes", BOTH, dict(type=float, default=None, metavar="MIN",
                                      help="--level=long: the soak's minutes of training "
                                           "(default %g)" % DEFAULT_SOAK_MINUTES)),
    Option("step_timeout_sec", BOTH, dict(
        type=float, default=None, metavar="S",
        help="stop any step's child after S seconds (a check_failed 'hung' row; default 3 x "
             "its estimate + %d s)" % TIMEOUT_MARGIN_S)),
    Option("out_dir", ONE_HOST, dict(default=None,
                                     help="where validate.json, validate.csv, logs/ and each "
                                          "child's rows and manifest go (default "
                                          "tfbench_validate_<UTC time>)")),
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
    """The rules no single option's type says (plan.check_options' and the file's); UsageError
    naming the option."""
    check_options(args.level, args.tolerance_pct, args.soak_minutes, args.min_efficiency_pct)
    if args.step_timeout_sec is not None and args.step_timeout_sec <= 0:
        raise errors.UsageError("--step_timeout_sec=%g: give seconds above 0"
                                % args.step_timeout_sec)
    if args.baseline == figures.HISTORY and over_hosts:
        raise errors.UsageError("--baseline=history is one host's: run tfbench validate "
                                "--baseline=history on each host (over several hosts give a "
                                "baseline file)")
    if args.baseline not in (None, figures.HISTORY) and not os.path.isfile(args.baseline):
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
