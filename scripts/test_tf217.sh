#!/usr/bin/env bash
# The install story on TensorFlow 2.17 (the TF of the last NVIDIA container, 25.02), on CPU, in
# its own virtual environment, done as the README says for a machine that already has TensorFlow:
#   1. TensorFlow first (tensorflow-cpu 2.17.1 stands in for the container's),
#   2. then tfbench, with the constraints `python -m tfbench.pins` prints (and the test extra).
# Fails if step 2 changed the version of any package installed in step 1 (TensorFlow and all it
# depends on), then runs a benchmark and the test suite. Usage: scripts/test_tf217.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/tmp/tfbench-tf217}
KERAS=${KERAS:-keras==3.8.0}   # a Keras 3 release of the TF 2.17 era, as NVIDIA 25.02 ships Keras 3
MARK="$VENV/.made-by-test_tf217"
if [ -e "$VENV" ] && [ ! -e "$MARK" ]; then   # never clear a directory this script did not make
    echo "test_tf217.sh: $VENV exists and was not made by this script; set VENV" >&2
    exit 2
fi
python3 -m venv --clear "$VENV"
touch "$MARK"
export PATH="$VENV/bin:$PATH"   # as activated: the README's python and pip, and the tests' python
PINS="$VENV/tf-pins.txt"

# Step 1: TensorFlow alone, as a container has it.
pip install -q "tensorflow-cpu==2.17.1" "$KERAS"
pip list --format=freeze > "$VENV/before.txt"

# Step 2: the README's lines for TensorFlow already installed (its test variant).
python -m tfbench.pins > "$PINS" && pip install -q -e ".[test]" -c "$PINS"
pip list --format=freeze > "$VENV/after.txt"

python - "$VENV/before.txt" "$VENV/after.txt" <<'EOF'
import re, sys
def versions(path):
    pairs = (line.strip().split("==", 1) for line in open(path) if "==" in line)
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in pairs}
before, after = versions(sys.argv[1]), versions(sys.argv[2])
changed = ["%s %s -> %s" % (n, v, after.get(n, "removed")) for n, v in sorted(before.items())
           if after.get(n) != v]
if changed:
    sys.exit("installing tfbench changed packages TensorFlow had: " + ", ".join(changed))
print("installing tfbench changed none of the %d packages TensorFlow had; added: %s" % (
    len(before), " ".join(sorted("%s==%s" % (n, v) for n, v in after.items() if n not in before))))
EOF

python -c "import tensorflow as tf, keras; print('TensorFlow', tf.__version__, '/ Keras', keras.__version__)"
(cd "$VENV" && tfbench --device=cpu --model=trivial --num_batches=5 --image_size=32 --csv_file= \
    --json_dir= --history= | tail -2)
python -m pytest -q tests "$@"
