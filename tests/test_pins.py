"""pins: constraints that keep an installed TensorFlow's packages, and the numpy 2 check."""

import os
import subprocess
import sys

import pytest

from helpers import ROOT
from tfbench import pins

# The numpy requirements of TensorFlow releases, as their wheels' METADATA declare them.
TF_217 = ['numpy<2.0.0,>=1.23.5; python_version <= "3.11"',
          'numpy<2.0.0,>=1.26.0; python_version >= "3.12"']
TF_221 = ["numpy>=1.26.0"]


def fake_dist(site, name, version, requires=()):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version]
    lines += ["Requires-Dist: %s" % r for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


@pytest.fixture
def site(tmp_path):
    return tmp_path / "site"


def test_constraints_are_tensorflow_and_everything_it_needs_installed(site):
    fake_dist(site, "tensorflow", "2.17.0+nv25.2",
              TF_217 + ["keras>=3.2.0", "tensorboard<2.18,>=2.17", "h5py>=3.10.0",
                        'tensorflow-io-gcs-filesystem>=0.23.1; python_version < "3.12"',
                        'nvidia-cublas-cu12==12.3.4.1; extra == "and-cuda"'])
    fake_dist(site, "numpy", "1.26.4")
    fake_dist(site, "keras", "3.8.0", ["numpy", "rich", "h5py"])
    fake_dist(site, "rich", "13.9.4", ['markdown-it-py>=2.2.0', 'ipywidgets; extra == "jupyter"'])
    fake_dist(site, "markdown_it_py", "3.0.0", ["mdurl~=0.1", 'psutil; extra == "benchmarking"'])
    fake_dist(site, "h5py", "3.12.1", ["numpy>=1.19.3"])
    fake_dist(site, "tensorflow-io-gcs-filesystem", "0.37.1")
    fake_dist(site, "nvidia-cublas-cu12", "12.3.4.1")
    # installed, but only named by other packages' extras: not TensorFlow's to keep
    fake_dist(site, "ipywidgets", "8.1.5")
    fake_dist(site, "psutil", "5.9.0")
    fake_dist(site, "pandas", "2.2.3", ["numpy>=1.23.2"])   # installed, not a dependency
    assert pins.constraints([str(site)]) == [
        "h5py==3.12.1", "keras==3.8.0", "markdown_it_py==3.0.0", "numpy==1.26.4",
        "nvidia-cublas-cu12==12.3.4.1", "rich==13.9.4", "tensorflow==2.17.0+nv25.2",
        "tensorflow-io-gcs-filesystem==0.37.1"]


def test_numpy_is_kept_even_when_a_build_does_not_declare_it(site):
    fake_dist(site, "tensorflow", "2.17.0+nv25.2", ["absl-py>=1.0.0"])
    fake_dist(site, "numpy", "1.26.4")
    fake_dist(site, "absl-py", "2.1.0")
    assert pins.constraints([str(site)]) == [
        "absl-py==2.1.0", "numpy==1.26.4", "tensorflow==2.17.0+nv25.2"]


def test_no_tensorflow_no_constraints(site):
    fake_dist(site, "numpy", "2.1.0")
    assert pins.constraints([str(site)]) == []
    assert pins.numpy_mismatch([str(site)]) is None


@pytest.mark.parametrize("tf_version, requires, numpy, broken", [
    ("2.17.1", TF_217, "2.4.6", True),
    ("2.17.1", TF_217, "1.26.4", False),
    ("2.21.0", TF_221, "2.4.6", False),
    ("2.21.0", TF_221, "1.26.4", False),
    ("2.18.0", ["numpy<2.1.0,>=1.26.0"], "2.4.6", False),   # declares a cap, imports with 2.x
    ("2.16.1", ["numpy<2", "numpy==1.26.4; extra == 'x'"], "2.0.0", True),
    ("2.17.1", ["numpy (<2.0.0,>=1.23.5)"], "2.0.2", True),   # old metadata spelling
    ("2.17.1", TF_217 + ['numpy>=1.26.0; python_version >= "3.13"'], "2.1.0", False),
])
def test_numpy_mismatch(site, tf_version, requires, numpy, broken):
    fake_dist(site, "tensorflow-cpu", tf_version, requires)
    fake_dist(site, "numpy", numpy)
    message = pins.numpy_mismatch([str(site)])
    if not broken:
        assert message is None
        return
    assert message == (
        "TensorFlow %s (tensorflow-cpu) is built for numpy 1.x and cannot import with numpy %s: "
        "pip install \"numpy<2\" pandas matplotlib repairs it (pip then also picks pandas and "
        "matplotlib releases that work with numpy 1.x); the README (Installing) says how to "
        "install beside TensorFlow without this" % (tf_version, numpy))


@pytest.mark.slow
def test_python_m_tfbench_pins_prints_a_constraints_file(site):
    fake_dist(site, "tensorflow-cpu", "2.17.1", TF_217)
    fake_dist(site, "numpy", "1.26.4")
    code = "import sys; sys.path[:0] = [%r, %r]; from tfbench import pins; sys.exit(pins.main())"
    out = subprocess.run([sys.executable, "-c", code % (str(site), ROOT)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# ") and "numpy==1.26.4" in lines
    assert "tensorflow-cpu==2.17.1" in lines


def test_without_tensorflow_pins_says_so(monkeypatch, capsys):
    monkeypatch.setattr(pins, "constraints", lambda path=None: [])
    assert pins.main() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no installed TensorFlow found" in err


@pytest.mark.slow
def test_the_checkout_runs_it_without_tfbench_installed():
    """`python -m tfbench.pins` from the checkout, before tfbench's requirements exist."""
    env = dict(os.environ, PYTHONPATH="")
    out = subprocess.run([sys.executable, "-S", "-c",
                          "import sys; sys.path.insert(0, %r); import tfbench.pins, sys; "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                          "('numpy', 'absl', 'pandas', 'tensorflow', 'packaging')))" % ROOT],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
