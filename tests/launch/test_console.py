"""The chief's console under `tfbench launch` (tfbench.launch.console): its log unchanged, the
launcher's lines before the footer."""

import io

from tfbench.launch import run as launch


def test_the_chiefs_log_passes_unchanged_with_the_launchers_lines_before_the_footer():
    out, err = io.StringIO(), io.StringIO()
    console = launch.ChiefConsole(out, err)
    dashes = "-" * 64
    log = ["Step\tImg/sec\ttotal_loss", dashes, "not a footer", "1\timages/sec: 3.0", dashes,
           "total images/sec: 12.34", dashes]
    for line in log:
        console.out(line)
    console.err("a TensorFlow warning")
    assert out.getvalue().splitlines() == log[:4]      # the footer is held back
    console.finish(["Launch: 2 row(s)"])
    assert out.getvalue().splitlines() == log[:4] + ["Launch: 2 row(s)"] + log[4:]
    assert err.getvalue() == "a TensorFlow warning\n"
