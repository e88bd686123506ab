#!/usr/bin/env python3
"""Legacy path: `python scripts/tf_cnn_benchmarks.py --model=resnet50 ...` runs tfbench."""

import os
import sys

# Works from a checkout without installing: the package sits one directory up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tfbench.cli import entry_point  # noqa: E402

if __name__ == "__main__":
    entry_point()
