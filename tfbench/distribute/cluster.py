"""A multi-host cluster and this process's place in it, from the legacy flags, TF_CONFIG or Slurm.

Three ways to describe a cluster, as the legacy script, TensorFlow and Slurm give it:
  --job_name=worker --worker_hosts=h1:p,h2:p --task_index=i       (MultiWorkerMirroredStrategy)
  --job_name=ps|worker|controller --ps_hosts=... --worker_hosts=... --controller_host=h:p
                                                                   (ParameterServerStrategy)
  TF_CONFIG='{"cluster": {...}, "task": {"type": ..., "index": ...}}'  (either, by its jobs)
  an srun step of several tasks, one per host (Slurm's SLURM_STEP_* variables; slurm.py)
                                                                   (MultiWorkerMirroredStrategy)

Parsing needs no TensorFlow; the waits on peers are in peers.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Mapping, Optional

from tfbench.config.settings import Settings
from tfbench.distribute import slurm
from tfbench.errors import UsageError

MULTI_WORKER = "multi_worker"
PARAMETER_SERVER = "parameter_server"



@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster and this process's place in it, in TensorFlow's job names."""

    jobs: tuple[tuple[str, tuple[str, ...]], ...]   # (job, addresses) in TF job names
    task_type: str                                   # chief | worker | ps
    task_index: int
    mode: str                                        # MULTI_WORKER | PARAMETER_SERVER
    source: str                                      # "flags" | "TF_CONFIG" | "Slurm"
    notices: tuple[str, ...] = ()                    # flags accepted but not used

    @property
    def job_dict(self) -> dict[str, list[str]]:
        return {job: list(addresses) for job, addresses in self.jobs}

    def addresses(self, job: str) -> tuple[str, ...]:
        return dict(self.jobs).get(job, ())

    @property
    def num_workers(self) -> int:
        """Tasks that run training steps: chief + workers under MWMS, workers under PS."""
        if self.mode == PARAMETER_SERVER:
            return len(self.addresses("worker"))
        return len(self.addresses("chief")) + len(self.addresses("worker"))

    @property
    def address(self) -> str:
        return self.addresses(self.task_type)[self.task_index]

    @property
    def label(self) -> str:
        """This task as the legacy flags name it (the chief is the controller)."""
        return task_label(self.task_type, self.task_index)

    @property
    def worker_rank(self) -> int:
        """This task's index among the training workers (the chief first under MWMS)."""
        if self.task_type == "worker" and self.mode == MULTI_WORKER:
            return len(self.addresses("chief")) + self.task_index
        return self.task_index

    def peers(self) -> list[tuple[str, str]]:
        """(label, address) of every other task."""
        return [(task_label(job, i), address) for job, addresses in self.jobs
                for i, address in enumerate(addresses)
                if (job, i) != (self.task_type, self.task_index)]

    def cluster_spec(self):
        import tensorflow as tf
        return tf.train.ClusterSpec(self.job_dict)

    def resolver(self, rpc_layer: str = "grpc", num_gpus: int = 0):
        """This task's resolver; num_gpus is its local GPU count.

        MultiWorkerMirroredStrategy computes on GPU:0..num_accelerators()["GPU"]-1 of each
        worker, and on CPU:0 without it.
        """
        import tensorflow as tf
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            self.cluster_spec(), task_type=self.task_type, task_id=self.task_index,
            rpc_layer=rpc_layer, num_accelerators={"GPU": num_gpus} if num_gpus else None)


def task_label(job: str, index: int) -> str:
    if job == "chief":
        return "controller" if index == 0 else "chief %d" % index
    return "%s %d" % (job, index)


# --- parsing --------------------------------------------------------------------------------

def parse_hosts(text: str, flag: str) -> tuple[str, ...]:
    """'h1:p1,h2:p2' -> ('h1:p1', 'h2:p2'); a scheme such as grpc:// is dropped."""
    hosts = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError("--%s: %r is not host:port" % (flag, item))
        hosts.append(item)
    return tuple(hosts)


