#!/usr/bin/env bash
# GPU smoke test: the GPU-only code paths that CI (CPU only) can exercise only on logical CPU
# devices, run for real. One PASS/FAIL line per check; exits non-zero if any failed. About 5-8
# minutes on one GPU, longer with several, and a few minutes more in NVIDIA's TensorFlow container,
# where the TF-TRT conversions run. Run on a machine with NVIDIA GPUs after
# `pip install ".[gpu]"`, or inside the NVIDIA TensorFlow container after (keeping its TensorFlow)
#   python -m tfbench.pins > /tmp/tf-pins.txt && pip install . -c /tmp/tf-pins.txt
#   scripts/gpu_smoke.sh            results in a new /tmp/tfbench-gpu-smoke.XXXX
#   OUT=/some/dir scripts/gpu_smoke.sh
set -u
OUT=${OUT:-$(mktemp -d /tmp/tfbench-gpu-smoke.XXXX)}
mkdir -p "$OUT"
NGPU=$(python3 -c "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))" 2>/dev/null)
echo "results in $OUT; GPUs visible to TensorFlow: ${NGPU:-0}"
if [ "${NGPU:-0}" -lt 1 ]; then
  echo "FAIL no GPU visible to TensorFlow (driver, --gpus all, CUDA_VISIBLE_DEVICES?)"
  exit 1
fi
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# run NAME ARGS...: one tfbench run with its own log, CSV and JSON directory.
run() {
  local name=$1; shift
  tfbench --csv_file="$OUT/$name.csv" --json_dir="$OUT/$name" "$@" >"$OUT/$name.log" 2>&1
}

# check NAME ARGS...: the run must exit 0 and end with the legacy footer.
check() {
  local name=$1; shift
  if run "$name" "$@" \
      && [ "$(tail -n 2 "$OUT/$name.log" | head -n 1 | cut -d' ' -f1-2)" = "total images/sec:" ]; then
    pass "$name: $(tail -n 2 "$OUT/$name.log" | head -n 1)"
  else
    fail "$name (see $OUT/$name.log)"
  fi
}

# manifest NAME PYTHON-EXPRESSION MESSAGE: evaluate the expression on the run's JSON manifest
# (`m`, with `x = m["extra"]`); PASS when true.
manifest() {
  local name=$1 expr=$2 message=$3
  if python3 - "$OUT/$name" "$expr" <<'PY'
import glob, json, sys
paths = sorted(glob.glob(sys.argv[1] + "/*.json"))
m = json.load(open(paths[-1])) if paths else {"extra": {}}
x = m["extra"]
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
  then pass "$message"; else fail "$message (see $OUT/$name)"; fi
}

tfbench env > "$OUT/env.txt" 2>&1 && grep -E "GPU|driver" "$OUT/env.txt" | head -5
R50="--model=resnet50 --batch_size=32 --num_batches=30 --num_warmup_batches=5"

# 1. The default training run (no --device: the GPU path with SGD and weight decay).
check default_training $R50
manifest default_training 'm["device_kind"] == "gpu" and m["status"] == "ok"' \
  "default_training ran on the GPU"
# 2. Device memory is the GPU's allocator peak (GiB), never host memory, and the steady-state
#    peak excludes the warm-up's autotuning scratch.
manifest default_training \
  'x["peak_mem_source"] == "device" and 0 < x["peak_mem_gb"] <= x["warmup_peak_mem_gb"]' \
  "device_memory: steady-state peak from the device allocator, warm-up peak apart"
# 3. NVML power sampling in the CSV.
manifest default_training 'x.get("power_w_mean") is not None' "nvml_power: mean power recorded"
check fp16_dynamic $R50 --use_fp16 --fp16_enable_auto_loss_scale --train_dir="$OUT/ckpt"
# The global step advances under dynamic loss scaling (5 warm-up + 30 timed steps).
if [ -e "$OUT/ckpt/model.ckpt-35.index" ]; then pass "fp16_dynamic_global_step: model.ckpt-35 written"
else fail "fp16_dynamic_global_step: no model.ckpt-35 in $OUT/ckpt"; fi
check bf16_xla $R50 --precision=bf16 --xla
check forward_bs1 --model=resnet50 --forward_only --batch_size=1 --num_batches=100
check forward_unfolded $R50 --forward_only --nofold_batch_norm
check nchw_explicit $R50 --data_format=NCHW
check application_fused_bn_nchw --model=mobilenet_v2 --batch_size=64 --num_batches=30 --data_format=NCHW

