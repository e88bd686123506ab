"""The history's tables (SQLAlchemy Core), derived from the figure table: a figure added there
is a column here with no hand-written change (docs/history.md lists the tables).

  history_meta     key, value: the store's version (STORE_VERSION) and when it was made
  results          one row per result (run_id unique): where it came from (source), when it was
                   added, its series and configuration keys, the machine's identity, then one
                   column per declared figure (a multi-worker run's workers combined as the
                   figure table declares)
  result_workers   one row per worker of a result: its host, CPU, GPUs (model, UUIDs) and its
                   own row (JSON)
  environment      run_id, fact, value: the environment facts a result depends on (NVIDIA
                   driver, CUDA, cuDNN, TensorFlow, Keras, tfbench and its commit, container,
                   kernel, CPU)
  validation_checks  one row per verdict of a `tfbench validate` (its host and start time are
                   its identity); its training runs are results like any other
  series_levels    derived, never the only copy of anything: each series' current level for a
                   figure (tfbench.history.levels), keyed by a digest of what it was computed
                   from, so that a listing finds change points only in series whose results
                   changed. A store without it (made before it, or one this user may only read)
                   is listed without it; the store's version does not count it
Standard library and SQLAlchemy only.
"""

from __future__ import annotations

import sqlalchemy as sa

from tfbench import figures

# 1: the first store. A newer tfbench migrates an older store when it opens it; an older one
# refuses a newer store (store.HistoryVersionError).
STORE_VERSION = 1

# The store's own columns of `results`, before the figures'.
OWN_COLUMNS = ("id", "source", "recorded_at", "series_key", "config_key", "machine",
               "gpu_model", "gpu_count", "gpu_uuids", "cpu_model", "worker_count")

SQL_TYPES = {"float": sa.Float, "int": sa.BigInteger, "bool": sa.Integer, "text": sa.Text}


def figure_columns() -> list[tuple[str, str]]:
    """(name, figure type) of every declared figure the store keeps a column for: every figure
    but the manifest's structures (type json)."""
    return [(f.name, f.type) for f in figures.FIGURES if f.type in SQL_TYPES]


def _check_names() -> None:
    clash = set(OWN_COLUMNS) & {name for name, _ in figure_columns()}
    if clash:   # a figure named like a store column would be lost: fail at import, not later
        raise ValueError("figures named like the history's own columns: %s" % sorted(clash))


_check_names()

metadata = sa.MetaData()

meta = sa.Table(
    "history_meta", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False))

results = sa.Table(
    "results", metadata,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("source", sa.String(32), nullable=False),
    sa.Column("recorded_at", sa.String(32), nullable=False),
    sa.Column("series_key", sa.String(40), nullable=False, index=True),
    sa.Column("config_key", sa.String(40), nullable=False, index=True),
    sa.Column("machine", sa.Text),
    sa.Column("gpu_model", sa.Text),
    sa.Column("gpu_count", sa.Integer),
    sa.Column("gpu_uuids", sa.Text),
    sa.Column("cpu_model", sa.Text),
    sa.Column("worker_count", sa.Integer),
    *[sa.Column(name, SQL_TYPES[kind]()) for name, kind in figure_columns()],
    sa.UniqueConstraint("run_id", name="results_run_id"))

result_workers = sa.Table(
    "result_workers", metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("worker", sa.String(200), primary_key=True),
    sa.Column("hostname", sa.Text),
    sa.Column("cpu_model", sa.Text),
    sa.Column("gpu_model", sa.Text),
    sa.Column("gpu_uuids", sa.Text),
    sa.Column("row_json", sa.Text, nullable=False))

validation_checks = sa.Table(
    "validation_checks", metadata,
    sa.Column("validation_id", sa.String(200), primary_key=True),
    sa.Column("row", sa.Integer, primary_key=True),
    sa.Column("started", sa.String(32)),
    sa.Column("level", sa.String(32)),
    sa.Column("host", sa.Text),
    sa.Column("subject", sa.Text),
    sa.Column("check", sa.Text),
    sa.Column("status", sa.String(8)),
    sa.Column("reason", sa.Text),
    sa.Column("figure", sa.Text),
    sa.Column("expectation", sa.Text),
    sa.Column("value", sa.Float),
    sa.Column("expected", sa.Float))

environment = sa.Table(
    "environment", metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("fact", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False))

# The tables that hold what was recorded: a store is refused when they cannot be made.
RECORDS = (meta, results, result_workers, validation_checks, environment)

series_levels = sa.Table(
    "series_levels", metadata,
    sa.Column("series_key", sa.String(40), primary_key=True),
    sa.Column("figure", sa.String(64), primary_key=True),
    sa.Column("inputs", sa.String(40), nullable=False),    # digest of what it was computed from
    sa.Column("runs", sa.Integer, nullable=False),         # the runs with a value, segmented
    sa.Column("last_id", sa.BigInteger),                   # results.id of the last of them
    sa.Column("level", sa.Float),                          # median of the current segment
    sa.Column("change_pct", sa.Float),                     # against the segment before, %
    sa.Column("computed_at", sa.String(32), nullable=False))
