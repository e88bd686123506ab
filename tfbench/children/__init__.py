"""Benchmarks run as child processes, and the rows of studies over them: starting a child
(process.py: in its own session, its output into a log, under a memory cap or a timeout), how it
ended (outcome.py: a status and one error phrase from its exit code and its log's tail), and its
rows (rows.py: its own, marked when it then ended badly, or one written for it from its flags;
appended to the study's file and to --csv_file; whether a study's points all finished).

`tfbench sweep` (and `tfbench evaluate` through it) and `tfbench launch` both write their rows
here; neither imports the other. Nothing here imports TensorFlow or the engine: what a child
would have run is read from its flags (tfbench.config).

The API, for a command that runs benchmarks as children:
  outcome = process.run_child(cmd, log_path, memory_limit_mb=None, timeout_sec=None)
  rows = rows.child_rows(flags, outcome, csv_path, log_path, command)   # its own, or one
  status, error = outcome.classify_failure(outcome, process.log_tail(log_path))
  row = rows.failure_row(flags, status, error, command, hostname=None, workers=1)
  rows.save_rows(rows, study_path, csv_file, say)        # the study's file, --csv_file, notice
  code, line = outcome.study_end([...one status per point...], "points", where)
"""
