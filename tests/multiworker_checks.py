"""One worker of a localhost MultiWorkerMirroredStrategy cluster, reading real data through the
runner's input path; run as several processes by test_multiworker.py.

`python multiworker_checks.py TASK_INDEX HOST:PORT,HOST:PORT DATA_DIR BATCH EVAL_BATCH STEPS
EVAL_STEPS` prints one JSON object: what each local replica computed on (its batch size and
the labels of its examples, which the test data makes unique per example), for STEPS training
and EVAL_STEPS evaluation batches, plus the strategy's devices and the synthetic batch.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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
    from tfbench.engine.plan import resolve
    from tfbench.config.params import make_params

    p = make_params({"device": "cpu", "model": "trivial", "image_size": SIZE,
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


if __name__ == "__main__":
    main()
