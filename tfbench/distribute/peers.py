"""Waits on a cluster's peers, bounded: the rendezvous before TensorFlow starts, calls that give
up after --cluster_timeout_secs naming who is missing, peer failures turned into one clear
DistributedError, and the serving loop of parameter-server tasks.

TensorFlow's own wait for absent peers is unbounded and cannot be interrupted: the coordination
service waits for every task to register inside a C++ call that holds the GIL. So before
TensorFlow starts, `rendezvous` waits (bounded by --cluster_timeout_secs) until every peer
accepts TCP connections, holding this task's own port open meanwhile so that peers waiting the
same way see it; a peer still missing at the deadline ends the run with a DistributedError that
names it. Once running, a lost peer is found by TensorFlow itself, with no cost per step: a
dead one by its refused connections, a hung or cut-off one by the coordination service's
heartbeats (MultiWorkerMirroredStrategy starts it; about 10 s), and either aborts the
collectives in flight; peer failures become DistributedError. No per-collective timeout: it
starts a thread per collective (a debugging aid, TensorFlow says). The TensorFlow parts import
it lazily.
"""

from __future__ import annotations

import concurrent.futures
import re
import signal
import socket
import struct
import threading
import time
from typing import Callable, Optional, TypeVar

from tfbench.distribute.cluster import Cluster, task_label
from tfbench.errors import DistributedError

T = TypeVar("T")

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


def unreachable_peers(cluster: Cluster, timeout: float = 1.0) -> list[str]:
    """'worker 1 at h:p (connection refused)' for every peer that does not accept TCP."""
    found = []
    for label, address in cluster.peers():
        why = probe(address, timeout)
        if why is not None:
            found.append("%s at %s (%s)" % (label, address, why))
    return found


def _timeout_error(cluster: Cluster, timeout_secs: float, what: str) -> DistributedError:
    missing = unreachable_peers(cluster)
    if missing:
        detail = "unreachable: " + "; ".join(missing)
    else:
        detail = "every peer accepts connections but not all joined (wrong --task_index or " \
                 "host list on some task?)"
    return DistributedError("%s: no cluster after %gs %s (--cluster_timeout_secs); %s"
                            % (cluster.label, timeout_secs, what, detail))


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


def rendezvous(cluster: Cluster, timeout_secs: float, listen: bool = True,
               poll_secs: float = 0.2) -> None:
    """Returns once every peer accepts TCP connections; DistributedError at the deadline.

    With `listen`, this task's own port accepts connections while it waits, and for a grace
    period after (peers probe every poll_secs), so tasks that all wait here find each other;
    then TensorFlow's server takes the port over.
    """
    listener = _listen(cluster.address) if listen else None
    pending = dict(cluster.peers())
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
                    "unreachable: %s" % (cluster.label, timeout_secs, "; ".join(
                        "%s at %s (%s)" % (label, address, reasons[label])
                        for label, address in pending.items())))
            time.sleep(poll_secs)
    finally:
        if listener is not None:
            _drain(listener)
            listener.close()


def run_bounded(fn: Callable[[], T], cluster: Cluster, timeout_secs: float,
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
        raise _timeout_error(cluster, timeout_secs, what)
    if "error" in box:
        failure = as_distributed_error(box["error"], cluster)
        if failure is not None:
            raise failure from None
        raise box["error"]
    return box["value"]


def as_distributed_error(exc: BaseException,
                         cluster: Optional[Cluster]) -> Optional[DistributedError]:
    """A DistributedError for TensorFlow's peer-failure errors in a multi-host run, else None."""
    import tensorflow as tf
    if cluster is None or not isinstance(exc, (tf.errors.UnavailableError,
                                               tf.errors.DeadlineExceededError,
                                               tf.errors.AbortedError,
                                               tf.errors.CancelledError)):
        return None
    message = str(getattr(exc, "message", exc))
    missing = unreachable_peers(cluster)
    silent = _silent_peers(message, cluster)
    if missing:
        detail = "unreachable: " + "; ".join(missing)
    elif silent:
        detail = "no heartbeat from %s (hung, or cut off from this host)" % ", ".join(silent)
    else:
        detail = _cause(message)[:200]
    return DistributedError("%s: lost the cluster (%s); %s"
                            % (cluster.label, type(exc).__name__, detail))


_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def _silent_peers(message: str, cluster: Cluster) -> list[str]:
    """Peers the coordination service reports as no longer sending heartbeats."""
    if "heartbeat" not in message:
        return []
    labels: list[str] = []
    for job, index in _TASK_NAME.findall(message):
        label = task_label(job, int(index))
        if (job, int(index)) != (cluster.task_type, cluster.task_index) and label not in labels:
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

    def __init__(self, cluster: Cluster, timeout_secs: float, what: str):
        self.cluster = cluster
        self.timeout_secs = timeout_secs
        self.what = what
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="tfbench-cluster-call")

    def __call__(self, fn: Callable[..., T], *args) -> T:
        future = self._pool.submit(fn, *args)
        try:
            return future.result(timeout=self.timeout_secs)
        except concurrent.futures.TimeoutError:
            raise _timeout_error(self.cluster, self.timeout_secs, self.what) from None
        except Exception as exc:  # noqa: BLE001 - peer failures become DistributedError
            failure = as_distributed_error(exc, self.cluster)
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


def serve(cluster: Cluster, timeout_secs: float, protocol: str = "grpc",
          poll_secs: float = 0.2) -> None:
    """A ps or worker task under ParameterServerStrategy: serve until the controller is done.

    The legacy ps task served forever; here the task returns once the controller, having been
    reachable, stops accepting connections (its run ended), and fails if the controller does
    not appear within timeout_secs, so no task outlives the benchmark. The controller is
    polled often: a small model's whole run can be over in about a second, and a task that
    never sees it would wait out the timeout and fail.
    """
    import tensorflow as tf
    server = tf.distribute.Server(cluster.cluster_spec(), job_name=cluster.task_type,
                                  task_index=cluster.task_index, protocol=protocol,
                                  config=server_config(cluster.task_type), start=True)
    controller = cluster.addresses("chief")[0]
    deadline = time.monotonic() + timeout_secs
    while probe(controller, poll_secs) is not None:
        if time.monotonic() > deadline:
            raise DistributedError("%s: the controller at %s did not start within %gs "
                                   "(--cluster_timeout_secs)"
                                   % (cluster.label, controller, timeout_secs))
        time.sleep(poll_secs)
    misses = 0
    while misses < 3:
        time.sleep(poll_secs)
        misses = misses + 1 if probe(controller, poll_secs) is not None else 0
    del server  # no stop(): TF servers cannot be stopped; the process ends next
