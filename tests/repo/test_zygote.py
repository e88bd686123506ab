"""tests/support/zygote.py: a fork of the server is the process the test asked for (its arguments,
environment, directory, streams, exit code and signals), and it starts with the frameworks
already imported (else every CLI test pays the imports again)."""

import os
import signal

import pytest

import zygote

_PROBE = """
import json, os, sys, tempfile
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("PROBE"),
                  "tmp": tempfile.gettempdir(), "preloaded": "tensorflow" in sys.modules,
                  "tpu": os.environ.get("TPU_ML_PLATFORM"), "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not zygote.enabled(), reason="TFBENCH_TEST_FORKSERVER=0")]


def test_a_child_gets_its_own_arguments_environment_directory_and_exit_code(tmp_path):
    import json
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    env = dict(os.environ, PROBE="yes", TMPDIR=str(temp))
    done = zygote.run(["3", "two words"], work, env, timeout=60, script=str(script),
                      merged=False)
    assert done.returncode == 3
    assert done.stderr == "to stderr\n"
    got = json.loads(done.stdout)
    assert got == {"argv": ["3", "two words"], "cwd": str(work), "env": "yes",
                   "tmp": str(temp), "preloaded": True, "tpu": "Tensorflow", "stdin": ""}
    # Nothing of this test's own environment that it did not pass.
    done = zygote.run(["0"], work, {"PATH": os.environ["PATH"]}, timeout=60,
                      script=str(script), merged=False)
    assert json.loads(done.stdout)["env"] is None


def test_the_tfbench_cli_runs_as_python_dash_m(tmp_path):
    done = zygote.run(["--version"], tmp_path, dict(os.environ), timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("tfbench "), done.stdout
    done = zygote.run(["no_such_subcommand"], tmp_path, dict(os.environ), timeout=60)
    assert done.returncode == 2
    assert done.stdout.splitlines()[-1].startswith("tfbench: error: unknown subcommand")


def test_signals_reach_the_child_and_its_exit_says_so(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text("import sys, time\nprint('up', flush=True)\ntime.sleep(60)\n")
    child = zygote.start([], tmp_path, dict(os.environ), script=str(script))
    assert child.stdout.readline() == "up\n"
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGTERM
    child = zygote.start([], tmp_path, dict(os.environ), script=str(script))
    assert child.stdout.readline() == "up\n"
    child.send_signal(signal.SIGINT)   # a fresh interpreter's KeyboardInterrupt: exit 1
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 1 and "KeyboardInterrupt" in out


def test_a_timeout_raises_as_subprocess_does(tmp_path):
    import subprocess
    script = tmp_path / "wait.py"
    script.write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run([], tmp_path, dict(os.environ), timeout=1, script=str(script))


def test_the_server_never_started_the_tensorflow_runtime(tmp_path):
    """A fork of a process whose runtime runs would inherit its devices and dead threads."""
    script = tmp_path / "runtime.py"
    script.write_text("import sys\nfrom tfbench.distribute import devices\n"
                      "print(devices.runtime_started(), 'tensorflow' in sys.modules)\n")
    done = zygote.run([], tmp_path, dict(os.environ), timeout=60, script=str(script))
    assert done.stdout.split() == ["False", "True"], done.stdout
