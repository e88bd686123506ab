"""Reports over results CSV files: study tables, plots and comparisons (`tfbench report`,
`tfbench compare` in tfbench.cli), and the GPU evaluation's report (evaluation, evaluation_env,
evaluation_plots, evaluation_report) with its check in a headless browser (browser_check).
Reads CSV files and JSON manifests only, never a live run.
"""
