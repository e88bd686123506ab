"""tfbench: TensorFlow 2 / Keras 3 image-classification benchmarks, tf_cnn_benchmarks drop-in.

TensorFlow is deliberately not a hard requirement: which distribution fits depends on the machine,
and pip cannot tell them apart (a `tensorflow` requirement is not satisfied by `tensorflow-cpu`,
so it would install a second TensorFlow over the first). Pick the line that matches the machine:
  pip install ".[cpu]"      CPU-only machine (tensorflow-cpu)
  pip install ".[gpu]"      GPU VM (tensorflow[and-cuda]: CUDA libraries as wheels)
  pip install ".[tf]"       the full tensorflow wheel without CUDA libraries: it runs on CPU-only
                            machines and registers its GPU kernels there, which a test checks, so
                            the test command installs it: pip install -e ".[tf,test]"
  TensorFlow already installed (an NVIDIA TensorFlow container, or your own):
    python -m tfbench.pins > /tmp/tf-pins.txt && pip install . -c /tmp/tf-pins.txt
  No extra there: with one, pip may replace the installed TensorFlow to satisfy another
  requirement; and plain `pip install .` lets pip upgrade numpy for the newest pandas past what
  TensorFlow 2.17 (the last NVIDIA container's) was built for. The constraints keep the installed
  TensorFlow and every package it depends on exactly as they are; for the tests there, use
  pip install -e ".[test]" -c /tmp/tf-pins.txt.
"""

import glob
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

TF_RANGE = ">=2.17,<2.22"
PSYCOPG = "psycopg[binary]>=3.1,<3.4"
# The presets and helper scripts, kept once in the checkout (flags/, scripts/) and copied into the
# built package as tfbench/presets/ (tfbench.config.presets finds them from any directory).
PRESETS = ("flags/**/*.flags", "scripts/*.sh")


class BuildPyWithPresets(build_py):
    """build_py, then the presets into the built package; an editable install reads the
    checkout's own flags/ and scripts/ instead."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for pattern in PRESETS:
            for path in sorted(glob.glob(pattern, recursive=True)):
                target = os.path.join(self.build_lib, "tfbench", "presets", path)
                self.mkpath(os.path.dirname(target))
                self.copy_file(path, target)   # keeps the scripts' executable bit

setup(
    name="tfbench",
    version="0.1.0",
    description="TensorFlow 2 / Keras 3 image-classification benchmarks; a drop-in replacement "
                "for tf_cnn_benchmarks.py",
    long_description=__doc__,
    python_requires=">=3.10",
    packages=find_packages(include=["tfbench", "tfbench.*"]),
    package_data={"tfbench.measure": ["reference_data/*.csv", "model_stats.csv"]},
    cmdclass={"build_py": BuildPyWithPresets},
    # Upper ends: just past the newest release the suite has passed on (.ci/run's fresh venv), so
    # that a new release cannot turn a fresh install red overnight; moving one is a tested
    # change (docs/layout.md, "Dependency ranges").
    install_requires=[
        "absl-py>=1.0,<3",
        "numpy>=1.23,<2.5",
        "pandas>=1.5,<3.2",
        "psutil>=5.9,<8",
        "nvidia-ml-py>=12.0,<14",
        "matplotlib>=3.6,<3.12",
        "rich>=13,<16",          # the sweep's progress bar, console tables (Keras 3 installs it too)
        "tabulate>=0.9,<0.11",   # pandas' DataFrame.to_markdown (report and sweep tables)
        "scipy>=1.10,<1.18",     # the history's change points: Student's t distribution
        "SQLAlchemy>=2.0,<2.2",  # the results history (SQLite built in; PostgreSQL: extra)
    ],
    extras_require={
        "cpu": ["tensorflow-cpu" + TF_RANGE],
        "gpu": ["tensorflow[and-cuda]" + TF_RANGE],
        "tf": ["tensorflow" + TF_RANGE],
        "tfds": ["tensorflow-datasets"],
        # pytest 9.2 runs a loadgroup's module fixture once per worker with pytest-xdist 3.8
        # (xdist renames items through Item._nodeid, which 9.2 no longer reads).
        "postgresql": [PSYCOPG],   # a team's history on a PostgreSQL server
        "test": ["pytest>=9.0,<9.2", "pytest-xdist>=3.8,<3.9", PSYCOPG],
    },
    entry_points={
        "console_scripts": [
            "tfbench=tfbench.cli:entry_point",
            "tf_cnn_benchmarks=tfbench.cli:entry_point",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
    ],
)
