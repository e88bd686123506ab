"""The sweep's progress bar (rich): counts, elapsed time and ETA; plain lines off a terminal,
a bar redrawn in place on one."""

import io
import os

from tfbench.sweep import progress as progress_lib


def test_progress_line_and_eta():
    now = [0.0]
    progress = progress_lib.Progress(4, io.StringIO(), width=8, clock=lambda: now[0])
    assert progress.line("p0").endswith(
        "0/4 points | elapsed 0:00:00 | ETA --:--:-- | p0")
    progress.finished(10.0)
    progress.finished(20.0)
    now[0] = 30.0
    line = progress.line("p2")
    # ETA: the mean point time (15 s) times the points left (2).
    assert line.endswith("2/4 points | elapsed 0:00:30 | ETA 0:00:30 | p2")
    assert line.count("━") == 4      # half of the 8-wide bar


def test_off_a_terminal_one_plain_line_per_update(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")   # the stream decides, not the environment
    stream = io.StringIO()
    progress = progress_lib.Progress(2, stream, clock=lambda: 0.0)
    name = "003_" + "x" * 150                # long names are not wrapped
    progress.show(name)
    progress.finished(5.0)
    progress.print("a notice [not markup]")
    progress.show("next")
    progress.finished(5.0)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert "\x1b" not in stream.getvalue()
    assert [ln.split(" | ")[0].strip(" ━") for ln in lines if "|" in ln] == [
        "0/2 points", "1/2 points", "2/2 points"]
    assert lines[0].endswith("| " + name)
    assert lines[1] == "a notice [not markup]"
    assert lines[-1].endswith("2/2 points | elapsed 0:00:00 | ETA 0:00:00 | done")


def test_without_a_total_a_count():
    stream = io.StringIO()
    progress = progress_lib.Progress(None, stream, unit="probes", clock=lambda: 0.0)
    progress.show("probe")
    progress.finished(1.0)
    progress.close("stopped")
    assert stream.getvalue().splitlines() == [
        "0 probes done | elapsed 0:00:00 | probe", "1 probes done | elapsed 0:00:00 | stopped"]


def test_on_a_terminal_the_bar_is_redrawn_and_the_cursor_restored():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            progress = progress_lib.Progress(3, tty)
            assert progress.tty
            for name in ("a", "b", "c"):
                progress.show(name)
                progress.finished(1.0)
            progress.close()
            tty.flush()
        os.set_blocking(master, False)
        out = b""
        try:
            while True:
                chunk = os.read(master, 65536)
                if not chunk:
                    break
                out += chunk
        except BlockingIOError:
            pass
    finally:
        os.close(master)
        os.close(slave)
    text = out.decode("utf-8", "replace")
    assert "\x1b[?25l" in text and text.rstrip().endswith("\x1b[?25h")   # cursor hidden, shown
    assert "3/3 points" in text and "done" in text
