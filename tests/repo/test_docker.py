"""The Dockerfiles agree with the package: install command, extras, entry point."""

import os
import re

import pytest

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
    # no TensorFlow extra (only the history's PostgreSQL driver), and the installed
    # TensorFlow's packages pinned: as the README says
    assert installs == ["RUN python3 -m tfbench.pins > /tmp/tf-pins.txt && "
                        'pip install --no-cache-dir ".[postgresql]" -c /tmp/tf-pins.txt']
    assert lines.index("COPY . /opt/tfbench") < lines.index("WORKDIR /opt/tfbench") < \
        lines.index(installs[0]) < lines.index("WORKDIR /workspace")
    with open(os.path.join(ROOT, "README.md")) as handle:
        assert "`python -m tfbench.pins > /tmp/tf-pins.txt && pip install . -c " \
               "/tmp/tf-pins.txt`" in handle.read()


def test_pip_dockerfile_installs_the_gpu_extra():
    lines = _instructions(_read("Dockerfile.pip"))
    assert any(re.search(r'pip install .*"/opt/tfbench\[gpu,postgresql\]"', l) for l in lines)
    assert '"gpu": ["tensorflow[and-cuda]"' in _setup_text()


def test_pip_image_starts_on_every_driver_the_cuda_wheels_support():
    # A CUDA base image's NVIDIA_REQUIRE_CUDA makes the container toolkit refuse drivers older
    # than its CUDA (nvidia/cuda:12.8 needs 570+); the wheels' CUDA 12 runs from 525.60.13 on.
    text = _read("Dockerfile.pip")
    lines = _instructions(text)
    assert lines[0] == "FROM ubuntu:24.04"
    assert "NVIDIA_REQUIRE_CUDA" not in "\n".join(lines)
    env = " ".join(l for l in lines if l.startswith("ENV") or l.startswith("NVIDIA_"))
    assert "NVIDIA_VISIBLE_DEVICES=all" in env
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in env
    assert "525.60.13" in text


def test_the_cuda_wheels_are_cuda_12():
    # The driver floor above (CUDA 12 minor-version compatibility) holds for these pins.
    from importlib import metadata
    try:
        requires = metadata.requires("tensorflow") or []
    except metadata.PackageNotFoundError:
        pytest.skip("the full tensorflow distribution is not installed")
    cuda = [r for r in requires if 'extra == "and-cuda"' in r.replace("'", '"')]
    if not cuda:
        pytest.skip("this tensorflow has no and-cuda extra")
    names = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in cuda]
    assert all(n.endswith("-cu12") for n in names), names


def test_entry_points_exist_in_setup():
    setup = _setup_text()
    entry = [l for l in _instructions(_read("Dockerfile.pip")) if l.startswith("ENTRYPOINT")]
    assert entry == ['ENTRYPOINT ["tfbench"]']
    assert '"tfbench=tfbench.cli:entry_point"' in setup
    assert '"tf_cnn_benchmarks=tfbench.cli:entry_point"' in setup


def test_ngc_image_keeps_nvidias_entrypoint_in_front():
    # It sets up CUDA forward compatibility on older drivers; tfbench runs behind it.
    entry = [l for l in _instructions(_read("Dockerfile")) if l.startswith("ENTRYPOINT")]
    assert entry == ['ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "tfbench"]']


def test_readme_shows_build_and_run():
    with open(os.path.join(ROOT, "README.md")) as handle:
        readme = handle.read()
    assert "docker build -f docker/Dockerfile -t tfbench:ngc ." in readme
    assert "docker build -f docker/Dockerfile.pip -t tfbench:pip ." in readme
    assert "--gpus all" in readme and "--shm-size" in readme


def test_readme_says_which_driver_each_image_needs():
    with open(os.path.join(ROOT, "README.md")) as handle:
        readme = handle.read()
    section = readme[readme.index("### In an NVIDIA TensorFlow container, or with Docker"):]
    section = section[:section.index("\n## ")]
    assert "570" in section and "forward compatibility" in section
    assert "525.60.13" in section and "ubuntu:24.04" in section


def test_the_tfjob_manifest_runs_the_image_with_flags_tfbench_accepts():
    """docker/tfjob.yaml: the image built from docker/Dockerfile, flags tfbench parses, and no
    TF_CONFIG of its own (the operator sets it; test_cluster parses the operator's format)."""
    import json
    from tfbench.config.argv import parse_settings
    text = _read("tfjob.yaml")
    lines = [l.strip() for l in text.splitlines() if not l.strip().startswith("#")]
    assert "kind: TFJob" in lines and "- name: tensorflow    # the operator's default " \
                                      "container name" in lines
    assert "image: registry.example.com/tfbench:ngc" in lines
    (args_line,) = [l for l in lines if l.startswith("args: ")]
    args = json.loads(args_line[len("args: "):])
    p = parse_settings(["tfbench"] + args)
    assert p.devices.variable_update == "collective_all_reduce" \
        and p.cluster.cluster_timeout_secs >= 600
    assert "TF_CONFIG" not in text.replace("gives every pod TF_CONFIG", "")
    assert "ENTRYPOINT [\"/opt/nvidia/nvidia_entrypoint.sh\", \"tfbench\"]" in _read("Dockerfile")
