"""Figures beside images/sec: step statistics, memory, FLOPs and peaks, the training-time
estimate, the environment manifest and the published ranges.
"""
