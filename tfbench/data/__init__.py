"""Real data: readers, preprocessing and the tf.data input pipeline.

Which data (tfbench.config.data_source, no TensorFlow import, so that a study names a point's
data as its run does):
  --data_dir unset or --use_synthetic_data: synthetic (the runner's own inputs).
  --data_name=imagenet   TFRecords <data_dir>/train-*-of-*, validation-*-of-* (legacy layout)
  --data_name=cifar10    python pickles data_batch_1..5, test_batch
  --data_name=tfds:NAME  a tensorflow-datasets dataset already prepared under --data_dir
  --data_name=folder     <data_dir>/<class>/<images> (or train/ and validation/ splits)
  no --data_name: guessed from the directory's contents, else (legacy) from "imagenet" or
  "cifar10" in its path.

The runner's interface:

  make_dataset(params, *, dataset_name, image_size, batch_size, train, dtype=tf.float32,
               seed=None, shard=Shard()) -> tf.data.Dataset
      Batches (images [B, S, S, 3] NHWC in `dtype`, labels int32 [B]) of exactly `batch_size`
      (one replica's batch: build one per input pipeline in the function given to
      tfbench.distribute.strategy.distribute_inputs, never a multi-worker batch for
      experimental_distribute_dataset, which splits it over every worker's replicas),
      repeating forever (evaluation data too, as in the legacy script: take
      num_eval_batches). `shard` (Shard(index, count), see sharding) is the part of the data
      this pipeline reads when several pipelines (workers, horovod processes) share it; each
      example goes to exactly one of them per epoch. `dataset_name` is the model's label space
      ("imagenet": 1001 outputs, labels 1..1000; "cifar10": 11 outputs, labels 0..9); tfds and
      folder data use their own labels 0..K-1 and the matching recipe (see encoded_images); a
      label space too small for the data is a UsageError. `seed` (default --tf_random_seed)
      fixes file order, shuffling and every augmentation: the same seed gives the same batches
      (each shard offsets it by its index, so shards shuffle and augment differently).
      Missing or empty data raises UsageError naming what was expected, before anything runs.
  num_examples(params, dataset_name, train) -> int      examples per epoch of the split
  split_size(params, dataset_name, train) -> SplitSize  the same, and what tfds and folders
      found by counting (`9 images in 1 class (plots) in DIR`; '' for the legacy constants)
  (the header's `Dataset:` value, the CSV's `data_source` and is_real_data are
  tfbench.config.data_source's describe, data_source_label and is_real_data)

Errors while iterating: a corrupt record or image surfaces from the iterator (or from the step
function that consumes it) as tf.errors.DataLossError / InvalidArgumentError, or StopIteration /
OutOfRangeError when no example is readable. The runner should do:

      except (tf.errors.OpError, StopIteration) as exc:
          if data_source.is_real_data(params.data) and data.is_data_error(exc):
              raise data.data_error(exc, params, train) from None   # UsageError, exit 2
          raise

  explain_data_error(exc, params, train=True) -> str gives the one line naming the file (it may
  re-read the files for up to SCAN_BUDGET_SECONDS to find it).

--data_only / --diagnose_input / --explain_scaling's input probe (tfbench.data.diagnose):
  arrival_intervals(iterator, num_batches, now=time.perf_counter) -> Iterator[float]
      seconds from one batch's arrival to the next's (the caller's time between them included)
  input_bound_verdict(synthetic_ips, real_ips, input_only_ips, threshold=0.9) -> (bool, str)
  input_settings_line(threads, origin, pinned) -> str   the tf.data threads and host buffers

num_intra_threads / num_inter_threads are process-wide (tf.config.threading) and set by the
runner; this package applies only the tf.data options (--datasets_*; the private pool's size as
the engine resolved it, tfbench.distribute.gpu_env.private_threads).
"""

import importlib

# Lazy exports (PEP 562): `import tfbench.data` does not import TensorFlow; the pipeline
# functions do when first used.
_EXPORTS = {
    "SCAN_BUDGET_SECONDS": "data_errors", "data_error": "data_errors",
    "explain_data_error": "data_errors", "find_bad_file": "data_errors",
    "is_data_error": "data_errors",
    "arrival_intervals": "diagnose", "input_bound_verdict": "diagnose",
    "input_settings_line": "diagnose",
    "make_dataset": "factory", "Shard": "sharding", "num_examples": "factory",
    "split_size": "factory", "SplitSize": "factory",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError("module 'tfbench.data' has no attribute %r" % name)
    return getattr(importlib.import_module("tfbench.data." + _EXPORTS[name]), name)
