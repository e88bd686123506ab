"""Studies over many runs: each point in its own process, then study tables.

grid (axes, points, each child's flags) < progress (the bar on stderr) < study (the Sweep that
runs points, each a child of tfbench.children: its process, outcome and rows) < max_batch (the
max-batch search) < summary (the tables at the end). tfbench.cli.sweep is the front end.
evaluation (the GPU evaluation method's configurations, run through the Sweep;
tfbench.cli.evaluate) sits beside max_batch.
"""
