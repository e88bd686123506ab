#!/usr/bin/env bash
# Runs the test suite on TensorFlow 2.17 (the TF of the last NVIDIA container, 25.02) on CPU,
# in its own virtual environment. Usage: scripts/test_tf217.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/tmp/tfbench-tf217}
KERAS=${KERAS:-keras==3.8.0}   # a Keras 3 release of the TF 2.17 era, as NVIDIA 25.02 ships Keras 3
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "tensorflow-cpu==2.17.1" "$KERAS" -e ".[test]"
"$VENV/bin/python" -c "import tensorflow as tf, keras; print('TensorFlow', tf.__version__, '/ Keras', keras.__version__)"
"$VENV/bin/python" -m pytest -q tests "$@"
