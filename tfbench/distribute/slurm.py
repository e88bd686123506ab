"""A Slurm step's cluster from its environment (srun, one task per host).

The variables TensorFlow's SlurmClusterResolver reads (TF 2.17 to 2.21), read here directly:
the resolver numbers tasks by host names sorted as strings (node10 before node9) while Slurm
numbers them in node-list order, overwrites CUDA_VISIBLE_DEVICES with 0..k-1 (ignoring the
GPUs Slurm bound to the task), counts GPUs with nvidia-smi, listens on 8888 on every host, and
needs TensorFlow to parse a cluster.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional

from tfbench.errors import UsageError


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list, in Slurm's order: 'gpu[01-03,07],login1' ->
    ['gpu01', 'gpu02', 'gpu03', 'gpu07', 'login1']. Several bracket groups in one name
    ('r[1-2]n[1-2]') expand as their product; zero padding is kept."""
    hosts: list[str] = []
    for name in _split_outside_brackets(text):
        expanded = [""]
        for literal, ranges in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", name):
            values = _expand_ranges(ranges, text) if ranges else [""]
            expanded = [head + literal + value for head in expanded for value in values]
        hosts.extend(expanded)
    return hosts


def _split_outside_brackets(text: str) -> list[str]:
    names, depth, current = [], 0, ""
    for char in text.strip():
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise UsageError("Slurm host list %r: unbalanced brackets" % text)
        if char == "," and depth == 0:
            names.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise UsageError("Slurm host list %r: unbalanced brackets" % text)
    names.append(current)
    if any(not n.strip() for n in names):
        raise UsageError("Slurm host list %r has an empty name" % text)
    return [n.strip() for n in names]


def _expand_ranges(ranges: str, text: str) -> list[str]:
    values = []
    for part in ranges.split(","):
        first, _, last = part.strip().partition("-")
        last = last or first
        if not (first.isdigit() and last.isdigit()) or int(last) < int(first):
            raise UsageError("Slurm host list %r: %r is not a range of numbers" % (text, part))
        values += [str(i).zfill(len(first)) for i in range(int(first), int(last) + 1)]
    return values


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's tasks per node, '2(x3),1' -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            raise UsageError("SLURM_STEP_TASKS_PER_NODE=%r is not Slurm's N(xM),... form"
                             % text)
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


SLURM_PORT_BASE = 12000   # a step without reserved ports listens on 12000-31999 (see slurm_port)


def slurm_port(environ: Mapping[str, str]) -> int:
    """The port every task of this step listens on: the first of the step's reserved ports
    (srun --resv-ports), else one derived from the job and step ids, so that steps of other jobs
    sharing a host (and concurrent steps of one job) use other ports."""
    reserved = environ.get("SLURM_STEP_RESV_PORTS", "").strip()
    match = re.match(r"(\d+)", reserved)
    if match:
        return int(match.group(1))
    ids = [environ.get(name, "0") for name in ("SLURM_JOB_ID", "SLURM_STEP_ID")]
    job, step = (int(x) if x.isdigit() else 0 for x in ids)
    return SLURM_PORT_BASE + (job + step) % 20000


def slurm_step(environ: Mapping[str, str]) -> Optional[tuple[tuple[str, ...], int, str]]:
    """(worker addresses, this task's index, a notice) of the srun step this process is a task
    of; None outside a step of several tasks (a batch script itself, or srun -n1). One task per
    host: each drives every GPU Slurm gave it, and MultiWorkerMirroredStrategy reduces within a
    host over NVLink/PCIe first."""
    def var(name: str) -> str:
        value = environ.get("SLURM_" + name, "").strip()
        if not value:
            raise UsageError("inside a Slurm step (SLURM_STEP_NUM_TASKS is set) but SLURM_%s "
                             "is not: start tfbench with srun" % name)
        return value

    num_tasks = environ.get("SLURM_STEP_NUM_TASKS", "").strip()
    if not num_tasks.isdigit() or int(num_tasks) < 2:
        return None
    hosts = expand_hostlist(var("STEP_NODELIST"))
    per_node = expand_tasks_per_node(var("STEP_TASKS_PER_NODE"))
    rank = var("PROCID")
    if not rank.isdigit() or int(rank) >= int(num_tasks):
        raise UsageError("SLURM_PROCID=%s is not a task of this %s-task step" % (rank, num_tasks))
    if len(per_node) != len(hosts) or sum(per_node) != int(num_tasks):
        raise UsageError("Slurm step of %s tasks: SLURM_STEP_NODELIST (%d hosts) and "
                         "SLURM_STEP_TASKS_PER_NODE=%s do not agree"
                         % (num_tasks, len(hosts), environ.get("SLURM_STEP_TASKS_PER_NODE")))
    if max(per_node) > 1:
        raise UsageError("tfbench runs one task per host under Slurm, and this step has %s on "
                         "a host: start it with srun --ntasks-per-node=1 (each task drives every "
                         "GPU of its host; --num_gpus picks how many)"
                         % max(per_node))
    index = int(rank)
    here = environ.get("SLURMD_NODENAME", "").strip()
    if here and here != hosts[index]:
        raise UsageError("Slurm placed task %d on %s, but the step's node list (%s) puts it on "
                         "%s: tfbench needs tasks in node-list order (srun's default block or "
                         "cyclic distribution, one task per node)"
                         % (index, here, environ.get("SLURM_STEP_NODELIST"), hosts[index]))
    port = slurm_port(environ)
    workers = tuple("%s:%d" % (host, port) for host in hosts)
    notice = ("Cluster from Slurm (job %s, step %s): %d workers on %s, this task worker %d at "
              "%s" % (environ.get("SLURM_JOB_ID", "?"), environ.get("SLURM_STEP_ID", "?"),
                      len(workers), environ.get("SLURM_STEP_NODELIST"), index, workers[index]))
    return workers, index, notice
