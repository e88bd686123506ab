"""Multi-host settings: the legacy cluster flags or TF_CONFIG, and bounded waits on peers.

Two ways to describe a cluster, as the legacy script and TensorFlow accept:
  --job_name=worker --worker_hosts=h1:p,h2:p --task_index=i       (MultiWorkerMirroredStrategy)
  --job_name=ps|worker|controller --ps_hosts=... --worker_hosts=... --controller_host=h:p
                                                                   (ParameterServerStrategy)
  TF_CONFIG='{"cluster": {...}, "task": {"type": ..., "index": ...}}'  (either, by its jobs)
  an srun step of several tasks, one per host (Slurm's SLURM_STEP_* variables)
                                                                   (MultiWorkerMirroredStrategy)

TensorFlow's own wait for absent peers is unbounded and cannot be interrupted: the coordination
service waits for every task to register inside a C++ call that holds the GIL. So before
TensorFlow starts, `rendezvous` waits (bounded by --cluster_timeout_secs) until every peer
accepts TCP connections, holding this task's own port open meanwhile so that peers waiting the
same way see it; a peer still missing at the deadline ends the run with a DistributedError that
names it. Once running, a lost peer is found by TensorFlow itself, with no cost per step: a
dead one by its refused connections, a hung or cut-off one by the coordination service's
heartbeats (MultiWorkerMirroredStrategy starts it; about 10 s), and either aborts the
collectives in flight; peer failures become DistributedError. No per-collective timeout: it
starts a thread per collective (a debugging aid, TensorFlow says). Parsing needs no TensorFlow;
the TensorFlow parts import it lazily.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import signal
import socket
import struct
import threading
import time
from typing import Callable, Mapping, Optional, TypeVar

from tfbench.errors import DistributedError, UsageError

MULTI_WORKER = "multi_worker"
PARAMETER_SERVER = "parameter_server"

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ClusterPlan:
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


def _from_flags(p) -> Optional[ClusterPlan]:
    workers = parse_hosts(p.worker_hosts, "worker_hosts")
    ps = parse_hosts(p.ps_hosts, "ps_hosts")
    controller = parse_hosts(p.controller_host or "", "controller_host")
    job = p.job_name
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
        if controller and p.variable_update != "distributed_all_reduce":
            raise UsageError("--controller_host needs --ps_hosts: with --worker_hosts alone "
                             "every worker runs the benchmark (MultiWorkerMirroredStrategy)")
        if controller:
            # Legacy distributed_all_reduce drove its workers from a controller; under TF2
            # every worker runs its own loop, so no controller task exists.
            notices = ("--controller_host unused: under MultiWorkerMirroredStrategy every "
                       "worker runs the benchmark; start no controller task",)
        jobs = (("worker", workers),)
        task_type, mode = "worker", MULTI_WORKER
        plan = ClusterPlan(jobs, task_type, p.task_index, mode, "flags", notices)
        _check_index(plan, "--task_index")
        return plan
    plan = ClusterPlan(jobs, task_type, p.task_index, mode, "flags")
    _check_index(plan, "--task_index")
    return plan


def _from_tf_config(text: str) -> Optional[ClusterPlan]:
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
    plan = ClusterPlan(jobs, str(task["type"]), index, mode, "TF_CONFIG")
    _check_index(plan, "TF_CONFIG task index")
    return plan


def _check_index(plan: ClusterPlan, what: str) -> None:
    tasks = plan.addresses(plan.task_type)
    if not tasks:
        raise UsageError("this task's job %r has no hosts in the cluster" % plan.task_type)
    if not 0 <= plan.task_index < len(tasks):
        raise UsageError("%s=%d is out of range: job %s has %d task(s) (%s)"
                         % (what, plan.task_index, plan.task_type, len(tasks),
                            ", ".join(tasks)))


def cluster_plan(p, environ: Optional[Mapping[str, str]] = None) -> Optional[ClusterPlan]:
    """The cluster from the legacy flags, else from TF_CONFIG, else from the Slurm step this
    task runs in (not under horovod, which reads Slurm itself); None for a single host."""
    plan = _from_flags(p)
    if plan is not None:
        return plan
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG", "")
    if text.strip():
        return _from_tf_config(text)
    if p.variable_update == "horovod":
        return None
    return _from_slurm(environ)


# --- Slurm ----------------------------------------------------------------------------------
# The variables TensorFlow's SlurmClusterResolver reads (TF 2.17 to 2.21), read here directly:
# the resolver numbers tasks by host names sorted as strings (node10 before node9) while Slurm
# numbers them in node-list order, overwrites CUDA_VISIBLE_DEVICES with 0..k-1 (ignoring the
# GPUs Slurm bound to the task), counts GPUs with nvidia-smi, listens on 8888 on every host, and
# needs TensorFlow to parse a cluster.

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


def _from_slurm(environ: Mapping[str, str]) -> Optional[ClusterPlan]:
    """The cluster of the srun step this process is a task of; None outside a step of several
    tasks (a batch script itself, or srun -n1). One task per host: each drives every GPU Slurm
    gave it, and MultiWorkerMirroredStrategy reduces within a host over NVLink/PCIe first."""
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
    plan = ClusterPlan((("worker", workers),), "worker", index, MULTI_WORKER, "Slurm",
                       (notice,))
    _check_index(plan, "SLURM_PROCID")
    return plan


# --- reachability and bounded waits ---------------------------------------------------------

def probe(address: str, timeout: float = 1.0) -> Optional[str]:
    """None when address accepts a TCP connection, else why not (one short phrase)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except socket.timeout:
        return "no answer"
    except OSError as exc:
        return exc.strerror.lower() if exc.strerror else type(exc).__name__


