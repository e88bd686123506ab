"""The host side of `tfbench launch`: one benchmark task on a host, through a remote shell.

A task is `<rsh> HOST "sh -c '<program>'"`, ssh's way of running a command. The program
(`remote_script`) is POSIX sh, because the remote side has nothing but a shell and tfbench:
  * the task runs in its own session (setsid, which every host needs), in the background, with
    its row going to a fresh temporary directory (--csv_file=$d/rows.csv);
  * a watcher reads the remote shell's stdin, which the launcher holds open and never writes.
    When the launcher closes it (a failure elsewhere, SIGINT/SIGTERM), exits or is killed, and
    equally when the ssh connection drops, the watcher reads end-of-file and sends SIGTERM to the
    task's process group (tfbench then writes its row with status interrupted), SIGKILL a few
    seconds later. This is what stops a remote process over plain ssh: without a terminal
    (no -t) sshd sends no SIGHUP when the connection closes, a task blocked in a collective
    writes nothing and so never sees SIGPIPE, and a killed local ssh client only closes the
    connection;
  * when the task ends, the program prints its exit code, its CSV row(s), NCCL's log
    (--nccl_debug) and any file the launcher asked back (a validation's validate.json) on
    stdout between `@@tfbench-launch:` marker lines, and removes the directory.
So the rows come back over the connection that is already open: no shared storage, no second
ssh call (which could fail after the run), nothing left on the host. Files the task reads (a
baseline) go the same way, written into the directory by the program before the task starts.

Before a launch every host answers `<remote_cmd> --version` (versions.py); a host that does
not, or whose tfbench, TensorFlow or Keras differs from the chief's, is named in one line.

The remote shell is any command taking `HOST COMMAND` as ssh does; scripts/local_rsh.sh runs the
command on this machine for 127.0.0.1 hosts, which is how the tests (and a first try) run it.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from typing import Callable, Mapping, Optional, Sequence, TextIO

from tfbench import errors
from tfbench.children.rows import parse_rows

DEFAULT_RSH = "ssh -o BatchMode=yes"
DEFAULT_REMOTE_CMD = "tfbench"
DEFAULT_PORT = 2222
MARK = "@@tfbench-launch:"


# --- hosts ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Host:
    target: str     # what the remote shell connects to: [user@]host
    address: str    # host:port of this task's TensorFlow server

    @property
    def label(self) -> str:
        return self.address

    @property
    def machine(self) -> str:
        """The host as named, user and port aside (an alias of it is another host)."""
        return self.target.rpartition("@")[2].lower()


def parse_hosts(text: str, port: int = DEFAULT_PORT) -> list[Host]:
    """'[user@]host[:port],...' -> Hosts. A host given without a port gets `port`; a host
    named several times without ports gets port, port+1, ... (one task each)."""
    hosts: list[Host] = []
    repeats: dict[str, int] = {}
    for item in (x.strip() for x in (text or "").split(",")):
        if not item:
            continue
        user, at, rest = item.rpartition("@")
        if rest.startswith("["):                         # [v6::address]:port
            end = rest.find("]")
            name, tail = rest[1:end], rest[end + 1:]
            given = tail[1:] if tail.startswith(":") else tail
            shown = "[%s]" % name
        else:
            name, _, given = rest.partition(":")
            shown = name
        if not name or (given and not given.isdigit()) or ":" in given:
            raise errors.UsageError("--hosts: %r is not [user@]host[:port]" % item)
        if given:
            number = int(given)
        else:
            number = port + repeats.get(name, 0)
            repeats[name] = repeats.get(name, 0) + 1
        if not 0 < number < 65536:
            raise errors.UsageError("--hosts: port %d of %r is out of range" % (number, item))
        hosts.append(Host(user + at + name, "%s:%d" % (shown, number)))
    if not hosts:
        raise errors.UsageError("--hosts needs at least one host")
    addresses = [h.address for h in hosts]
    twice = sorted({a for a in addresses if addresses.count(a) > 1})
    if twice:
        raise errors.UsageError("--hosts names %s more than once: every task needs its own "
                                "host:port" % ", ".join(twice))
    return hosts


# --- the command each host runs ----------------------------------------------------------

def task_flags(flags: Sequence[str], hosts: Sequence[Host], index: int,
               gpus_per_task: Optional[int] = None) -> list[str]:
    """Task `index`'s flags: the benchmark's, then on a host running several tasks GPUs of its
    own (the k-th there takes k*n .. k*n+n-1, n = --num_gpus; gpus_per_task is None on CPUs; a
    host with fewer GPUs refuses the task itself), then the cluster's."""
    same = [h.machine == hosts[index].machine for h in hosts]
    own = []
    if gpus_per_task and sum(same) > 1:
        first = sum(same[:index]) * gpus_per_task
        own = ["--gpu_indices=" + ",".join(str(first + i) for i in range(gpus_per_task))]
    return list(flags) + own + ["--job_name=worker",
                                "--worker_hosts=" + ",".join(h.address for h in hosts),
                                "--task_index=%d" % index]


