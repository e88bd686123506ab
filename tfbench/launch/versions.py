"""Before a launch: every host answers `<remote_cmd> --version` over the remote shell, in
parallel; a host that does not, or whose tfbench, TensorFlow or Keras differs from the chief's
(the first host's), is named with its cause.
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import threading
from typing import Optional, Sequence

from tfbench.children.process import last_line
from tfbench.launch.remote import NEEDS_SETSID, Host, killpg, rsh_argv


@dataclasses.dataclass
class Answer:
    host: Host
    version: Optional[str]      # the `tfbench --version` line
    cause: str = ""             # why there is none


def ask_version(rsh: Sequence[str], host: Host, remote_cmd: str, timeout: float) -> Answer:
    argv = rsh_argv(rsh, host, "sh -c %s" % shlex.quote(
        "%s; %s --version" % (NEEDS_SETSID, remote_cmd)))
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as exc:
        return Answer(host, None, "--rsh=%s cannot be started: %s"
                      % (shlex.join(rsh), exc.strerror or exc))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        killpg(proc)
        proc.communicate()
        return Answer(host, None, "no answer over `%s` within %gs (--cluster_timeout_secs)"
                      % (shlex.join(rsh), timeout))
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("tfbench ")]
    if proc.returncode == 0 and lines:
        return Answer(host, lines[-1])
    said = last_line(err) or last_line(out) or "no output"
    if proc.returncode == 255:
        return Answer(host, None, "unreachable over `%s`: %s" % (shlex.join(rsh), said))
    if proc.returncode == 127:
        return Answer(host, None, "`%s` not found there: %s" % (remote_cmd, said))
    return Answer(host, None, "`%s --version` failed (exit code %d): %s"
                  % (remote_cmd, proc.returncode, said))


def ask_versions(rsh: Sequence[str], hosts: Sequence[Host], remote_cmd: str,
                 timeout: float) -> list[Answer]:
    """Every host's answer, asked in parallel."""
    answers: list[Optional[Answer]] = [None] * len(hosts)

    def ask(i: int) -> None:
        answers[i] = ask_version(rsh, hosts[i], remote_cmd, timeout)
    threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(len(hosts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [a for a in answers if a is not None]


VERSION_FIELDS = ("tfbench", "TensorFlow", "Keras")


def version_fields(line: str) -> dict[str, str]:
    """'tfbench 0.1.0 (git ..) | TensorFlow 2.21.0 | ...' -> {'tfbench': '0.1.0 (git ..)', ...}"""
    out = {}
    for part in line.split("|"):
        name, _, value = part.strip().partition(" ")
        out[name] = value.strip()
    return out


def version_problems(answers: Sequence[Answer]) -> list[tuple[Host, str]]:
    """(host, cause) for hosts that did not answer, or whose versions differ from the chief's
    (the first host's)."""
    problems = [(a.host, a.cause) for a in answers if a.version is None]
    if problems or not answers:
        return problems
    chief = version_fields(answers[0].version or "")
    for answer in answers[1:]:
        mine = version_fields(answer.version or "")
        keys = [k for k in VERSION_FIELDS if mine.get(k) != chief.get(k)]
        if keys:
            problems.append((answer.host, "runs %s where the chief (%s) runs %s" % (
                ", ".join("%s %s" % (k, mine.get(k) or "?") for k in keys),
                answers[0].host.label,
                ", ".join("%s %s" % (k, chief.get(k) or "?") for k in keys))))
    return problems