if [ "$NGPU" -ge 2 ]; then
  # 4. Each replica's synthetic batch lives on its own GPU (not copied from GPU:0 every step).
  if python3 - <<'PY'
import tensorflow as tf
from tfbench.engine import steps
gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
strategy = tf.distribute.MirroredStrategy(gpus)
images = steps.synthetic_images(strategy, 2, 8, "float32")
got = [tf.DeviceSpec.from_string(v.device).device_index
       for v in strategy.experimental_local_results(images)]
print("replica batches on GPUs %s" % got)
raise SystemExit(0 if got == list(range(len(gpus))) else 1)
PY
  then pass "per_replica_input_placement"; else fail "per_replica_input_placement"; fi
  # 5. fp16 with dynamic loss scaling on all GPUs, with the legacy default variables (central
  #    storage) and replicated; XLA on all GPUs.
  check fp16_dynamic_all_default $R50 --num_gpus="$NGPU" --use_fp16 --fp16_enable_auto_loss_scale
  check fp16_dynamic_all_replicated $R50 --num_gpus="$NGPU" --variable_update=replicated \
    --all_reduce_spec=nccl --use_fp16 --fp16_enable_auto_loss_scale
  check xla_all $R50 --num_gpus="$NGPU" --variable_update=replicated --use_fp16 --xla
  check default_variables_xla $R50 --num_gpus=2 --xla
  check central_storage_cpu $R50 --num_gpus=2 --variable_update=parameter_server --local_parameter_device=cpu
  check mirrored_forward_folded $R50 --num_gpus=2 --forward_only
  manifest fp16_dynamic_all_default \
    'x["peak_mem_source"] == "device" and len([v for v in x["device_peak_mem_gb"].values() if v]) == m["num_devices"]' \
    "device_memory_all: every GPU reports its own peak"
fi

# 6. A memory cap: a small run fits under 4 GiB; a large one must end as OOM, cleanly.
check memory_cap_fits --model=resnet50 --batch_size=8 --num_batches=20 --use_fp16 --gpu_memory_limit_mb=4096
run memory_cap_oom --model=resnet50 --batch_size=512 --num_batches=5 --gpu_memory_limit_mb=1024
code=$?
if [ "$code" -eq 3 ] && grep -q '^tfbench: error: Out of memory' "$OUT/memory_cap_oom.log" \
    && ! grep -q '^Traceback' "$OUT/memory_cap_oom.log" \
    && grep -q ',oom,' "$OUT/memory_cap_oom.csv"; then
  pass "memory_cap_oom: exit 3, one error line, CSV status oom"
else
  fail "memory_cap_oom: exit $code (want 3 and a CSV row with status oom; see $OUT/memory_cap_oom.log)"
fi

# 7. Inference as deployed: the SavedModel serving path, then TF-TRT where this TensorFlow has
#    TensorRT (NVIDIA's TensorFlow container); elsewhere --trt_mode must be one error line.
check saved_model_bs1 --model=resnet50 --forward_only --saved_model --batch_size=1 --num_batches=100
manifest saved_model_bs1 \
  'x["serving_path"] == "saved_model" and x["served_max_abs_diff"] < 1e-2 and x["export_sec"] > 0' \
  "saved_model: the served signature's logits are the in-process model's, export timed apart"
