"""What the tests' fork server (tests/support/zygote.py) imports once: what `python -m tfbench`
imports before its first step, the frameworks the way tfbench.engine.lean_import imports them."""

import os

_BEFORE = dict(os.environ)

from tfbench.engine import lean_import  # noqa: E402

lean_import.import_frameworks()

import tfbench.cli.run  # noqa: E402,F401

# What importing them set in the environment (TensorFlow sets TPU_ML_PLATFORM*): a fresh
# process has it on top of the environment it was started with, and so does each child.
SET_BY_IMPORT = {k: v for k, v in os.environ.items() if _BEFORE.get(k) != v}
