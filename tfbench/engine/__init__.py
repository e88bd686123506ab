"""Runs one benchmark: the plan (what will run), one runner per mode, the step functions,
optimizers, learning-rate schedules, checkpoints and tracing.
"""
