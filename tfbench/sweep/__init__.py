"""Studies over many runs: each point in its own process, then study tables.
"""
