"""The Dockerfiles agree with the package: install command, extras, entry point."""

import os
import re

from helpers import ROOT


def _read(name):
    with open(os.path.join(ROOT, "docker", name)) as handle:
        return handle.read()


def _instructions(text):
    return [l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#")]


def _setup_text():
    with open(os.path.join(ROOT, "setup.py")) as handle:
        return handle.read()


def test_ngc_dockerfile_keeps_the_container_tensorflow():
    lines = _instructions(_read("Dockerfile"))
    assert lines[0] == "FROM nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
    installs = [l for l in lines if "pip install" in l]
    # no extra, and the installed TensorFlow's packages pinned: as the README says
    assert installs == ["RUN python3 -m tfbench.pins > /tmp/tf-pins.txt && "
                        "pip install --no-cache-dir . -c /tmp/tf-pins.txt"]
    assert lines.index("COPY . /opt/tfbench") < lines.index("WORKDIR /opt/tfbench") < \
        lines.index(installs[0]) < lines.index("WORKDIR /workspace")
    with open(os.path.join(ROOT, "README.md")) as handle:
        assert "`python -m tfbench.pins > /tmp/tf-pins.txt && pip install . -c " \
               "/tmp/tf-pins.txt`" in handle.read()


def test_pip_dockerfile_installs_the_gpu_extra():
    lines = _instructions(_read("Dockerfile.pip"))
    assert lines[0].startswith("FROM nvidia/cuda:")
    assert any(re.search(r'pip install .*"/opt/tfbench\[gpu\]"', l) for l in lines)
    assert '"gpu": ["tensorflow[and-cuda]"' in _setup_text()


def test_entry_points_exist_in_setup():
    setup = _setup_text()
    for name in ("Dockerfile", "Dockerfile.pip"):
        entry = [l for l in _instructions(_read(name)) if l.startswith("ENTRYPOINT")]
        assert entry == ['ENTRYPOINT ["tfbench"]']
    assert '"tfbench=tfbench.cli:entry_point"' in setup
    assert '"tf_cnn_benchmarks=tfbench.cli:entry_point"' in setup


def test_readme_shows_build_and_run():
    with open(os.path.join(ROOT, "README.md")) as handle:
        readme = handle.read()
    assert "docker build -f docker/Dockerfile -t tfbench:ngc ." in readme
    assert "docker build -f docker/Dockerfile.pip -t tfbench:pip ." in readme
    assert "--gpus all" in readme and "--shm-size" in readme
