"""Helpers for end-to-end tests: run the real CLI in a subprocess or in-process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(args, cwd, timeout=300, env_extra=None, merged=True):
    """Runs `python -m tfbench ARGS`; returns (exit code, stdout, stderr) or merged output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-m", "tfbench"] + list(args), cwd=cwd, env=env,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                          text=True, timeout=timeout)
    if merged:
        return proc.returncode, proc.stdout
    return proc.returncode, proc.stdout, proc.stderr


def run_inprocess(args, cwd):
    """Runs the benchmark in this process; returns (exit code, emitted lines)."""
    from tfbench import cli
    lines: list[str] = []
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.run_benchmark(["tfbench"] + list(args), emit=lines.append)
    finally:
        os.chdir(old)
    return code, lines


def free_ports(n: int) -> list[int]:
    """n TCP ports on 127.0.0.1 that were free a moment ago (for localhost clusters)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
