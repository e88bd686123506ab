"""Results of a synthetic history, one call per run: a results CSV row and the environment
capture its manifest would hold, added through tfbench.history.record as an import adds them.
The history's views, series and page tests build their stores with it; `fleet_store` is the
page's and the docs' example (a driver update that cost one host 8%, a faster host, an outlier,
a failed run, a host below the fleet); MemoryStore, the real store's reading side in memory,
for the quick tests."""

from __future__ import annotations

import datetime
import json
from typing import Optional, Sequence

import pandas as pd

from tfbench.history import location, record, schema, store

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
START = datetime.datetime(2026, 10, 1, tzinfo=datetime.timezone.utc)


def open_store(path) -> store.Store:
    return store.Store(location.url_for(str(path)))


class MemoryStore:
    """The reading side of tfbench.history.store.Store (frame, environment, where, close; and
    the derived series_levels: levels, save_levels) over results kept in memory, each added as
    Store.add adds it (its workers' rows through JSON, Recorded.summary): making a SQLite store
    and writing to it takes a quarter of a second here (its tables made, each commit synced to
    disk), too slow for the quick tests of what is read from it. tests/history/test_series
    checks its frame against a real store's, test_levels its listings against real ones."""

    def __init__(self) -> None:
        self.recorded: list[store.Recorded] = []      # as added, for Store.add_many
        self._rows: dict[str, dict] = {}
        self._workers: dict[str, dict[str, dict]] = {}
        self._facts: dict[str, dict[str, str]] = {}
        self._levels: dict[tuple[str, str], dict] = {}     # series_levels

    def add(self, result: store.Recorded) -> None:
        self.recorded.append(result)
        workers = self._workers.setdefault(result.run_id, {})
        for w in result.workers:
            workers.setdefault(w.key, w.as_row(result.run_id))
        for fact, value in result.environment.items():
            if value not in (None, ""):
                self._facts.setdefault(result.run_id, {}).setdefault(fact, value)
        ordered = [workers[k] for k in sorted(workers)]
        values = result.summary([json.loads(w["row_json"]) for w in ordered], ordered)
        values["id"] = self._rows.get(result.run_id, {}).get("id", len(self._rows) + 1)
        self._rows[result.run_id] = values

    def frame(self, where=None, columns: Optional[Sequence[str]] = None,
              ids=None) -> pd.DataFrame:
        assert where is None, "MemoryStore reads no SQL condition"
        names = [c.name for c in schema.results.columns]
        frame = pd.DataFrame(list(self._rows.values()), columns=names)
        if ids is not None:
            frame = frame[frame["id"].isin(set(ids))].sort_values("id")
        else:
            frame = frame.sort_values(["timestamp", "id"])
        frame = frame.reset_index(drop=True)
        return frame[list(columns)] if columns is not None else frame

    def levels(self, figure: str) -> dict:
        return {k: dict(row) for (k, f), row in self._levels.items() if f == figure}

    def save_levels(self, rows) -> bool:
        for row in rows:
            self._levels[row["series_key"], row["figure"]] = dict(row)
        return True

    def environment(self, run_ids=None) -> dict[str, dict[str, str]]:
        return {k: dict(v) for k, v in self._facts.items()
                if run_ids is None or k in set(run_ids)}

    def where(self) -> str:
        return "memory"

    def close(self) -> None:
        pass


def environment(host: str, driver: str = "570.86.15", tensorflow: str = "2.21.0",
                gpu: str = H100, uuid: Optional[str] = None, gpus: int = 1) -> dict:
    """An environment capture (the manifest's environment.before) of a host."""
    uuid = uuid or "GPU-%s" % host
    return {"hostname": host, "tensorflow": {"version": tensorflow},
            "nvidia": {"driver_version": driver, "gpus": [
                {"nvml_index": i, "name": gpu, "uuid": uuid if i == 0 else "%s-%d" % (uuid, i)}
                for i in range(gpus)]}}


def add(s: store.Store, run_id: str, day: float, value: Optional[float], *,
        host: str = "gpu-node-1", model: str = "resnet50", mode: str = "training",
        gpu: str = H100, devices: int = 1, figure: str = "images_per_sec",
        env: Optional[dict] = None, **cells) -> None:
    """One result `day` days after START; value None: a failed run (status error, no value)."""
    when = START + datetime.timedelta(days=day)
    row = {"run_id": run_id, "status": "ok" if value is not None else "error",
           "model": model, "mode": mode, "precision": "fp16", "batch_size": "64",
           "image_size": "224", "num_devices": str(devices), "device_kind": "gpu",
           "device_name": gpu, "hostname": host, "timestamp": when.isoformat()}
    if value is None:
        row["error"] = "OOM"
    else:
        row[figure] = repr(float(value))
    row.update({k: str(v) for k, v in cells.items()})
    env = env if env is not None else environment(host, gpu=gpu, gpus=devices)
    for result in record.from_rows([row], "run", {run_id: {"environment": {"before": env}}}):
        s.add(result)


