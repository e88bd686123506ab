"""Where the parts of the checkout are, for the tests and the scripts they start.

Importing it puts the checkout's root first on sys.path, so a check script started as
`python tests/support/NAME.py` (its own folder first on sys.path) imports the tfbench it sits
beside, not an installed one; and benchmarks/ last, so the tests import what only they and the
benchmarks use (benchmarks/step_graph.py, `import step_graph`) by name.
"""

import os
import sys

SUPPORT = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(SUPPORT))
DATA = os.path.join(SUPPORT, "data")
FAKE_PYNVML_DIR = os.path.join(SUPPORT, "fake_pynvml")
BENCHMARKS = os.path.join(ROOT, "benchmarks")

if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)
