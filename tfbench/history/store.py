"""The results history store: open (create, migrate, refuse a newer one), add results, read them.

SQLite (the default, one file per user) and PostgreSQL (a team's server), through SQLAlchemy
Core. Writers are serialised per result: SQLite takes its write lock at BEGIN (IMMEDIATE), so a
writer waits for another instead of failing half-way; PostgreSQL takes a transaction advisory
lock on the run id, so the workers of one run combine into one result. A result is only ever
added whole, in one transaction: a writer killed half-way leaves the store as it was.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import sqlalchemy as sa

from tfbench import figures
from tfbench.errors import UsageError
from tfbench.history import errors as history_errors, schema
from tfbench.history.errors import HistoryVersionError  # noqa: F401 - the store's refusal

# A validation's verdict row (tfbench.validate.verdicts.Check) as the store keeps it.
VALIDATION_FIELDS = ("host", "subject", "check", "status", "reason", "figure", "expectation",
                     "value", "expected")
# Results added in one transaction (Store.add_many).
BATCH = 500


@dataclass(frozen=True)
class Added:
    """What add() did with a result: 'added', 'updated' (another worker's row of a run already
    there) or 'already' (the same rows were there)."""
    run_id: str
    outcome: str


def _lock_key(run_id: str) -> int:
    """A run id as a PostgreSQL advisory lock key (a signed 64-bit integer)."""
    return int.from_bytes(hashlib.sha1(run_id.encode()).digest()[:8], "big", signed=True)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _sqlite_connect(dbapi_connection, _record) -> None:
    # pysqlite's own transaction handling defers BEGIN; tfbench issues it (below).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout = %d" % int(history_errors.LOCK_WAIT_S * 1000))
    cursor.execute("PRAGMA journal_mode = WAL")   # readers never wait for the writer
    cursor.close()


def _sqlite_begin(conn) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def engine_for(url: str) -> sa.Engine:
    """An engine on the store at `url` (nothing is connected yet)."""
    if url.startswith("sqlite"):
        import os
        path = url[len("sqlite:///"):]
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": history_errors.LOCK_WAIT_S},
                                  poolclass=sa.pool.NullPool)
        sa.event.listen(engine, "connect", _sqlite_connect)
        sa.event.listen(engine, "begin", _sqlite_begin)
        return engine
    # A writer waits LOCK_WAIT_S for another's lock (the run id's advisory lock) at most.
    return sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args={
        "connect_timeout": 10,
        "options": "-c lock_timeout=%d" % int(history_errors.LOCK_WAIT_S * 1000)})


class Store:
    """One history store. Opening it creates the tables where there are none, migrates an older
    store and adds a column for each figure declared since; a newer store is refused."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = engine_for(url)
        self._open()

    # --- schema -------------------------------------------------------------------------
    def _open(self) -> None:
        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # Processes opening a new store at once would each create its tables (SQLite
                # serialises them at BEGIN IMMEDIATE).
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                             {"k": _lock_key("tfbench history schema")})
            schema.metadata.create_all(conn, tables=schema.RECORDS, checkfirst=True)
            self._add_derived_tables(conn)
            found = conn.execute(sa.select(schema.meta.c.value).where(
                schema.meta.c.key == "store_version")).scalar()
            if found is None:
                self._insert_ignoring_duplicates(conn, schema.meta, [
                    {"key": "store_version", "value": str(schema.STORE_VERSION)},
                    {"key": "created_at", "value": _now()}], ["key"])
            elif int(found) > schema.STORE_VERSION:
                raise HistoryVersionError(
                    "the history at %s was written by a newer tfbench (store version %s; this "
                    "tfbench reads up to %d): upgrade tfbench, or choose another --history"
                    % (self.where(), found, schema.STORE_VERSION))
            elif int(found) < schema.STORE_VERSION:
                self._migrate(conn, int(found))
            self._add_figure_columns(conn)

    def _add_derived_tables(self, conn) -> None:
        """Creates the derived tables a store lacks (one made before them) where this user may:
        a store they may only read is listed without them (tfbench.history.levels)."""
        if sa.inspect(conn).has_table(schema.series_levels.name):
            return
        try:
            with conn.begin_nested():   # a refusal leaves the opening transaction usable
                schema.series_levels.create(conn)
        except sa.exc.SQLAlchemyError:
            pass

    def _migrate(self, conn, found: int) -> None:
        """Brings a store of version `found` to STORE_VERSION (each step a function of its own,
        added with the version that needs it)."""
        conn.execute(schema.meta.update().where(schema.meta.c.key == "store_version")
                     .values(value=str(schema.STORE_VERSION)))

    def _add_figure_columns(self, conn) -> None:
        have = {c["name"] for c in sa.inspect(conn).get_columns("results")}
        for name, kind in schema.figure_columns():
            if name not in have:
                column = sa.Column(name, schema.SQL_TYPES[kind]())
                ddl = column.type.compile(dialect=conn.dialect)
                conn.exec_driver_sql('ALTER TABLE results ADD COLUMN "%s" %s' % (name, ddl))

    def where(self) -> str:
        from tfbench.history import location
        return location.describe(self.url)

    # --- writing ------------------------------------------------------------------------
    def _insert_ignoring_duplicates(self, conn, table: sa.Table, rows: list[dict],
                                    keys: list[str]) -> list[tuple]:
        """Inserts the rows a unique key does not already hold; returns the keys of those
        inserted (RETURNING: rowcount is -1 on some drivers). Many rows are one executemany,
        which SQLAlchemy sends as multi-row INSERTs within each database's parameter limit."""
        if not rows:
            return []
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = insert(table).on_conflict_do_nothing(index_elements=keys).returning(
            *[table.c[k] for k in keys])
        return [tuple(r) for r in conn.execute(statement, rows)]

    def add(self, result: "Recorded") -> Added:
        """Adds one result (all its workers' rows, or one worker's of a run whose other workers
        add theirs): idempotent by run id and worker."""
        return self.add_many([result])[0]

    def add_many(self, results: Sequence["Recorded"]) -> list[Added]:
        """Adds results as add() does, BATCH to a transaction (an import's rows cost a few
        statements per batch, not a transaction each; the write lock is never held for long),
        on one connection. A run id given twice goes in a later transaction than its first."""
        outcomes: list[Optional[Added]] = [None] * len(results)
        pending = list(range(len(results)))
        with self.engine.connect() as conn:
            while pending:
                batch, later, seen = [], [], set()
                for i in pending:
                    run_id = results[i].run_id
                    (later if run_id in seen or len(batch) >= BATCH else batch).append(i)
                    seen.add(run_id)
                with conn.begin():
                    done = self._add_batch(conn, [results[i] for i in batch])
                for i, added in zip(batch, done):
                    outcomes[i] = added
                pending = later
        return [o for o in outcomes if o is not None]

    def _add_batch(self, conn, batch: Sequence["Recorded"]) -> list[Added]:
        """Adds results of distinct run ids in the transaction of `conn`."""
        run_ids = [r.run_id for r in batch]
        if conn.dialect.name == "postgresql":
            # The workers of one run, added by several processes at once, combine into one
            # result: one writer at a time per run id, locks taken in one order (no deadlock).
            for key in sorted({_lock_key(k) for k in run_ids}):
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        mine = {r.run_id: list({w.key: w.as_row(r.run_id) for w in r.workers}.values())
                for r in batch}
        grown = {run_id for run_id, _ in self._insert_ignoring_duplicates(
            conn, schema.result_workers, [w for rows in mine.values() for w in rows],
            ["run_id", "worker"])}
        self._insert_ignoring_duplicates(
            conn, schema.environment,
            [{"run_id": r.run_id, "fact": k, "value": v}
             for r in batch for k, v in r.environment.items() if v not in (None, "")],
            ["run_id", "fact"])
        results = schema.results.c
        existing = dict(conn.execute(sa.select(results.run_id, results.id)
                                     .where(results.run_id.in_(run_ids))).all())
        todo = [r for r in batch if r.run_id not in existing or r.run_id in grown]
        # A new result's workers are its own (a result and its workers are only ever added
        # together); one that grew is read back whole.
        workers = {r.run_id: mine[r.run_id] for r in todo if r.run_id not in existing}
        again = [r.run_id for r in todo if r.run_id in existing]
        if again:
            stored = schema.result_workers
            for w in conn.execute(sa.select(stored).where(stored.c.run_id.in_(again))
                                  .order_by(stored.c.run_id, stored.c.worker)).mappings():
                workers.setdefault(w["run_id"], []).append(w)
        inserts, outcome = [], {}
        for r in todo:
            stored_rows = workers.get(r.run_id, [])
            values = r.summary([json.loads(w["row_json"]) for w in stored_rows], stored_rows)
            if r.run_id in existing:
                conn.execute(schema.results.update().where(
                    results.id == existing[r.run_id]).values(**values))
                outcome[r.run_id] = "updated"
            else:
                inserts.append(values)
                outcome[r.run_id] = "added"
        if inserts:
            conn.execute(schema.results.insert(), inserts)
        return [Added(r.run_id, outcome.get(r.run_id, "already")) for r in batch]

    def add_validation(self, validation_id: str, started: str, level: str,
                       checks: Sequence[Mapping[str, Any]]) -> Added:
        """Adds a validation's verdict rows (idempotent by validation id)."""
        with self.engine.begin() as conn:
            rows = [{"validation_id": validation_id, "row": i, "started": started,
                     "level": level, **{k: c.get(k) for k in VALIDATION_FIELDS}}
                    for i, c in enumerate(checks)]
            added = self._insert_ignoring_duplicates(conn, schema.validation_checks, rows,
                                                     ["validation_id", "row"])
        return Added(validation_id, "added" if added else "already")

    # --- reading ------------------------------------------------------------------------
    def frame(self, where: Optional[Any] = None, columns: Optional[Sequence[str]] = None,
              ids: Optional[Iterable[int]] = None):
        """Every result (pandas DataFrame, one row per result, oldest first), optionally
        filtered by a SQLAlchemy condition on `results` and limited to some of its columns
        (reading every figure of 100,000 results takes seconds; a few columns, a fraction).
        `ids`: only the results of these ids (results.id), in id order."""
        import pandas as pd
        table = schema.results
        names = list(columns) if columns is not None else [c.name for c in table.columns]
        query = sa.select(*[table.c[n] for n in names])
        if where is not None:
            query = query.where(where)
        if ids is None:
            queries = [query.order_by(table.c.timestamp, table.c.id)]
        else:   # in chunks: a statement takes a bounded number of parameters
            wanted = sorted(set(int(i) for i in ids))
            queries = [query.where(table.c.id.in_(wanted[i:i + 500])).order_by(table.c.id)
                       for i in range(0, len(wanted), 500)]
        records: list[tuple] = []
        with self.engine.connect() as conn:
            for q in queries:
                # The driver's tuples: SQLAlchemy's rows cost more to make than the query, and
                # pandas reads them element by element. Every column type here is one the
                # drivers return as is (text, integers, floats).
                records += conn.execute(q).cursor.fetchall()
        return pd.DataFrame.from_records(records, columns=names)

    def environment(self, run_ids: Optional[Iterable[str]] = None) -> dict[str, dict[str, str]]:
        """run_id -> {fact: value}."""
        table = schema.environment
        if run_ids is None:
            queries = [sa.select(table)]
        else:   # in chunks: a statement takes a bounded number of parameters
            wanted = sorted(set(run_ids))
            queries = [sa.select(table).where(table.c.run_id.in_(wanted[i:i + 500]))
                       for i in range(0, len(wanted), 500)]
        out: dict[str, dict[str, str]] = {}
        with self.engine.connect() as conn:
            for query in queries:
                for row in conn.execute(query):
                    out.setdefault(row.run_id, {})[row.fact] = row.value
        return out

    def levels(self, figure: str) -> dict[str, dict[str, Any]]:
        """series_key -> its series_levels row for `figure` (tfbench.history.levels)."""
        from tfbench.history import levels
        return levels.read(self.engine, figure)

    def save_levels(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        """Keeps series_levels rows (tfbench.history.levels): False where the store refused."""
        from tfbench.history import levels
        return levels.write(self.engine, rows)

    def count(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(schema.results)).scalar()

    def close(self) -> None:
        self.engine.dispose()


# --- what is recorded -----------------------------------------------------------------------
_COLUMNS = schema.figure_columns()   # (name, type) of each figure's column


def _key(values: Sequence[Any]) -> str:
    return hashlib.sha1(json.dumps([None if v in ("", None) else str(v) for v in values])
                        .encode()).hexdigest()


def _typed(name: str, value: Any) -> Any:
    """A figure's cell as the store keeps it: None when empty (never 0.0 for 'not measured')."""
    return _typed_as(figures.BY_NAME[name].type, value)


def _typed_as(kind: str, value: Any) -> Any:
    """_typed, the figure's type given (an import types 100,000 rows of 150 figures)."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    if kind == "text":
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(number) or math.isinf(number):
        return None
    return int(number) if kind in ("int", "bool") else number


@dataclass(frozen=True)
class Worker:
    """One worker's row of a result and the machine it ran on."""
    key: str                 # unique within the run: host and position
    row: Mapping[str, Any]   # its figures, by name (CSV cells or values)
    hostname: str = ""
    cpu_model: str = ""
    gpu_model: str = ""
    gpu_uuids: tuple[str, ...] = ()

    def as_row(self, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "worker": self.key, "hostname": self.hostname or None,
                "cpu_model": self.cpu_model or None, "gpu_model": self.gpu_model or None,
                "gpu_uuids": ",".join(self.gpu_uuids) or None,
                "row_json": json.dumps({k: v for k, v in self.row.items()
                                        if v not in (None, "")}, sort_keys=True, default=str)}


@dataclass(frozen=True)
class Recorded:
    """A result as the store takes it: its run id, where it came from, its workers' rows and
    the environment facts of the run (tfbench.history.facts)."""
    run_id: str
    source: str
    workers: tuple[Worker, ...]
    environment: Mapping[str, str]

    def summary(self, rows: list[dict], workers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The `results` row from every stored worker row: combined as the figure table
        declares, typed; the series and configuration keys; the machine's identity."""
        # The chief's row first (its run id is the result's): combine takes its figures.
        rows = sorted(rows, key=lambda r: str(r.get("run_id")) != self.run_id)
        combined = combine(rows)
        values = {name: _typed_as(kind, combined.get(name)) for name, kind in _COLUMNS}
        values["run_id"] = self.run_id
        config = [values.get(name) for name in figures.CONFIGURATION]
        hosts = sorted({w["hostname"] for w in workers if w["hostname"]})
        machine = ",".join(hosts) or values.get("hostname") or ""
        uuids = sorted({u for w in workers for u in (w["gpu_uuids"] or "").split(",") if u})
        gpu_models = sorted({w["gpu_model"] for w in workers if w["gpu_model"]})
        cpu_models = sorted({w["cpu_model"] for w in workers if w["cpu_model"]})
        values.update({
            "source": self.source, "recorded_at": _now(),
            "config_key": _key(config)[:16], "series_key": _key(config + [machine])[:16],
            "machine": machine or None, "gpu_model": " + ".join(gpu_models) or None,
            "gpu_count": len(uuids) or None, "gpu_uuids": ",".join(uuids) or None,
            "cpu_model": " + ".join(cpu_models) or None, "worker_count": len(rows)})
        return values


def combine(rows: list[dict]) -> dict[str, Any]:
    """One result's figures from its workers' rows (one row: itself), each figure combined as
    it declares (tfbench.report.load.combine_workers, the reports' one rule)."""
    if len(rows) == 1:
        return dict(rows[0])
    import pandas as pd
    from tfbench.report.load import combine_workers
    names = sorted({k for r in rows for k in r})
    frame = pd.DataFrame([{k: r.get(k) for k in names} for r in rows], dtype=object)
    return {k: (None if _missing(v) else v) for k, v in combine_workers(frame).items()}


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(value != value)
    except (TypeError, ValueError):
        return False


def open_store(flag: Optional[str], prefix: str = "") -> Store:
    """The history in force (--history's value `flag`, None when not given; else
    TFBENCH_HISTORY; else the default file), opened for a command that reads it. UsageError in
    one line (after `prefix`, the option that asked for it) when it is off or cannot be
    opened."""
    from tfbench.history import location
    url = location.resolve(flag)
    if url is None:
        raise UsageError("%sthe history is off (--history or TFBENCH_HISTORY is empty): give "
                         "--history=FILE or a postgresql:// URL" % prefix)
    try:
        return Store(url)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line, the driver's words translated
        raise UsageError("%sthe history at %s cannot be opened: %s"
                         % (prefix, location.describe(url), history_errors.why(exc))) from None