def _from_flags(p: Settings) -> Optional[Cluster]:
    workers = parse_hosts(p.cluster.worker_hosts, "worker_hosts")
    ps = parse_hosts(p.cluster.ps_hosts, "ps_hosts")
    controller = parse_hosts(p.cluster.controller_host or "", "controller_host")
    job = p.cluster.job_name
    if not (workers or ps or job):
        if controller:
            raise UsageError("--controller_host needs --ps_hosts, --worker_hosts and "
                             "--job_name (ps, worker or controller)")
        return None
    if not workers:
        raise UsageError("--job_name=%s needs --worker_hosts=host:port,... (every worker, in "
                         "the same order on every task)" % job if job else
                         "--ps_hosts needs --worker_hosts=host:port,...")
    if not job:
        raise UsageError("--worker_hosts needs --job_name (worker%s) and --task_index"
                         % (", ps or controller" if ps else ""))
    if len(controller) > 1:
        raise UsageError("--controller_host takes one host:port, got %d" % len(controller))
    if ps:
        if not controller:
            raise UsageError("--ps_hosts needs --controller_host=host:port: under TF2's "
                             "ParameterServerStrategy the controller (coordinator) runs the "
                             "benchmark loop and the ps and worker tasks serve")
        jobs = (("chief", controller), ("worker", workers), ("ps", ps))
        task_type = {"controller": "chief"}.get(job, job)
        mode = PARAMETER_SERVER
    else:
        if job == "ps":
            raise UsageError("--job_name=ps needs --ps_hosts")
        if job == "controller":
            raise UsageError("--job_name=controller is for --ps_hosts clusters "
                             "(ParameterServerStrategy); with --worker_hosts alone every worker "
                             "runs the benchmark (MultiWorkerMirroredStrategy)")
        notices: tuple[str, ...] = ()
        if controller and p.devices.variable_update != "distributed_all_reduce":
            raise UsageError("--controller_host needs --ps_hosts: with --worker_hosts alone "
                             "every worker runs the benchmark (MultiWorkerMirroredStrategy)")
        if controller:
            # Legacy distributed_all_reduce drove its workers from a controller; under TF2
            # every worker runs its own loop, so no controller task exists.
            notices = ("--controller_host unused: under MultiWorkerMirroredStrategy every "
                       "worker runs the benchmark; start no controller task",)
        jobs = (("worker", workers),)
        task_type, mode = "worker", MULTI_WORKER
        cluster = Cluster(jobs, task_type, p.cluster.task_index, mode, "flags", notices)
        _check_index(cluster, "--task_index")
        return cluster
    cluster = Cluster(jobs, task_type, p.cluster.task_index, mode, "flags")
    _check_index(cluster, "--task_index")
    return cluster


def _from_tf_config(text: str) -> Optional[Cluster]:
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise UsageError("TF_CONFIG is not valid JSON: %s" % exc) from None
    if not isinstance(config, dict) or not config.get("cluster"):
        return None
    cluster = config["cluster"]
    task = config.get("task") or {}
    if not isinstance(cluster, dict) or "type" not in task:
        raise UsageError("TF_CONFIG needs \"cluster\": {job: [host:port, ...]} and \"task\": "
                         "{\"type\": ..., \"index\": ...}")
    unknown = sorted(set(cluster) - {"chief", "worker", "ps"})
    if unknown:
        raise UsageError("TF_CONFIG job(s) %s not supported: use chief, worker and ps"
                         % ", ".join(unknown))
    jobs = tuple((job, parse_hosts(",".join(cluster[job]), "TF_CONFIG %s" % job))
                 for job in ("chief", "worker", "ps") if cluster.get(job))
    mode = PARAMETER_SERVER if cluster.get("ps") else MULTI_WORKER
    if mode == PARAMETER_SERVER and not cluster.get("chief"):
        raise UsageError("TF_CONFIG with \"ps\" needs a \"chief\" (the coordinator that runs "
                         "the benchmark under ParameterServerStrategy)")
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise UsageError("TF_CONFIG task index %r is not an integer" % task.get("index")) \
            from None
    cluster = Cluster(jobs, str(task["type"]), index, mode, "TF_CONFIG")
    _check_index(cluster, "TF_CONFIG task index")
    return cluster


def _check_index(cluster: Cluster, what: str) -> None:
    tasks = cluster.addresses(cluster.task_type)
    if not tasks:
        raise UsageError("this task's job %r has no hosts in the cluster" % cluster.task_type)
    if not 0 <= cluster.task_index < len(tasks):
        raise UsageError("%s=%d is out of range: job %s has %d task(s) (%s)"
                         % (what, cluster.task_index, cluster.task_type, len(tasks),
                            ", ".join(tasks)))


def read_cluster(p: Settings, environ: Optional[Mapping[str, str]] = None) -> Optional[Cluster]:
    """The cluster from the legacy flags, else from TF_CONFIG, else from the Slurm step this
    task runs in (not under horovod, which reads Slurm itself); None for a single host."""
    cluster = _from_flags(p)
    if cluster is not None:
        return cluster
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG", "")
    if text.strip():
        return _from_tf_config(text)
    if p.devices.variable_update == "horovod":
        return None
    return _from_slurm(environ)


def _from_slurm(environ: Mapping[str, str]) -> Optional[Cluster]:
    step = slurm.slurm_step(environ)
    if step is None:
        return None
    workers, index, notice = step
    cluster = Cluster((("worker", workers),), "worker", index, MULTI_WORKER, "Slurm",
                      (notice,))
    _check_index(cluster, "SLURM_PROCID")
    return cluster
