"""Benchmarks run as child processes, and the rows of studies over them: starting a child
(process.py: in its own session, its output into a log, under a memory cap or a timeout), how it
ended (outcome.py: a status and one error phrase from its exit code and its log's tail), and its
rows (rows.py: its own, marked when it then ended badly, or one written for it from its flags;
appended to the study's file and to --csv_file; whether a study's points all finished).

`tfbench sweep` (and `tfbench evaluate` through it) and `tfbench launch` both write their rows
here; neither imports the other. Nothing here imports TensorFlow or the engine: what a child
would have run is read from its flags (tfbench.config).

The API, for a command that runs benchmarks as children (`from tfbench.children import
process, outcome, rows`):
  result = process.run_child(cmd, log_path, memory_limit_mb=None, timeout_sec=None)
      -> ChildOutcome(exit_code, seconds, timed_out, interrupted): the child in its own session,
         stdout+stderr in log_path; re-raise result.interrupted when it is set.
  kept = rows.child_rows(flags, result, csv_path, log_path, command)
      -> the child's own rows from csv_path (an ok one marked error if it then ended badly), or
         one failure row classified from its exit code and log.
  status, error = outcome.classify_failure(result, process.log_tail(log_path))
  row = rows.failure_row(flags, status, error, command, hostname=None, workers=1)
  rows.save_rows(kept, study_path, csv_file, say)   # the study's file, --csv_file, notices
  code, line = outcome.study_end([rows.rows_status(r) for r in each_points_rows], "points",
                                 "rows in ..., logs in ...")   # 0 / 6 / 1 and the error line
`flags` are benchmark flags as the child gets them (no program name), read with
tfbench.config.argv.settings_of_flags.
"""
