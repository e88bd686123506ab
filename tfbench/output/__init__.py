"""Renders a RunResult: the classic log (classic_log, while the run goes on), tfbench's own
console lines from its figures (console, environment), the CSV row, the JSON manifest and the
legacy benchmark logs (files). Formatters only: no TensorFlow state.
"""
