"""A cluster from a Slurm step (tfbench.distribute.slurm, read by tfbench.distribute.cluster)."""

import json

import pytest

from tfbench.distribute import cluster
from tfbench.distribute import slurm
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings
from slurm_env import SLURM_TASK_2


def _plan(env=None, **flags):
    return cluster.read_cluster(make_settings(flags), environ=env or {})


# An srun step of 3 tasks, one per node (`srun -N3 --ntasks-per-node=1 tfbench ...` in job
# 48213), as seen by task 2: Slurm's documented variables in the forms slurmstepd writes them
# (composed from the srun/sbatch manual pages, not captured on a cluster).


@pytest.mark.parametrize("text,hosts", [
    ("dgx[8-10]", ["dgx8", "dgx9", "dgx10"]),
    ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
    ("a100-[09-10]-ib,h100-2", ["a100-09-ib", "a100-10-ib", "h100-2"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
])
def test_slurm_host_lists_expand_in_slurms_order(text, hosts):
    assert slurm.expand_hostlist(text) == hosts


def test_a_slurm_step_makes_one_worker_per_node_in_node_list_order():
    plan = _plan(SLURM_TASK_2)
    port = 12000 + (48213 + 0) % 20000
    assert plan.source == "Slurm" and plan.mode == cluster.MULTI_WORKER
    assert plan.job_dict == {"worker": ["dgx8:%d" % port, "dgx9:%d" % port, "dgx10:%d" % port]}
    assert (plan.task_type, plan.task_index, plan.address) == ("worker", 2, "dgx10:%d" % port)
    assert plan.notices == ("Cluster from Slurm (job 48213, step 0): 3 workers on dgx[8-10], "
                            "this task worker 2 at dgx10:%d" % port,)
    reserved = dict(SLURM_TASK_2, SLURM_STEP_RESV_PORTS="31000-31002")
    assert _plan(reserved).address == "dgx10:31000"


def test_tensorflows_slurm_resolver_would_give_task_0_the_wrong_host(monkeypatch):
    """Why tfbench reads the variables itself: TF's resolver orders hosts as strings, so the
    task Slurm started on dgx8 (task 0) would take dgx10's address."""
    import tensorflow as tf
    for name, value in dict(SLURM_TASK_2, SLURM_PROCID="0", SLURMD_NODENAME="dgx8").items():
        monkeypatch.setenv(name, value)
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
        gpus_per_node=8, auto_set_gpu=False)
    assert resolver.cluster_spec().as_dict()["worker"][0] == "dgx10:8888"
    assert _plan(dict(SLURM_TASK_2, SLURM_PROCID="0", SLURMD_NODENAME="dgx8")).address \
        .startswith("dgx8:")


def test_no_slurm_cluster_outside_a_step_of_several_tasks_or_under_horovod():
    batch_script = {k: v for k, v in SLURM_TASK_2.items() if not k.startswith("SLURM_STEP")}
    assert _plan(batch_script) is None
    assert _plan(dict(SLURM_TASK_2, SLURM_STEP_NUM_TASKS="1", SLURM_PROCID="0")) is None
    assert _plan(SLURM_TASK_2, variable_update="horovod") is None   # horovod reads Slurm itself


def test_flags_and_tf_config_take_precedence_over_slurm():
    assert _plan(SLURM_TASK_2, job_name="worker", worker_hosts="x:1").source == "flags"
    tf_config = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker",
                                                                     "index": 0}})
    assert _plan(dict(SLURM_TASK_2, TF_CONFIG=tf_config)).source == "TF_CONFIG"


@pytest.mark.parametrize("changes,needle", [
    ({"SLURM_STEP_TASKS_PER_NODE": "2,1", "SLURM_STEP_NODELIST": "dgx[8-9]"},
     "one task per host under Slurm, and this step has 2 on a host: start it with srun "
     "--ntasks-per-node=1"),
    ({"SLURMD_NODENAME": "dgx9"}, "Slurm placed task 2 on dgx9, but the step's node list "
                                  "(dgx[8-10]) puts it on dgx10"),
    ({"SLURM_STEP_NODELIST": "dgx[8-9]"}, "SLURM_STEP_NODELIST (2 hosts) and "
                                          "SLURM_STEP_TASKS_PER_NODE=1(x3) do not agree"),
    ({"SLURM_STEP_NODELIST": "dgx[8-"}, "Slurm host list 'dgx[8-': unbalanced brackets"),
])
def test_a_slurm_step_tfbench_cannot_run_is_one_clear_error(changes, needle):
    with pytest.raises(UsageError) as err:
        _plan(dict(SLURM_TASK_2, **changes))
    assert needle in str(err.value)
