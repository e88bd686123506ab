"""How a child ended, in a row's terms: its status (ok, oom, nan, interrupted, error) and one
error phrase, from its exit code and its log; and how a study of many children ends (its exit
code and one line) from the status of each point."""

from __future__ import annotations

import signal
from typing import Sequence

from tfbench import errors
from tfbench.children.process import ChildOutcome, last_line


def classify_failure(outcome: ChildOutcome, tail: str, memory_capped: bool = False,
                     sigkill_is_oom: bool = True) -> tuple[str, str]:
    """(status, error) of a child that wrote no row of its own (or ended badly after it).

    Under an address-space cap (--child_memory_limit_mb), native libraries report a failed
    allocation by aborting (oneDNN: 'could not create a primitive', C++: std::bad_alloc), so an
    abort or segfault of a capped child counts as oom. A child on this host killed by SIGKILL
    was most likely killed by the kernel's OOM killer (or a memory cap); a remote task's
    SIGKILL says nothing of memory (sigkill_is_oom=False: the launcher may have sent it), and
    is classified as any other signal, by its log.
    """
    code = outcome.exit_code
    line = last_line(tail)
    if outcome.timed_out:
        return "error", "timed out after %.0f s; last output: %s" % (outcome.seconds, line)
    if outcome.interrupted is not None:
        # Stopped along with the study. A child that outlived the signal (one that ignores
        # SIGINT, as jobs started in the background do) was killed, which says nothing of memory.
        how = "killed by %s" % errors.signal_name(-code) if code < 0 else "exit code %d" % code
        return "interrupted", "stopped with the interrupted study (%s); last output: %s" % (
            how, line or "none")
    if code < 0:
        name = errors.signal_name(-code)
        if code == -signal.SIGKILL and sigkill_is_oom:
            return "oom", "killed by SIGKILL (likely the kernel OOM killer or a memory cap)"
        if code in (-signal.SIGINT, -signal.SIGTERM):
            return "interrupted", "killed by %s" % name
        if memory_capped and code in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS):
            return "oom", "killed by %s under the memory cap (allocation failure): %s" % (
                name, line)
        # A failed child without a row of its own is an OOM when its log ends like one.
        status = "oom" if errors.is_out_of_memory(tail) else "error"
        return status, "killed by %s: %s" % (name, line)
    if code == errors.EXIT_OOM or errors.is_out_of_memory("\n".join(tail.splitlines()[-20:])):
        status = "oom"
    elif code == errors.EXIT_NAN:
        status = "nan"
    elif code in (errors.EXIT_SIGINT, errors.EXIT_SIGTERM):
        status = "interrupted"
    else:
        status = "error"
    return status, "%s (exit code %d)" % (line or "no output", code)


def study_end(statuses: Sequence[str], unit: str = "points", where: str = ""
              ) -> tuple[int, str]:
    """(exit code, the one error line's message) of a study whose points ended with `statuses`
    (one per point: ok when every row of it is), once every row is written: 0 and '' when all
    finished ok, errors.EXIT_RUN_ERROR when none did, errors.EXIT_INCOMPLETE otherwise.
    `where` ends the line (say, where the rows and logs are)."""
    failed = [s for s in statuses if s != "ok"]
    if not failed:
        return errors.EXIT_OK, ""
    counts: dict[str, int] = {}
    for status in failed:
        counts[status] = counts.get(status, 0) + 1
    how = ", ".join("%d %s" % (n, status) for status, n in counts.items())
    tail = "; " + where if where else ""
    if len(failed) == len(statuses):
        return errors.EXIT_RUN_ERROR, "no %s finished ok (%s)%s" % (unit[:-1] if unit.endswith(
            "s") else unit, how, tail)
    return errors.EXIT_INCOMPLETE, "%d of %d %s did not finish ok (%s)%s" % (
        len(failed), len(statuses), unit, how, tail)
