"""A configuration's accepted level in the history: the baseline `tfbench validate
--baseline=history` holds a run to.

For one figure of one configuration on one host, the level is the host's own: the median of its
series' current segment (tfbench.history.series.Series.current: the runs since its last change
point, outliers aside; all its runs when it never changed). A host without one (no ok result of the
configuration with a value of the figure) gets the fleet's: the median of the latest values of
every host that ran the configuration on the same GPU model (series.fleet). Neither: no level.

keys() gives a results row's configuration and series keys exactly as the store computes them
(store.Recorded.summary), so no caller recomputes them.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfbench.history import record, schema
from tfbench.history import series as hs
from tfbench.history import store as store_lib
from tfbench.history.store import Recorded, Store

HOST, FLEET = "host", "fleet"


def keys(row: Mapping[str, Any], hostname: str = "") -> tuple[str, str]:
    """(config_key, series_key) the store gives the result of this results row (CSV cells or
    values), run on its own `hostname` cell, else on `hostname`."""
    worker = record.worker(row, {"hostname": hostname})
    values = Recorded("", "", (worker,), {}).summary([dict(worker.row)], [worker.as_row("")])
    return values["config_key"], values["series_key"]


@dataclasses.dataclass(frozen=True)
class Level:
    """A figure's accepted level and where it comes from."""
    figure: str
    value: float
    source: str          # HOST or FLEET
    count: int           # HOST: runs of the current segment; FLEET: hosts
    gpu_model: str = ""  # FLEET: the GPU model of its hosts

    def text(self) -> str:
        """Where the level comes from, as a verdict names its baseline."""
        if self.source == HOST:
            return "the history (this host's level: the median of its current segment, %d " \
                   "run%s)" % (self.count, "" if self.count == 1 else "s")
        return "the history (the fleet's median: %d host%s' latest%s)" % (
            self.count, "" if self.count == 1 else "s",
            " on " + self.gpu_model if self.gpu_model else "")


def open_store(flag: Optional[str]) -> Store:
    """The history in force, opened for --baseline=history (store.open_store)."""
    return store_lib.open_store(flag, "--baseline=history: ")


def _host_level(rows: Any, figure: str) -> Optional[Level]:
    found = [s for s in hs.build(rows, figure) if s.values]
    if not found:
        return None
    series = found[0]
    median, _ = series.current()
    changes = series.segment().changes
    runs = changes[-1].runs_after if changes else len(series.values)
    return Level(figure, float(median), HOST, runs)


def _fleet_level(rows: Any, figure: str, gpu_model: str) -> Optional[Level]:
    members = hs.fleet(rows, figure, "host")
    if not members:
        return None
    same = [m for m in members if m.gpu_model.strip().lower() == gpu_model.strip().lower()]
    # The configuration holds the GPU model as the run names it (device_name); NVML's name of
    # the host's GPUs picks among the fleet's when they differ.
    chosen = same or members
    models = sorted({m.gpu_model for m in chosen if m.gpu_model})
    return Level(figure, float(statistics.median(m.latest for m in chosen)), FLEET, len(chosen),
                 " + ".join(models))


def levels(store: Store, row: Mapping[str, Any], names: Sequence[str], hostname: str = "",
           gpu_model: str = "", exclude: Iterable[str] = ()) -> dict[str, Level]:
    """The accepted level of each figure of `names` the history has one of (see the module), for
    the configuration of results row `row` on `hostname` (its own hostname cell first);
    `gpu_model`: the host's GPU model, for the fleet; `exclude`: run ids left out (the results
    being judged, which the history may already hold)."""
    config_key, series_key = keys(row, hostname)
    frame = store.frame(schema.results.c.config_key == config_key)
    skip = {str(r) for r in exclude if r}
    frame = hs.filtered(frame[~frame["run_id"].astype(str).isin(skip)])
    own = frame[frame["series_key"] == series_key]
    others = frame[frame["series_key"] != series_key]
    out = {}
    for name in names:
        if name not in hs.numeric_figures():
            continue
        level = _host_level(own, name) if len(own) else None
        if level is None and len(others):
            level = _fleet_level(others, name, gpu_model)
        if level is not None:
            out[name] = level
    return out