def add_series(s: store.Store, values: Sequence[Optional[float]], *, prefix: str,
               host: str = "gpu-node-1", drivers: Optional[Sequence[str]] = None,
               tensorflows: Optional[Sequence[str]] = None, first_day: float = 0.0,
               spreads: Optional[Sequence[Optional[float]]] = None, **kwargs) -> list[str]:
    """A run a day per value (None: failed); drivers / tensorflows: each run's versions.
    spreads: each run's spread_pct over 3 repeats. Returns the run ids, in order."""
    ids = []
    for i, value in enumerate(values):
        run_id = "%s-%02d" % (prefix, i)
        env = environment(host, driver=drivers[i] if drivers else "570.86.15",
                          tensorflow=tensorflows[i] if tensorflows else "2.21.0",
                          gpu=kwargs.get("gpu", H100), gpus=kwargs.get("devices", 1))
        cells = dict(kwargs)
        if spreads is not None and spreads[i] is not None and value is not None:
            cells.update(num_runs=3, spread_pct=spreads[i])
        add(s, run_id, first_day + i, value, host=host, env=env, **cells)
        ids.append(run_id)
    return ids


def noisy(level: float, count: int, cv: float, seed: int) -> list[float]:
    """`count` runs around `level` with run-to-run noise `cv` (a fraction)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return [float("%.5g" % v) for v in level * (1.0 + cv * rng.standard_normal(count))]


def fleet_store(path=None, runs: int = 30):
    """Four H100 hosts and an A100 one, a run a day for `runs` days of resnet50 training (and
    vit_b16 inference on gpu-node-1 and -2): gpu-node-1's driver goes 570.86.15 -> 580.65.06
    half-way and its training loses 8% (its inference does not move); gpu-node-2's TensorFlow
    goes 2.20.0 -> 2.21.0 on day 12 and its inference gets 7% faster (its training does not
    move; one of its training runs is an outlier, one failed); gpu-node-3 gains 6% a week
    before the end with no recorded environment change; gpu-node-4 sits 9% below the fleet."""
    s = MemoryStore()
    half, tf_day = runs // 2, 12

    def env(host: str, day: int, gpu: str = H100) -> dict:
        return environment(host, gpu=gpu,
                           driver="580.65.06" if host == "gpu-node-1" and day >= half
                           else "570.86.15",
                           tensorflow="2.20.0" if host == "gpu-node-2" and day < tf_day
                           else "2.21.0")

    spreads = [round(0.8 + 0.4 * ((i * 7) % 5) / 4, 2) for i in range(runs)]
    training = {
        "gpu-node-1": noisy(9800, half, 0.008, 1) + noisy(9016, runs - half, 0.008, 2),
        "gpu-node-2": noisy(9750, runs, 0.008, 3),
        "gpu-node-3": noisy(9780, runs - 7, 0.008, 4) + noisy(10370, 7, 0.008, 5),
        "gpu-node-4": noisy(8900, runs, 0.008, 6)}
    training["gpu-node-2"][9] = round(training["gpu-node-2"][9] * 0.78, 1)
    training["gpu-node-2"][20] = None
    for n, (host, values) in enumerate(training.items(), 1):
        for day, value in enumerate(values):
            extra = {"num_runs": 3, "spread_pct": spreads[day]} if value is not None else {}
            add(s, "n%d-%02d" % (n, day), day, value, host=host, env=env(host, day), **extra)
    for day, value in enumerate(noisy(5200, runs, 0.01, 7)):
        add(s, "a1-%02d" % day, day, value, host="a100-node-1", gpu=A100,
            env=env("a100-node-1", day, A100))
    latency = {"gpu-node-1": noisy(4.10, runs, 0.01, 10),
               "gpu-node-2": noisy(4.40, tf_day, 0.01, 11)
               + noisy(4.09, runs - tf_day, 0.01, 12)}
    for n, (host, values) in enumerate(latency.items(), 1):
        for day, value in enumerate(values):
            add(s, "lat%d-%02d" % (n, day), day + 0.5, value, host=host, model="vit_b16",
                mode="forward_only", figure="latency_ms_p50", env=env(host, day),
                images_per_sec=round(64 * 1000.0 / value, 1))
    if path is None:
        return s
    real = open_store(path)
    real.add_many(s.recorded)
    return real