# A host without setsid (util-linux; busybox has one too) could not stop a task's process group:
# said before anything starts (the version check runs this too), exit code 126.
NEEDS_SETSID = ('command -v setsid >/dev/null 2>&1 || { echo "setsid not found on this host '
                '(util-linux): tfbench launch needs it to stop its tasks" >&2; exit 126; }')


# A file name inside the task's directory: no quoting needed, no way out of it.
_TASK_FILE = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")


def _task_path(name: str) -> str:
    if not _TASK_FILE.fullmatch(name) or ".." in name.split("/"):
        raise ValueError("%r is not a file name inside the task's directory" % name)
    return name


def _write_file(name: str, text: str) -> str:
    """POSIX sh writing `text` to $d/NAME in one line (printf's arguments, each line one, so
    no newline and no escape sequence inside the program)."""
    if "/" in name:
        raise ValueError("%r: a file the task reads lies in its directory itself" % name)
    path = '"$d/%s"' % _task_path(name)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return ": > %s" % path
    return "printf '%%s\\n' %s > %s" % (" ".join(shlex.quote(ln) for ln in lines), path)


def remote_script(remote_cmd: str, flags: Sequence[str], nccl_debug: bool = False,
                  kill_after: float = 5.0, tag: str = "", *,
                  files_in: Optional[Mapping[str, str]] = None,
                  dir_flags: Sequence[tuple[str, str]] = (),
                  files_back: Sequence[str] = ()) -> str:
    """The sh program a host runs for one task (see the module docstring). `tag` names the task
    in the watcher's command line (ps shows which task a watcher belongs to).

    files_in: NAME -> text, written into the task's directory before it starts (a text file:
    its last line gets a newline); dir_flags: (flag, NAME) pairs the task gets as
    --flag=<task's directory>/NAME, after `flags` and its --csv_file; files_back: NAMEs whose
    content comes back between `file NAME` and `end` markers (RemoteTask.file_text)."""
    # The shell between the watcher and tfbench must outlive the SIGTERM sent to the group,
    # so that it waits for tfbench to write its row and hands on tfbench's exit code (a shell
    # with a trap defers it until its child ends; the child gets the default disposition).
    command = shlex.quote("trap : TERM INT; %s \"$@\"; c=$?; exit $c" % remote_cmd)
    args = " ".join(shlex.quote(f) for f in flags)
    nccl = ('export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS="${NCCL_DEBUG_SUBSYS:-INIT,NET}" '
            'NCCL_DEBUG_FILE="$d/nccl.%h.%p"\n' if nccl_debug else "")
    watch = shlex.quote('while read -r _; do :; done; kill -TERM -"$1"; sleep %g; '
                        'kill -KILL -"$1"' % kill_after)
    inputs = "".join(_write_file(name, text) + " || exit 125\n"
                     for name, text in (files_in or {}).items())
    own = "".join(' "--%s=$d/%s"' % (flag, _task_path(name)) for flag, name in dir_flags)
    back = "".join('if [ -f "$d/%s" ]; then echo "%sfile %s"; cat "$d/%s"; echo; '
                   'echo "%send"; fi\n' % (name, MARK, name, name, MARK)
                   for name in map(_task_path, files_back))
    task = (
        'exec 3<&0\n'
        'setsid sh -c %s tfbench-task %s "--csv_file=$d/rows.csv"%s </dev/null 3<&- &\n'
        'p=$!\n'
        'setsid sh -c %s tfbench-watch "$p" %s <&3 >/dev/null 2>&1 &\n'
        'w=$!\n'
        'exec 3<&-\n'
        'wait "$p"; c=$?\n'
        'kill -KILL -"$w" 2>/dev/null\n'
        "trap '' PIPE\n"
        'echo "%sexit $c"\n'
        'if [ -s "$d/rows.csv" ]; then echo "%srows"; cat "$d/rows.csv"; echo; echo "%send"; fi\n'
        'for f in "$d"/nccl.*; do if [ -f "$f" ]; then echo "%snccl"; cat "$f"; echo; '
        'echo "%send"; fi; done\n'
        % (command, args, own, watch, shlex.quote(tag or "-"), MARK, MARK, MARK, MARK, MARK))
    program = (NEEDS_SETSID + "\n"
               'd=$(mktemp -d "${TMPDIR:-/tmp}/tfbench-launch.XXXXXX") || exit 125\n'
               + inputs + nccl + task + back +
               'rm -rf "$d"\n'
               'exit "$c"\n')
    # One line: ssh hands the command to the user's login shell, and csh/tcsh refuse a newline
    # inside quotes ("Unmatched '."); sh reads `;` and `&` as it reads newlines.
    # (Split at newlines only: a file's line may hold a carriage return, inside its quotes.)
    return " ".join(s if s.endswith("&") else s + ";" for s in program.split("\n") if s)


def rsh_argv(rsh: Sequence[str], host: Host, command: str) -> list[str]:
    """The local command: the remote shell, the host, one command string (as ssh joins its
    arguments with spaces and hands them to the login shell)."""
    return list(rsh) + [host.target, command]


# --- one task --------------------------------------------------------------------------------

def killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class RemoteTask:
    """One host's task: the remote shell process, its output streamed to a log file (every
    line prefixed with the task) and to `out` / `err` (the chief's console); the marker blocks
    parsed."""

    def __init__(self, index: int, host: Host, flags: list[str], argv: list[str],
                 log_path: str, out: Optional[Callable[[str], None]] = None,
                 err: Optional[Callable[[str], None]] = None):
        self.index, self.host, self.flags, self.argv = index, host, flags, argv
        self.log_path, self._out, self._err = log_path, out, err
        self.prefix = "[worker %d %s] " % (index, host.label)
        self.proc: Optional[subprocess.Popen] = None
        self.started = self.ended = 0.0
        self.stopped = False           # the launcher closed its stdin (remote SIGTERM)
        self.stopped_at = 0.0
        self.exit_code: Optional[int] = None    # the remote tfbench's, from the marker
        self.rows_text: list[str] = []
        self.nccl_text: list[str] = []
        self.files: dict[str, list[str]] = {}    # files_back that came back: name -> lines
        self.tail: list[str] = []      # last lines of output, markers excluded
        self._lock = threading.Lock()
        self._log: Optional[TextIO] = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        self._log = open(self.log_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1,
                                     errors="replace", start_new_session=True)
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    def _write(self, line: str) -> None:
        with self._lock:
            if self._log is not None:
                self._log.write(self.prefix + line + "\n")
                self._log.flush()
            self.tail = (self.tail + [line])[-40:]

    def _read_stdout(self) -> None:
        block: Optional[list[str]] = None
        for raw in self.proc.stdout:
            line = raw.rstrip("\r\n")
            if line.startswith(MARK):
                word = line[len(MARK):].strip()
                if word.startswith("exit "):
                    code = word[5:].strip()
                    self.exit_code = int(code) if code.lstrip("-").isdigit() else None
                elif word == "rows":
                    block = self.rows_text
                elif word == "nccl":
                    block = self.nccl_text
                elif word.startswith("file "):
                    block = self.files.setdefault(word[5:].strip(), [])
                elif word == "end":
                    block = None
                continue
            if block is not None:
                block.append(line)
                if block is self.nccl_text:
                    with self._lock:
                        if self._log is not None:
                            self._log.write(self.prefix + "[nccl] " + line + "\n")
                continue
            self._write(line)
            if self._out is not None:
                self._out(line)

    def _read_stderr(self) -> None:
        for raw in self.proc.stderr:
            line = raw.rstrip("\r\n")
            self._write(line)
            if self._err is not None:
                self._err(line)

    def poll(self) -> Optional[int]:
        code = self.proc.poll()
        if code is not None and not self.ended:
            self.ended = time.monotonic()
        return code

    @property
    def running(self) -> bool:
        return self.poll() is None

    def stop(self) -> None:
        """Closes the remote shell's stdin: the host's watcher sends SIGTERM to the task."""
        if self.stopped:
            return
        self.stopped, self.stopped_at = True, time.monotonic()
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def kill(self) -> None:
        """Ends the local remote-shell process (and its group); the host's watcher then reads
        end-of-file too."""
        self.stop()
        killpg(self.proc)

    def finish(self) -> None:
        """Waits for the readers to drain the output (over ssh the output ends with the remote
        shell; a local stand-in's stray child may hold it open longer); closes the log."""
        if self.proc is None:
            return
        self.proc.wait()
        self.poll()
        for t in self._threads:
            t.join(timeout=2)
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    # -- what became of it
    @property
    def ok(self) -> bool:
        return self.proc is not None and self.proc.returncode == 0 and self.exit_code == 0

    def rows(self) -> list[dict[str, str]]:
        return parse_rows(io.StringIO("\n".join(self.rows_text)))

    def file_text(self, name: str) -> Optional[str]:
        """A file of files_back as the task left it (None when it did not come back). The
        program ends each with a newline of its own: the lines joined are the file's text, its
        line ends read as newlines."""
        lines = self.files.get(name)
        return None if lines is None else "\n".join(lines)

    def signal_number(self) -> Optional[int]:
        code = self.exit_code
        if code is not None and code > 128 and code - 128 < signal.NSIG:
            return code - 128
        return None

    def cause(self, rsh: Sequence[str]) -> str:
        """Why this task did not end well, in one phrase."""
        if self.proc is None:
            return "not started (tfbench launch was stopped first)"
        said = ""
        for line in reversed(self.tail):
            if line.startswith(errors.ERROR_PREFIX):
                said = line[len(errors.ERROR_PREFIX):]
                break
        last = said or (self.tail[-1].strip() if self.tail else "no output")
        if self.exit_code is None:
            if self.proc.returncode == 255:
                return "unreachable over `%s`: %s" % (shlex.join(rsh), last)
            if self.proc.returncode < 0:
                return "the remote shell was stopped (%s)" % errors.signal_name(
                    -self.proc.returncode)
            return "the remote shell ended with exit code %d: %s" % (self.proc.returncode, last)
        sig = self.signal_number()
        if sig is not None:
            return "killed by %s%s" % (errors.signal_name(sig), ": " + said if said else "")
        if said:
            return said
        return "exit code %d: %s" % (self.exit_code, last)
