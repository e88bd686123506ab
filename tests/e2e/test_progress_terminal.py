"""A run's progress bar, for real: a `python -m tfbench` child whose stderr is a pseudo-terminal
shows the warm-up and the timed steps with an ETA; piped, it shows nothing more; its stdout is
the same either way but for the figures; and on one terminal for both streams the screen ends
as the log, with no trace of the bar (tfbench.output.progress)."""

import os
import pty
import re
import select
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow

ARGS = ["--model=trivial", "--device=cpu", "--image_size=16", "--batch_size=4",
        "--num_batches=20", "--num_warmup_batches=3", "--display_every=5", "--csv_file=",
        "--json_dir="]


def _run(cwd, stdout_tty, stderr_tty):
    """(stdout, stderr, what the terminal got): each stream a pipe or the one pseudo-terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfbench"] + ARGS, cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=slave if stdout_tty else subprocess.PIPE,
        stderr=slave if stderr_tty else subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=ROOT, COLUMNS="120", LINES="40"))
    os.close(slave)
    got = {master: b""}
    got.update({pipe.fileno(): b"" for pipe in (proc.stdout, proc.stderr) if pipe})
    open_fds = list(got)
    while open_fds:
        for fd in select.select(open_fds, [], [], 120)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:   # the terminal's last writer closed it
                chunk = b""
            if chunk:
                got[fd] += chunk
            else:
                open_fds.remove(fd)
    assert proc.wait(60) == 0
    os.close(master)
    text = {fd: data.decode("utf-8", "replace") for fd, data in got.items()}
    return (text[proc.stdout.fileno()] if proc.stdout else "",
            text[proc.stderr.fileno()] if proc.stderr else "", text[master])


def _screen(data):
    """What a terminal shows after `data`: the few controls rich and the tty write (carriage
    return, new line, cursor up, erase line, colours and cursor visibility, which show
    nothing)."""
    lines, row, col = [""], 0, 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]+", data):
        if token == "\r":
            col = 0
        elif token == "\n":
            row += 1
            lines += [""] * (row + 1 - len(lines))
        elif token.startswith("\x1b["):
            count = int(re.sub(r"\D", "", token) or 1)
            if token.endswith("A"):
                row = max(0, row - count)
            elif token.endswith("K"):
                lines[row] = lines[row][:col] if token != "\x1b[2K" else ""
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token):]
            col += len(token)
    return [line.rstrip() for line in lines]


def _figures_out(text):
    return re.sub(r"\d+(\.\d+)?", "#", text)


def test_progress_on_a_terminal_only_and_never_in_the_log(tmp_path):
    piped_out, piped_err, nothing = _run(tmp_path, stdout_tty=False, stderr_tty=False)
    out, _, terminal = _run(tmp_path, stdout_tty=False, stderr_tty=True)
    # On the terminal: the warm-up's and the timed steps' bars, with an ETA.
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal).replace("\r", "\n")
    frames = [line.strip() for line in plain.split("\n") if " steps " in line]
    assert any(re.match(r"warm-up .* 3/3 steps [\d:]+ ETA", f) for f in frames), frames
    assert any(re.match(r"timed .* 20/20 steps [\d:]+ ETA [\d:]+$", f) for f in frames), frames
    assert _screen(terminal)[-1] == ""          # erased when the run ended
    # Piped: nothing but what the run always wrote; stdout the same but for the figures.
    assert nothing == "" and " steps " not in piped_err and "\x1b[" not in piped_err
    assert "\x1b[" not in out + piped_out
    assert _figures_out(out) == _figures_out(piped_out)
    assert piped_out.splitlines()[-2].startswith("total images/sec: ")
    # One terminal for both: the bar gives way to every line of the log and leaves no trace.
    _, _, both = _run(tmp_path, stdout_tty=True, stderr_tty=True)
    noise = {_figures_out(line) for line in piped_err.splitlines()}   # TensorFlow's own
    screen = [line for line in _screen(both) if line and _figures_out(line) not in noise]
    assert [_figures_out(line) for line in screen] == _figures_out(piped_out).splitlines()
