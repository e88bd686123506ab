"""Runs one benchmark. Read runner.py first (the start every mode shares, then one runner per
mode), then base.py (what the runners share) and the runner of the mode you care about.

  resolved.py         what will run: read_facts() (Settings, the model, devices, cluster and
                      data, before the strategy), then resolve() (the arithmetic over the
                      replicas): Resolved
  runlog.py           RunLog: the events a run reports (the CLI prints them as the classic log)
  runner.py           run(): runtime, environment, strategy, header, the mode's runner, failures
  base.py             ModeRunner: model, folded clone, step config, inputs, Step figures, evals
  train.py            training and forward-only: warm-up, timed loop, repeats, evaluations
  checkpoint_eval.py  --eval: the accuracy of the latest checkpoint, again with --eval_interval_secs
  data_only.py        --data_only: the input pipeline alone
  diagnose.py         --diagnose_input: three runs and the figures of the verdict
  meter.py            Meter (monitor windows, memory peaks) and finish(): the figures of a run
  serving.py          --saved_model: export, load and the served step; tftrt.py: --trt_mode's
                      conversion with TF-TRT's own converter
  checkpoints.py      --train_dir: checkpoints, resume, the summary writer
  steps.py, optimizers.py, lr.py, tracing.py: step functions, optimizers, learning-rate
  schedules, --trace_file; update_kernels.py: the optimizers' one training kernel per
  variable; lean_import.py: TensorFlow and Keras imported lean.

The engine formats nothing: it reports through a RunLog and fills a RunResult with figures.
"""
