"""A plain, non-editable `pip install` of the checkout, used from an empty directory: the presets
and helper scripts come with the package and the documented relative paths find them
(--flagfile=flags/..., nested ones too, --rsh=scripts/local_rsh.sh), `tfbench presets` lists
them, and a missing flagfile is one clean line.

The virtual environment sees the test run's own packages (TensorFlow is not installed again) and
is built without pip of its own; the test run's pip installs into it, without dependencies, from
a copy of the checkout, building in isolation as a user's `pip install .` does. It sees them
through a .pth file naming the running interpreter's site-packages, not through
`--system-site-packages`, which from inside a venv gives the base interpreter's packages (where
setuptools may be too old to build a wheel, and TensorFlow may be missing).
"""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT, free_ports, read_rows

pytestmark = pytest.mark.slow

TINY = ["--device=cpu", "--model=trivial", "--image_size=16", "--num_batches=2",
        "--num_warmup_batches=1", "--json_dir=", "--monitor_interval_ms=0"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(bin directory, site-packages tfbench directory) of a fresh install."""
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    os.makedirs(src)
    shutil.copy(os.path.join(ROOT, "setup.py"), src)
    shutil.copy(os.path.join(ROOT, "MANIFEST.in"), src)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("tfbench", "flags", "scripts"):
        shutil.copytree(os.path.join(ROOT, folder), src / folder, ignore=ignore)
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = str(env_dir / "bin" / "python")
    _see_this_environment(python)
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-cache-dir", str(src)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          cwd=base, env=_env(str(env_dir / "bin"), base))
    assert done.returncode == 0, done.stdout[-3000:]
    package = subprocess.run([python, "-c", "import tfbench, os; "
                              "print(os.path.dirname(tfbench.__file__))"], cwd=base,
                             env=_env(str(env_dir / "bin"), base), stdout=subprocess.PIPE,
                             text=True, check=True).stdout.strip()
    assert package.startswith(str(env_dir)), package   # the installed copy, not a checkout
    return str(env_dir / "bin"), package


def _see_this_environment(python):
    """The new venv imports what this interpreter's site-packages hold, after its own. Plain path
    lines: the .pth files there (an editable tfbench's finder among them) are not run."""
    own = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    ours = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    with open(os.path.join(own, "tfbench-test-outer.pth"), "w") as handle:
        handle.write("".join(p + "\n" for p in ours))


def _env(bin_dir, tmp):
    """The environment of a user of the install: its bin first on PATH, no checkout on
    PYTHONPATH."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(tmp))
    env.pop("PYTHONPATH", None)
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    return env


def _run(venv, args, cwd, timeout=180):
    return subprocess.run(args, cwd=cwd, env=_env(venv[0], cwd.parent), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


@pytest.fixture
def empty(tmp_path):
    work = tmp_path / "empty"
    work.mkdir()
    return work


def test_presets_are_installed_and_listed(venv, empty):
    presets_dir = os.path.join(venv[1], "presets")
    out = _run(venv, ["tfbench", "presets"], empty)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "Presets and helper scripts in %s" % presets_dir
    listed = [line.split()[0] for line in out.stdout.splitlines()[2:]]
    in_checkout = sorted(
        os.path.relpath(os.path.join(d, f), ROOT) for top in ("flags", "scripts")
        for d, _, names in os.walk(os.path.join(ROOT, top)) for f in names
        if f.endswith((".flags", ".sh")))
    assert sorted(listed) == in_checkout
    path = _run(venv, ["tfbench", "presets", "--path", "scripts/local_rsh.sh"], empty)
    assert path.stdout.strip() == os.path.join(presets_dir, "scripts", "local_rsh.sh")
    assert os.access(path.stdout.strip(), os.X_OK)
    assert os.listdir(empty) == []


def test_a_missing_flagfile_is_one_line_saying_where_presets_live(venv, empty):
    out = _run(venv, ["tfbench", "--flagfile=flags/no_such_preset.flags"], empty)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "tfbench: error: --flagfile=flags/no_such_preset.flags: no such file here or among the "
        "presets in %s (`tfbench presets` lists them)" % os.path.join(venv[1], "presets")]
    assert os.listdir(empty) == []


def test_launch_with_the_local_rsh_preset_and_a_nested_preset_flagfile(venv, empty):
    """The multi-host doc's first try, from an empty directory: --rsh=scripts/local_rsh.sh,
    and a user's flagfile that includes a preset by its relative path."""
    (empty / "mine.flags").write_text("--flagfile=flags/inference_latency_bs1.flags\n"
                                      + "\n".join(TINY) + "\n")
    port = free_ports(1)[0]
    out = _run(venv, ["tfbench", "launch", "--rsh=scripts/local_rsh.sh",
                      "--hosts=127.0.0.1:%d" % port, "--remote_cmd=tfbench", "--out_dir=out",
                      "--", "--flagfile=mine.flags", "--cluster_timeout_secs=60"], empty)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Mode:        forward only" in out.stdout
    rows = read_rows(empty / "tfbench_results.csv")
    assert [(r["status"], r["mode"], r["batch_size"], r["model"]) for r in rows] == [
        ("ok", "forward_only", "1", "trivial")]
