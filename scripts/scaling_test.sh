#!/usr/bin/env bash
# The usual scaling study in one command: 1 GPU against all visible GPUs (and the powers of two
# in between), each point in its own process, then the throughput / speed-up / efficiency table.
#
#   scripts/scaling_test.sh [--strong] [tfbench flags ...]
#   scripts/scaling_test.sh --model=resnet50 --batch_size=128 --precision=fp16
#   TFBENCH_NUM_GPUS=2 scripts/scaling_test.sh --device=cpu --model=trivial --image_size=32 \
#       --all_reduce_spec=pscpu --num_batches=20     # no GPU: 2 logical CPU devices
#
# Weak scaling (per-device batch fixed, as tf_cnn_benchmarks) unless --strong, which keeps
# --batch_size as the global batch. Base flags: flags/scaling_study.flags, overridable by the
# flags given here. GPUs are counted as CUDA will see them: those NVML lists, narrowed by
# CUDA_VISIBLE_DEVICES when it is set (`python3 -m tfbench.measure.nvml`; TFBENCH_PYTHON
# picks another interpreter); TFBENCH_NUM_GPUS overrides the count.
# TFBENCH (default: `tfbench` if on PATH, else `python3 -m tfbench`) picks the command.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gpus="${TFBENCH_NUM_GPUS:-}"
if [ -z "$gpus" ]; then
  # tfbench's own reader of CUDA_VISIBLE_DEVICES (the driver's rules) counts them through NVML.
  gpus="$(PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "${TFBENCH_PYTHON:-python3}" \
            -m tfbench.measure.nvml 2>/dev/null || true)"
fi
if ! [ "$gpus" -ge 1 ] 2>/dev/null; then
  hidden=""
  if [ -z "${TFBENCH_NUM_GPUS:-}" ] && [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    hidden=" visible with CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES'"
  fi
  echo "scaling_test.sh: no GPU found$hidden; set TFBENCH_NUM_GPUS=N (with --device=cpu for N" \
       "logical CPU devices)" >&2
  exit 2
fi

counts="1"
n=2
while [ "$n" -lt "$gpus" ]; do counts="$counts,$n"; n=$((n * 2)); done
if [ "$gpus" -gt 1 ]; then counts="$counts,$gpus"; fi

scaling="weak"
args=()
for arg in "$@"; do
  case "$arg" in
    --strong|--scaling=strong) scaling="strong" ;;
    *) args+=("$arg") ;;
  esac
done

if [ -n "${TFBENCH:-}" ]; then
  read -r -a cmd <<< "$TFBENCH"
elif command -v tfbench >/dev/null 2>&1; then
  cmd=(tfbench)
else
  cmd=(python3 -m tfbench)
  export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
fi

exec "${cmd[@]}" sweep --flagfile="$here/flags/scaling_study.flags" \
  --sweep="num_gpus=$counts" --scaling="$scaling" ${args[@]+"${args[@]}"}
