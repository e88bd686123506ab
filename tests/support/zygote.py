"""`python -m tfbench ...` and the tests' check scripts, started as forks of one server process
that has already imported TensorFlow, Keras and tfbench (multiprocessing's forkserver).

A fresh process spends about 5 CPU-s importing them before it runs anything, and the suite
starts a few hundred; on CI's two cores that was a third of the suite's time. A fork of the
server skips the imports and nothing else: the child gets its own argv, environment, working
directory and standard streams, and TensorFlow's runtime (devices, threads, the environment it
reads at start) has not started in the server, so the child starts it as a fresh process would
(tfbench.distribute.devices.runtime_started). The server imports the frameworks the way
`python -m tfbench` does (tfbench.engine.lean_import), so the child's modules are the ones a
fresh run imports.

TFBENCH_TEST_FORKSERVER=0 starts real processes instead (the same tests must pass both ways).
Tests about the interpreter's own start (what is imported, the environment before the import,
the installed console script) start real processes themselves.
"""

from __future__ import annotations

import atexit
import io
import locale
import multiprocessing
import multiprocessing.forkserver
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Optional, Sequence

from paths import ROOT, SUPPORT

TFBENCH_MAIN = os.path.join(ROOT, "tfbench", "__main__.py")
_CONTEXT = None


def enabled() -> bool:
    return os.environ.get("TFBENCH_TEST_FORKSERVER", "1") != "0"


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["zygote_preload"])
        # The server starts with this process's environment, and Python 3.11 imports the
        # preload before it applies the sys.path it is given: the path goes in PYTHONPATH.
        saved = dict(os.environ)
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [SUPPORT, ROOT] + ([path] if path else []))
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _CONTEXT = context
    return _CONTEXT


def _program(script: Optional[str], code: Optional[str]) -> list[str]:
    """What follows `python` on the command line: `-m tfbench`, SCRIPT or `-c CODE`."""
    if code is not None:
        return ["-c", code]
    return ["-m", "tfbench"] if script is None else [script]


def _child(program: list[str], args: Sequence[str], env: dict, cwd: str, out, err) -> None:
    """In the fork: become `python PROGRAM ARGS` (see _program), then exit."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out.fileno(), 1)
    os.dup2((err or out).fileno(), 2)
    out.close()
    if err is not None:
        err.close()
    os.environ.clear()
    os.environ.update(env)
    preload = sys.modules.get("zygote_preload")
    os.environ.update(getattr(preload, "SET_BY_IMPORT", {}))
    os.chdir(cwd)
    tempfile.tempdir = None   # cached by the server's imports: $TMPDIR is the child's
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    # The streams a fresh interpreter makes for pipes: stdout block-buffered, stderr by line.
    sys.stdout = io.TextIOWrapper(io.open(1, "wb", buffering=0 if unbuffered else -1,
                                          closefd=False), encoding="utf-8",
                                  write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(io.open(2, "wb", buffering=0 if unbuffered else -1,
                                          closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True,
                                  write_through=unbuffered)
    sys.stdin = open(os.devnull)
    status = 0
    try:
        if program[0] == "-c":
            sys.argv = ["-c"] + list(args)
            sys.path[0:0] = [""]
            exec(compile(program[1], "<string>", "exec"), {"__name__": "__main__"})
        elif program[0] == "-m":
            sys.argv = [TFBENCH_MAIN] + list(args)
            sys.path[0:0] = [cwd]
            runpy.run_module(program[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = program + list(args)
            sys.path[0:0] = [os.path.dirname(os.path.abspath(program[0]))]
            runpy.run_path(program[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:   # what an uncaught exception does to a fresh interpreter
        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _text(fd: int) -> io.TextIOWrapper:
    """A pipe's read end as subprocess's text=True makes it."""
    return io.TextIOWrapper(io.open(fd, "rb"), encoding=locale.getpreferredencoding(False))


class Child:
    """A started child, with the part of subprocess.Popen's interface the tests use."""

    def __init__(self, program: list[str], args: list[str], env: dict, cwd: str, merged: bool):
        self.args = args
        ctx = _context()
        out_r, out_w = ctx.Pipe(duplex=False)
        err_r, err_w = ctx.Pipe(duplex=False) if not merged else (None, None)
        self._process = ctx.Process(target=_child, args=(program, args, env, str(cwd), out_w,
                                                         err_w), daemon=False)
        self._process.start()
        self.pid = self._process.pid
        out_w.close()
        self.stdout = _text(os.dup(out_r.fileno()))
        out_r.close()
        self.stderr = None
        if err_r is not None:
            err_w.close()
            self.stderr = _text(os.dup(err_r.fileno()))
            err_r.close()
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None and not self._process.is_alive():
            self.returncode = self._process.exitcode
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout: Optional[float] = None):
        """As Popen's: `timeout` bounds the whole call, reading and waiting."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> Optional[float]:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        got: dict = {}
        readers = [threading.Thread(target=lambda n=name, s=stream: got.__setitem__(n, s.read()),
                                    daemon=True)
                   for name, stream in (("out", self.stdout), ("err", self.stderr)) if stream]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(left())
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self._process.join(left())
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        for stream in (self.stdout, self.stderr):
            if stream:
                stream.close()
        return got.get("out"), got.get("err")

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def start(args: Sequence[str], cwd, env: dict, script: Optional[str] = None,
          merged: bool = True, code: Optional[str] = None):
    """Starts `python -m tfbench ARGS` (or `python SCRIPT ARGS`, or `python -c CODE ARGS`) with
    stdout (and stderr, or stderr into stdout when `merged`) as text pipes: a Child, or a
    subprocess.Popen when the fork server is off."""
    program = _program(script, code)
    if not enabled():
        return subprocess.Popen([sys.executable] + program + list(args), cwd=cwd, env=env,
                                text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merged else subprocess.PIPE)
    return Child(program, list(args), env, cwd, merged)


def run(args: Sequence[str], cwd, env: dict, timeout: float, script: Optional[str] = None,
        merged: bool = True, code: Optional[str] = None) -> subprocess.CompletedProcess:
    """start(), then its output and exit code, as subprocess.run(..., timeout=...)."""
    proc = start(args, cwd, env, script, merged, code)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)
