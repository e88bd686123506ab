#!/usr/bin/env bash
# GPU smoke test: exercises the code paths that CI (CPU only) runs on logical CPU devices.
# Run on a machine with NVIDIA GPUs after `pip install ".[gpu]"` (or inside the NGC container).
# Each check prints PASS/FAIL; the script exits non-zero if any failed.
set -u
OUT=${OUT:-$(mktemp -d /tmp/tfbench-gpu-smoke.XXXX)}
NGPU=$(python3 -c "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))" 2>/dev/null)
echo "results in $OUT; GPUs visible to TensorFlow: ${NGPU:-0}"
[ "${NGPU:-0}" -ge 1 ] || { echo "FAIL: no GPU visible to TensorFlow"; exit 1; }
fails=0
check() {  # name, then tfbench arguments
  local name=$1; shift
  if tfbench --csv_file="$OUT/smoke.csv" --json_dir="$OUT/runs" "$@" >"$OUT/$name.log" 2>&1 \
      && [ "$(tail -n 2 "$OUT/$name.log" | head -n 1 | cut -d' ' -f1-2)" = "total images/sec:" ]; then
    echo "PASS $name: $(tail -n 2 "$OUT/$name.log" | head -n 1)"
  else
    echo "FAIL $name (see $OUT/$name.log)"; fails=$((fails + 1))
  fi
}
tfbench env > "$OUT/env.txt" 2>&1 && grep -E "GPU|driver" "$OUT/env.txt" | head -5
S="--model=resnet50 --batch_size=64 --num_batches=30 --num_warmup_batches=5"
check one_gpu_fp32 --device=gpu $S
check one_gpu_fp16 --device=gpu $S --use_fp16 --fp16_enable_auto_loss_scale
check one_gpu_bf16_xla --device=gpu $S --precision=bf16 --xla
check forward_bs1 --device=gpu --model=resnet50 --forward_only --batch_size=1 --num_batches=100
check forward_unfolded --device=gpu $S --forward_only --nofold_batch_norm
check forward_folded_fp16 --device=gpu $S --forward_only --use_fp16
check nchw_explicit --device=gpu $S --data_format=NCHW
check application_fused_bn_nchw --device=gpu --model=mobilenet_v2 --batch_size=64 --num_batches=30 --data_format=NCHW
if [ "$NGPU" -ge 2 ]; then
  check mirrored_all --device=gpu $S --num_gpus="$NGPU" --variable_update=replicated --all_reduce_spec=nccl
  check central_storage --device=gpu $S --num_gpus=2 --variable_update=parameter_server --local_parameter_device=cpu
  check mirrored_xla_fp16 --device=gpu $S --num_gpus=2 --variable_update=replicated --use_fp16 --xla
  check default_variables_xla --device=gpu $S --num_gpus=2 --xla
  check mirrored_forward_folded --device=gpu $S --num_gpus=2 --forward_only
fi
check memory_cap --device=gpu $S --gpu_memory_limit_mb=4096
# NVML power sampling and device memory statistics must have landed in the CSV.
python3 - "$OUT/smoke.csv" <<'PY' || fails=$((fails + 1))
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok"]
ok = rows and all(r["peak_mem_gb"] and r["power_w_mean"] for r in rows)
print(("PASS" if ok else "FAIL") + " NVML power and device memory in CSV (%d rows)" % len(rows))
sys.exit(0 if ok else 1)
PY
echo "$fails failed"
exit $((fails > 0))
