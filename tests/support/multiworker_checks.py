"""One worker of a localhost MultiWorkerMirroredStrategy cluster, reading real data through the
runner's input path; run as several processes by e2e/test_clusters.py.

`python multiworker_checks.py TASK_INDEX HOST:PORT,HOST:PORT DATA_DIR BATCH EVAL_BATCH STEPS
EVAL_STEPS` prints one JSON object: what each local replica computed on (its batch size and
the labels of its examples, which the test data makes unique per example), for STEPS training
and EVAL_STEPS evaluation batches, plus the strategy's devices and the synthetic batch.

`python multiworker_checks.py ps_images PS_HOST WORKER_HOSTS CONTROLLER_HOST` is the controller of
a parameter-server cluster: it runs three steps on the runner's synthetic inputs and prints where
the tensors those steps read live, and which ops the step runs. Its workers are
`python multiworker_checks.py serve_worker INDEX PS_HOST WORKER_HOSTS CONTROLLER_HOST`: tfbench's
own serving with 2 logical CPU devices (a tfbench task splits its CPU only on one host), as a
GPU worker has several GPUs.
"""

from __future__ import annotations

import json
import os
import sys

import paths  # noqa: F401 - the checkout's root first on sys.path

import numpy as np  # noqa: E402

SIZE = 16


def write_labelled_split(out_dir: str, split: str, num_files: int, per_file: int,
                         first_label: int) -> list[int]:
    """ImageNet TFRecords whose examples have distinct labels first_label, first_label + 1, ...

    Returns the labels. (A label identifies an example, so tests can tell which were read.)
    """
    import tensorflow as tf
    from tfbench.data import fake_imagenet
    rng = np.random.default_rng(first_label)
    labels = []
    for f in range(num_files):
        path = os.path.join(out_dir, "%s-%05d-of-%05d" % (split, f, num_files))
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(per_file):
                label = first_label + f * per_file + i
                example = fake_imagenet._example(rng, label, SIZE, split)
                example.features.feature["image/class/label"].int64_list.value[:] = [label]
                writer.write(example.SerializeToString())
                labels.append(label)
    return labels


def main() -> None:
    task, hosts, data_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    batch, eval_batch, num_steps, eval_steps = (int(a) for a in sys.argv[4:8])
    import tensorflow as tf
    from tfbench.distribute import devices, pipelines, strategy as strategy_lib
    from tfbench.engine.base import ModeRunner
    from tfbench.engine.resolved import resolve
    from tfbench.config.settings import make_settings

    p = make_settings({"device": "cpu", "model": "trivial", "image_size": SIZE,
                     "batch_size": batch, "eval_batch_size": eval_batch, "data_dir": data_dir,
                     "job_name": "worker", "worker_hosts": hosts, "task_index": task,
                     "variable_update": "collective_all_reduce", "cluster_timeout_secs": 60})
    plan = resolve(p)
    devices.configure_runtime(p, plan.device)
    sp = strategy_lib.make_strategy(p, plan.device)
    strategy = sp.strategy
    bench = ModeRunner(p=p, plan=plan, strategy=strategy)

    def replica_view(images, labels):
        return tf.shape(images)[0], labels

    @tf.function
    def step(iterator):
        return strategy.run(replica_view, args=tuple(next(iterator)))

    def read(batch_per_replica: int, train: bool, count: int) -> list[dict]:
        iterator, _ = bench.inputs(batch_per_replica, train=train)
        replicas = [{"batch_sizes": [], "labels": []}
                    for _ in strategy.extended.worker_devices]
        for _ in range(count):
            sizes, labels = step(iterator)
            for seen, size, label in zip(replicas, strategy.experimental_local_results(sizes),
                                         strategy.experimental_local_results(labels)):
                seen["batch_sizes"].append(int(size))
                seen["labels"].extend(int(x) for x in label.numpy())
        return replicas

    synthetic = strategy.experimental_local_results(bench.images(batch))
    out = {"worker_devices": list(strategy.extended.worker_devices),
           "process_shard": list(pipelines.process_shard(strategy)),
           "train": read(batch, True, num_steps),
           "eval": read(eval_batch, False, eval_steps),
           "synthetic_batch_sizes": [int(x.shape[0]) for x in synthetic]}
    print("RESULT " + json.dumps(out), flush=True)


def ps_images_main() -> None:
    ps, workers, controller = sys.argv[2:5]
    import tensorflow as tf
    from tfbench.config.settings import make_settings
    from tfbench.distribute import devices, pipelines, strategy as strategy_lib
    from tfbench.engine import steps
    from tfbench.engine.base import ModeRunner
    from tfbench.engine.resolved import resolve

    p = make_settings({"device": "cpu", "model": "trivial", "image_size": 8, "batch_size": 2,
                     "job_name": "controller", "ps_hosts": ps, "worker_hosts": workers,
                     "controller_host": controller, "cluster_timeout_secs": 60})
    plan = resolve(p)
    devices.configure_runtime(p, plan.device)
    strategy = strategy_lib.make_strategy(p, plan.device).strategy
    bench = ModeRunner(p=p, plan=plan, strategy=strategy)
    model = bench.build_model()
    images = bench.images(2)                 # what the runner's steps read
    step = steps.Steps(model, None, strategy, bench.step_config("forward_only")).forward_step()
    traces = []   # after each step
    for _ in range(3):
        step(images)
        traces.append(step.step_fn.experimental_get_tracing_count())

    def where(variable):   # the device of the variable each worker holds
        return [v._get_values().device for v in variable._per_worker_vars._values]

    graph = step.step_fn.get_concrete_function(images).graph
    # The mechanism for several replicas per worker (GPU workers: /device:GPU:r), on the
    # workers' two logical CPU devices: each replica's images on its own device.
    two = pipelines.WorkerImages(strategy, lambda c: tf.fill(
        [1], tf.cast(c.replica_id_in_sync_group, tf.float32)), ["/device:CPU:0", "/device:CPU:1"])

    @tf.function
    def read_both():
        return [tf.identity(v) for v in (two.variables[0].read_value(),
                                         two.variables[1].read_value())]
    from tfbench.distribute.strategies import coordinator
    values = coordinator(strategy).schedule(read_both)
    coordinator(strategy).join()
    print("RESULT " + json.dumps({
        "kind": type(images).__name__, "worker_devices": list(strategy.extended.worker_devices),
        "traces": traces,
        "images": [where(v) for v in getattr(images, "variables", [])],
        "op_types": sorted({op.type for op in graph.get_operations()}),
        "read_shapes": [op.outputs[0].shape.as_list() for op in graph.get_operations()
                        if op.type == "ReadVariableOp" and op.outputs[0].shape.rank == 4],
        "two_devices": [where(v) for v in two.variables],
        "two_values": [float(x[0]) for x in values.fetch()]}), flush=True)


def serve_worker_main() -> None:
    index, ps, workers, controller = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    import tensorflow as tf
    from tfbench.config.settings import make_settings
    from tfbench.distribute import cluster, peers
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    p = make_settings({"device": "cpu", "model": "trivial", "job_name": "worker",
                     "task_index": index, "ps_hosts": ps, "worker_hosts": workers,
                     "controller_host": controller})
    peers.serve(cluster.read_cluster(p), 120)


if __name__ == "__main__":
    {"ps_images": ps_images_main, "serve_worker": serve_worker_main}.get(sys.argv[1], main)()
