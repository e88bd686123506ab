"""Settings of a run: the flag table, Params and what derives from them alone.

Imports no TensorFlow: the CLI, the sweep and the docs read it before (or without) starting TensorFlow.
"""