TRT_WHY=$(python3 -c "from tfbench.measure import tensorrt as t; print('; '.join(t.unavailable_reasons(t.read(), 'gpu')) or 'available')" 2>/dev/null | tail -n 1)
if [ "$TRT_WHY" = available ]; then
  check tftrt_fp16 $R50 --forward_only --trt_mode=FP16
  # Engines are built before warm-up: no step pays a build (tens of seconds for ResNet-50).
  manifest tftrt_fp16 \
    'x["trt_segments"] > 0 and x["trt_precisions"] == "FP16" and x["tensorrt_version"] and m["warmup_times"][0] < 10 and max(m["step_times"]) < 0.5' \
    "tftrt_fp16: TensorRT FP16 segments, built before the timed steps"
  # Every segment has its engine in the saved model: none failed to build (TensorRT 10 has no
  # implicit batch; the engines are built for a dynamic-shape profile of the run's batch).
  manifest tftrt_fp16 'x["trt_engines"] == x["trt_segments"] > 0' \
    "tftrt_fp16_engines: one TensorRT engine per segment"
  check tftrt_int8 $R50 --forward_only --trt_mode=INT8 --trt_calibration_batches=4
  manifest tftrt_int8 'x["trt_calibration_batches"] == 4 and "INT8" in x["trt_precisions"]' \
    "tftrt_int8: calibrated on 4 batches, INT8 engines"
  manifest tftrt_int8 'x["trt_engines"] == x["trt_segments"] > 0' \
    "tftrt_int8_engines: one calibrated TensorRT engine per segment"
  # The legacy script's own TF-TRT benchmark (leading_indicators_test.py).
  check tftrt_legacy --model=resnet50 --num_gpus=1 --distortions=False --forward_only=True \
    --freeze_when_forward_only=True --batch_size=128 --trt_mode=FP32 --num_batches=30 \
    --num_warmup_batches=5
  manifest tftrt_legacy 'x["trt_engines"] == x["trt_segments"] > 0' \
    "tftrt_legacy_engines: one TensorRT engine per segment"
else
  echo "SKIP tftrt: $TRT_WHY (TF-TRT runs in nvcr.io/nvidia/tensorflow:25.02-tf2-py3)"
  run tftrt_refused --model=resnet50 --forward_only --trt_mode=FP16 --num_batches=5
  code=$?
  if [ "$code" -eq 2 ] && [ "$(grep -c '^tfbench: error: --trt_mode=FP16 cannot run here' "$OUT/tftrt_refused.log")" -eq 1 ] \
      && ! grep -q '^Traceback' "$OUT/tftrt_refused.log"; then
    pass "tftrt_refused: exit 2, one error line"
  else
    fail "tftrt_refused: exit $code (want 2 and one error line; see $OUT/tftrt_refused.log)"
  fi
fi

# 8. tfbench validate --level=quick on every GPU: each step ran (whatever the host's verdict),
#    on several GPUs the all-reduce was timed in the training child, and the whole took at most
#    2 minutes on up to 8 GPUs; each step's seconds beside the plan's estimate, and what the
#    training child measured against the plan's GPU constants (ACHIEVED_FRACTION, REPLICA_S:
#    not yet measured, docs/validate.md), so a run records the real figures.
start=$(date +%s)
tfbench validate --level=quick --out_dir="$OUT/validate_quick" --csv_file= \
  >"$OUT/validate_quick.log" 2>&1
code=$?
took=$(( $(date +%s) - start ))
if [ "$code" -ne 2 ] && python3 - "$OUT/validate_quick" "$NGPU" <<'PY'
import glob, json, os, sys
from tfbench.validate import estimate
d = json.load(open(os.path.join(sys.argv[1], "validate.json")))
plan = {s["name"]: s["estimate_s"] for s in d["plan"]}
for s in d["steps"]:
    print("  %-14s %-8s %6.1f s, estimate %6.1f s" % (s["name"], s["status"], s["seconds"],
                                                      plan[s["name"]]))
manifests = sorted(glob.glob(os.path.join(sys.argv[1], "runs", "devices", "*.json")))
if manifests and d.get("estimate_basis"):
    measured = estimate.measured_against(d["estimate_basis"], json.load(open(manifests[-1])))
    print("  measured against the plan's constants: %s" % (measured or "no timed steps"))
busbw = [r for r in d["rows"] if r["check"] == "allreduce_busbw"]
ok = all(s["status"] == "ok" for s in d["steps"]) and (
    int(sys.argv[2]) < 2 or (busbw and busbw[0]["reason"] != "check_failed"))
sys.exit(0 if ok else 1)
PY
then
  if [ "$NGPU" -gt 8 ] || [ "$took" -le 120 ]; then
    pass "validate_quick: every step ran in ${took} s, exit $code (the verdicts: $OUT/validate_quick)"
  else
    fail "validate_quick: ${took} s on $NGPU GPUs, over 2 minutes (see $OUT/validate_quick/validate.json)"
  fi
else
  fail "validate_quick: exit $code after ${took} s (see $OUT/validate_quick.log)"
fi

echo "$fails failed"
exit $((fails > 0))