def unreachable_peers(plan: ClusterPlan, timeout: float = 1.0) -> list[str]:
    """'worker 1 at h:p (connection refused)' for every peer that does not accept TCP."""
    found = []
    for label, address in plan.peers():
        why = probe(address, timeout)
        if why is not None:
            found.append("%s at %s (%s)" % (label, address, why))
    return found


def _timeout_error(plan: ClusterPlan, timeout_secs: float, what: str) -> DistributedError:
    missing = unreachable_peers(plan)
    if missing:
        detail = "unreachable: " + "; ".join(missing)
    else:
        detail = "every peer accepts connections but not all joined (wrong --task_index or " \
                 "host list on some task?)"
    return DistributedError("%s: no cluster after %gs %s (--cluster_timeout_secs); %s"
                            % (plan.label, timeout_secs, what, detail))


def _listen(address: str) -> Optional[socket.socket]:
    """A listener on this task's port (all interfaces), or None when the port is taken."""
    port = int(address.rpartition(":")[2])
    try:
        listener = socket.create_server(("", port), backlog=64)
    except OSError:
        return None
    listener.setblocking(False)
    return listener


def _drain(listener: Optional[socket.socket]) -> None:
    """Accepts and resets peers' probe connections, so none lingers in TIME_WAIT on our port."""
    while listener is not None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()


def rendezvous(plan: ClusterPlan, timeout_secs: float, listen: bool = True,
               poll_secs: float = 0.2) -> None:
    """Returns once every peer accepts TCP connections; DistributedError at the deadline.

    With `listen`, this task's own port accepts connections while it waits, and for a grace
    period after (peers probe every poll_secs), so tasks that all wait here find each other;
    then TensorFlow's server takes the port over.
    """
    listener = _listen(plan.address) if listen else None
    pending = dict(plan.peers())
    deadline = time.monotonic() + timeout_secs
    try:
        while True:
            _drain(listener)
            reasons = {label: probe(address, min(1.0, timeout_secs))
                       for label, address in pending.items()}
            pending = {label: pending[label] for label, why in reasons.items()
                       if why is not None}
            if not pending:
                if listener is not None:
                    time.sleep(max(1.0, 5 * poll_secs))
                return
            if time.monotonic() >= deadline:
                raise DistributedError(
                    "%s: the cluster did not form within %gs (--cluster_timeout_secs); "
                    "unreachable: %s" % (plan.label, timeout_secs, "; ".join(
                        "%s at %s (%s)" % (label, address, reasons[label])
                        for label, address in pending.items())))
            time.sleep(poll_secs)
    finally:
        if listener is not None:
            _drain(listener)
            listener.close()


def run_bounded(fn: Callable[[], T], plan: ClusterPlan, timeout_secs: float,
                what: str) -> T:
    """fn() in a daemon thread; DistributedError naming unreachable peers after timeout_secs.

    This bounds waits that release the GIL (op execution, RPCs from Python); a C++ call that
    holds it blocks this thread too, which is why `rendezvous` runs first. A thread left
    blocked is a daemon, and the CLI ends the process with os._exit.
    """
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="tfbench-cluster-wait", daemon=True)
    thread.start()
    thread.join(timeout_secs)
    if thread.is_alive():
        raise _timeout_error(plan, timeout_secs, what)
    if "error" in box:
        failure = as_distributed_error(box["error"], plan)
        if failure is not None:
            raise failure from None
        raise box["error"]
    return box["value"]


def as_distributed_error(exc: BaseException,
                         plan: Optional[ClusterPlan]) -> Optional[DistributedError]:
    """A DistributedError for TensorFlow's peer-failure errors in a multi-host run, else None."""
    import tensorflow as tf
    if plan is None or not isinstance(exc, (tf.errors.UnavailableError,
                                            tf.errors.DeadlineExceededError,
                                            tf.errors.AbortedError,
                                            tf.errors.CancelledError)):
        return None
    message = str(getattr(exc, "message", exc))
    missing = unreachable_peers(plan)
    silent = _silent_peers(message, plan)
    if missing:
        detail = "unreachable: " + "; ".join(missing)
    elif silent:
        detail = "no heartbeat from %s (hung, or cut off from this host)" % ", ".join(silent)
    else:
        detail = _cause(message)[:200]
    return DistributedError("%s: lost the cluster (%s); %s"
                            % (plan.label, type(exc).__name__, detail))


