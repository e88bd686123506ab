"""Each series' current level, kept: Series.current (the median of the series' current segment
and its change against the segment before) for every series a listing shows, stored in the
history's derived table `series_levels`, so that `tfbench history` finds the change points only
of the series whose results changed since the last listing (a listing of 1,000 unchanged series
reads them; finding them takes over a second).

A row is keyed by a digest of everything Series.current reads: the figure, the series' values in
order with their spreads' inputs (series.SPREAD_INPUTS), and the code that finds the level (the
source of tfbench.history.changes and tfbench.history.series). A row whose digest is not the
series' is computed again, never trusted: a new result, a worker's row that joined a result, a
filter that cut the series, another tfbench's method. The table is never the only copy of
anything; writers race harmlessly (the last one wins, and each wrote a pure function of its
inputs); a store that refuses the write (read-only, locked) is listed all the same, uncached.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import math
from typing import Any, Mapping, Optional, Sequence

import sqlalchemy as sa

from tfbench.history import changes as cp
from tfbench.history import schema
from tfbench.history import series as hs

Level = tuple[Optional[float], Optional[float]]   # Series.current()


@functools.lru_cache(maxsize=1)
def _method() -> Optional[bytes]:
    """A digest of the code that finds a level (any change to it is a new method); None where
    its source cannot be read: then nothing is kept."""
    digest = hashlib.sha1()
    for module in (cp, hs):
        try:
            with open(module.__file__, "rb") as handle:
                digest.update(handle.read())
        except (OSError, TypeError):
            return None
    return digest.digest()


def digest(series: hs.Series, method: bytes) -> str:
    """The key of `series`' level: what Series.current reads, and the code that reads it
    (`method`)."""
    values, spreads = series.inputs()
    out = hashlib.sha1(method)
    out.update(series.figure.encode())
    out.update(values.astype("<f8").tobytes())
    out.update(spreads.astype("<f8").tobytes())
    return out.hexdigest()


def current(store: Any, found: Sequence[hs.Series], save: bool = True) -> dict[str, Level]:
    """series key -> Series.current() of each series of `found` (one figure's): the store's
    row where its digest is the series', else computed, and (`save`) stored for the next
    listing. `store`: a history store (levels, save_levels)."""
    method = _method()
    if not found or method is None:
        return {s.key: s.current() for s in found}
    kept = store.levels(found[0].figure)
    out: dict[str, Level] = {}
    fresh = []
    for s in found:
        key = digest(s, method)
        row = kept.get(s.key)
        if row is not None and row["inputs"] == key:
            out[s.key] = (row["level"], row["change_pct"])
            continue
        level, change = out[s.key] = s.current()
        if all(v is None or math.isfinite(v) for v in (level, change)):
            # (A change from a level of 0 is infinite: not every database keeps inf.)
            ids = s.ok_ids
            fresh.append({"series_key": s.key, "figure": s.figure, "inputs": key,
                          "runs": len(ids), "last_id": int(ids[-1]) if len(ids) else None,
                          "level": level, "change_pct": change})
    if save and fresh:
        store.save_levels(fresh)
    return out


# --- the table (a Store's levels and save_levels) --------------------------------------------
def read(engine: sa.Engine, figure: str) -> dict[str, dict[str, Any]]:
    """series_key -> its series_levels row for `figure` ({} where the store has no table: one
    made before it that this user may only read)."""
    table = schema.series_levels
    try:
        with engine.connect() as conn:
            return {r["series_key"]: dict(r) for r in conn.execute(
                sa.select(table).where(table.c.figure == figure)).mappings()}
    except sa.exc.SQLAlchemyError:
        return {}


def write(engine: sa.Engine, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Writes series_levels rows, each replacing that of its series and figure (the last
    writer wins). Best effort: False where the store refuses (read-only, locked for over a
    second), which costs the listing nothing."""
    if not rows:
        return True
    table = schema.series_levels
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                # Before BEGIN IMMEDIATE (on the driver's connection: SQLAlchemy's would begin):
                # a listing never waits a writer's lock for long.
                cursor = conn.connection.dbapi_connection.cursor()
                cursor.execute("PRAGMA busy_timeout = 1000")
                cursor.close()
                from sqlalchemy.dialects.sqlite import insert
            else:
                from sqlalchemy.dialects.postgresql import insert
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql("SET LOCAL lock_timeout = '1s'")
                statement = insert(table)
                keys = ("series_key", "figure")
                conn.execute(statement.on_conflict_do_update(
                    index_elements=list(keys), set_={c.name: statement.excluded[c.name]
                                                     for c in table.columns if c.name not in keys}),
                    # In key order: two writers lock rows in one order (no deadlock).
                    [dict(r, computed_at=now) for r in sorted(
                        rows, key=lambda r: (r["series_key"], r["figure"]))])
        return True
    except sa.exc.SQLAlchemyError:
        return False
