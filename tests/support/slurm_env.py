"""A Slurm step's environment: task 2 of a 3-node job step on dgx[8-10], 8 GPUs each (what
srun sets; tests of tfbench.distribute.slurm, strategy and devices)."""

SLURM_TASK_2 = {
    "SLURM_JOB_ID": "48213", "SLURM_STEP_ID": "0", "SLURM_PROCID": "2", "SLURM_LOCALID": "0",
    "SLURM_NODEID": "2", "SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NODELIST": "dgx[8-10]",
    "SLURM_JOB_NODELIST": "dgx[8-10]", "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
    "SLURM_TASKS_PER_NODE": "1(x3)", "SLURMD_NODENAME": "dgx10", "SLURM_GPUS_ON_NODE": "8",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
}
