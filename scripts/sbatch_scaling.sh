#!/usr/bin/env bash
# Cross-host scaling under Slurm: one benchmark on 1, 2, 4, ... nodes up to the job's, one task
# per node driving every GPU Slurm gave it (MultiWorkerMirroredStrategy; each task takes the
# cluster from srun's SLURM_STEP_* variables), then the scaling table from the chiefs' rows.
#
#   sbatch --nodes=4 scripts/sbatch_scaling.sh --model=resnet50 --batch_size=256 --precision=fp16
#   TFBENCH="apptainer exec --nv tfbench.sif tfbench" sbatch --nodes=8 scripts/sbatch_scaling.sh
#
# Every step's tasks log to $dir/nodes<N>_task<T>.log (task 0's is the chief's classic log, its
# `total images/sec` counting every node) and append their rows to $dir/task<T>.csv; the table
# is `tfbench report $dir/task0.csv`. $dir (TFBENCH_OUT, default tfbench_scaling_<job id>) must be
# on storage every node sees, as sbatch's working directory usually is. The one-node step runs
# as a one-worker cluster, so that every point runs the same strategy and all-reduce.
# TFBENCH (default tfbench) is how a node starts tfbench.
#SBATCH --job-name=tfbench-scaling
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --time=01:00:00
#SBATCH --output=tfbench-scaling-%j.out
set -euo pipefail

tfbench=${TFBENCH:-tfbench}
dir=${TFBENCH_OUT:-tfbench_scaling_${SLURM_JOB_ID:?run this with sbatch or inside salloc}}
total=${SLURM_JOB_NUM_NODES:?run this with sbatch or inside salloc}
mkdir -p "$dir"

counts=""
n=1
while [ "$n" -lt "$total" ]; do counts="$counts $n"; n=$((n * 2)); done
counts="$counts $total"

status=0
for n in $counts; do
  one_node=()
  if [ "$n" -eq 1 ]; then
    one_node=(--job_name=worker --worker_hosts="127.0.0.1:$((12000 + SLURM_JOB_ID % 20000))"
              --task_index=0)
  fi
  echo "== $n node(s)"
  # --kill-on-bad-exit: a failed task ends the step; the others write their rows on SIGTERM.
  srun --nodes="$n" --ntasks="$n" --ntasks-per-node=1 --kill-on-bad-exit=1 \
       --output="$dir/nodes${n}_task%t.log" \
       bash -c 'exec '"$tfbench"' "$@" --csv_file="'"$dir"'/task${SLURM_PROCID}.csv"' tfbench \
       --variable_update=collective_all_reduce ${one_node[@]+"${one_node[@]}"} "$@" \
    || status=$?
  tail -n 2 "$dir/nodes${n}_task0.log" | head -n 1 || true
done
$tfbench report "$dir/task0.csv" --out "$dir/report"
exit "$status"
