"""tfbench: TensorFlow 2 / Keras 3 image-classification benchmarks, tf_cnn_benchmarks drop-in.

TensorFlow is deliberately not a hard requirement, so installing into an NVIDIA TensorFlow
container reinstalls nothing. Pick the extra that matches the machine:
  pip install ".[cpu]"   CPU-only machine (tensorflow-cpu)
  pip install ".[gpu]"   GPU VM (tensorflow[and-cuda]: CUDA libraries as wheels)
  pip install .          a machine or container that already has TensorFlow 2.17+
"""

from setuptools import find_packages, setup

TF_RANGE = ">=2.17,<2.22"

setup(
    name="tfbench",
    version="0.1.0",
    description="TensorFlow 2 / Keras 3 image-classification benchmarks; a drop-in replacement "
                "for tf_cnn_benchmarks.py",
    long_description=__doc__,
    python_requires=">=3.10",
    packages=find_packages(include=["tfbench", "tfbench.*"]),
    package_data={"tfbench": ["reference_data/*.csv"]},
    install_requires=[
        "absl-py>=1.0",
        "numpy>=1.23",
        "pandas>=1.5",
        "psutil>=5.9",
        "nvidia-ml-py>=12.0",
        "matplotlib>=3.6",
    ],
    extras_require={
        "cpu": ["tensorflow-cpu" + TF_RANGE],
        "gpu": ["tensorflow[and-cuda]" + TF_RANGE],
        "tfds": ["tensorflow-datasets"],
        "test": ["pytest>=7"],
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
