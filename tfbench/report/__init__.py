"""Reports over results CSV files: study tables, plots and comparisons (`tfbench report`,
`tfbench compare` in tfbench.cli). Reads CSV files and JSON manifests only, never a live run.
"""