_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def _silent_peers(message: str, plan: ClusterPlan) -> list[str]:
    """Peers the coordination service reports as no longer sending heartbeats."""
    if "heartbeat" not in message:
        return []
    labels: list[str] = []
    for job, index in _TASK_NAME.findall(message):
        label = task_label(job, int(index))
        if (job, int(index)) != (plan.task_type, plan.task_index) and label not in labels:
            labels.append(label)
    return labels


def _cause(message: str) -> str:
    """TensorFlow's reason, without the 'Detected at node ... defined at' trace before it."""
    _, found, reason = message.partition("aborted by: ")
    if found:
        message = reason.split("\n", 1)[0]
    return " ".join(message.split())


class BoundedCalls:
    """Calls fn(*args) on one helper thread, each bounded by timeout_secs (see run_bounded)."""

    def __init__(self, plan: ClusterPlan, timeout_secs: float, what: str):
        self.plan = plan
        self.timeout_secs = timeout_secs
        self.what = what
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="tfbench-cluster-call")

    def __call__(self, fn: Callable[..., T], *args) -> T:
        future = self._pool.submit(fn, *args)
        try:
            return future.result(timeout=self.timeout_secs)
        except concurrent.futures.TimeoutError:
            raise _timeout_error(self.plan, self.timeout_secs, self.what) from None
        except Exception as exc:  # noqa: BLE001 - peer failures become DistributedError
            failure = as_distributed_error(exc, self.plan)
            if failure is not None:
                raise failure from None
            raise


def restore_sigterm_handler() -> None:
    """Puts back the SIGTERM handler Python had (the CLI's: status interrupted, exit code 143).

    TensorFlow's coordination service, which MultiWorkerMirroredStrategy and
    ParameterServerStrategy start, replaces it with its preemption notifier, which only records
    the signal (tsl/distributed_runtime/preemption/preemption_notifier.cc, TF 2.17 to 2.21:
    std::signal(SIGTERM, ...)); tfbench uses no preemption checkpointing. Without this, a task
    stopped by Slurm (scancel), Kubernetes or tfbench launch trained on until SIGKILL and wrote
    no row. Python sets handlers from the main thread only; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGTERM)
    if handler is not None:
        signal.signal(signal.SIGTERM, handler)


# --- parameter-server tasks -----------------------------------------------------------------

def server_config(task_type: str):
    """The ConfigProto for this task's tf.distribute.Server: the runtime configuration this
    process set from its flags (GPUs chosen by --num_gpus / --gpu_indices, their memory limit or
    growth, threads), as MultiWorkerMirroredStrategy passes its own (a deep copy of the eager
    context's config, TF 2.17 to 2.21). Without it the server would make a device of every GPU
    with default memory settings. A ps task gets no GPU device at all: ParameterServerStrategy
    places every variable on the ps task's CPU:0, and TensorFlow initialises no GPU when the
    config's GPU count is 0."""
    import copy

    from tensorflow.python.eager import context
    config = copy.deepcopy(context.context().config)
    if task_type == "ps":
        config.device_count["GPU"] = 0
    return config


def serve(plan: ClusterPlan, timeout_secs: float, protocol: str = "grpc",
          poll_secs: float = 0.2) -> None:
    """A ps or worker task under ParameterServerStrategy: serve until the controller is done.

    The legacy ps task served forever; here the task returns once the controller, having been
    reachable, stops accepting connections (its run ended), and fails if the controller does
    not appear within timeout_secs, so no task outlives the benchmark. The controller is
    polled often: a small model's whole run can be over in about a second, and a task that
    never sees it would wait out the timeout and fail.
    """
    import tensorflow as tf
    server = tf.distribute.Server(plan.cluster_spec(), job_name=plan.task_type,
                                  task_index=plan.task_index, protocol=protocol,
                                  config=server_config(plan.task_type), start=True)
    controller = plan.addresses("chief")[0]
    deadline = time.monotonic() + timeout_secs
    while probe(controller, poll_secs) is not None:
        if time.monotonic() > deadline:
            raise DistributedError("%s: the controller at %s did not start within %gs "
                                   "(--cluster_timeout_secs)"
                                   % (plan.label, controller, timeout_secs))
        time.sleep(poll_secs)
    misses = 0
    while misses < 3:
        time.sleep(poll_secs)
        misses = misses + 1 if probe(controller, poll_secs) is not None else 0
    del server  # no stop(): TF servers cannot be stopped; the process ends next
