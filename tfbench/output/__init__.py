"""Renders a RunResult: the classic log, the CSV row, the JSON manifest and the legacy
benchmark logs. Formatters only: no TensorFlow state.
"""
