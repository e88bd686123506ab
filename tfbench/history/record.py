"""What tfbench adds to the history, from a run, a results CSV's rows or a JSON manifest, and the
one line the console prints about it. A store that cannot be written never costs the run: the
line says so and gives the `tfbench history import` command that adds the result later.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfbench import figures
from tfbench.history.store import Recorded, Worker
from tfbench.results import RunResult

# Sources a result comes from (the `results.source` column). A command that runs tfbench
# children (sweep, evaluate, validate, launch) names itself to them in SOURCE_VAR.
SOURCES = ("run", "sweep", "evaluate", "validate", "launch", "import")
SOURCE_VAR = "TFBENCH_HISTORY_SOURCE"


def source() -> str:
    """The source of the results this process adds: its parent command's, else a run."""
    named = os.environ.get(SOURCE_VAR, "run")
    return named if named in SOURCES else "run"


def facts(env: Optional[Mapping[str, Any]]) -> dict[str, str]:
    """The environment facts a result depends on, from an environment capture (the run's
    `before`): the key fields the evaluation report compares (driver, CUDA, cuDNN, TensorFlow,
    Keras, container, kernel, CPU, tfbench and its commit), the host left out (it is the
    machine's identity, not a fact that changes under it)."""
    from tfbench.report.evaluation_env import key_values
    env = dict(env or {})
    # No NVML reading at all (a CSV row without its manifest) says nothing about the GPUs;
    # key_values would read it as 'none', a change against every run that has one.
    unknown = {"Host"} | (set() if "nvidia" in env else {"GPUs on the host (NVML)"})
    return {k: v for k, v in key_values(env).items() if v not in (None, "") and k not in unknown}


def _used_gpus(env: Mapping[str, Any], row: Mapping[str, Any],
               used: Optional[Sequence[Mapping[str, Any]]] = None) -> list[Mapping[str, Any]]:
    """The GPUs (or MIG slices) the run used, each with its NVML name and UUID; none on a CPU
    run, and none where which ones is not certain.

    `used`: the run's own list (the NVML monitor's `gpus`, result extra), which
    tfbench.measure.nvml.resolve_handles matched to CUDA's numbering: --gpu_indices, horovod's
    local rank, CUDA_DEVICE_ORDER, UUID and MIG entries of CUDA_VISIBLE_DEVICES. Without it,
    the environment capture's GPUs narrowed by its CUDA_VISIBLE_DEVICES, read as the driver
    reads it (tfbench.measure.cuda_visible), and only when the run used all of them: the
    capture does not say which of them a run of fewer used. Ordinals count in NVML's order,
    which is the PCI bus order CUDA numbers by under CUDA_DEVICE_ORDER=PCI_BUS_ID (tfbench sets
    it unless the user set another); under CUDA's default, fastest first, they name no GPU
    NVML can tell."""
    if str(row.get("device_kind") or "") != "gpu":
        return []
    if used:
        return [g for g in used if isinstance(g, Mapping)]
    from tfbench.measure import cuda_visible
    gpus = list((env.get("nvidia") or {}).get("gpus") or [])
    env_vars = env.get("env_vars") or {}
    spec = env_vars.get(cuda_visible.VARIABLE)
    pci_order = env_vars.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len(gpus) <= 1

    def lookup(entry: cuda_visible.Entry) -> Mapping[str, Any]:
        if isinstance(entry, int):
            if not pci_order:
                raise cuda_visible.NoDevice("CUDA numbers GPUs fastest first")
            if entry >= len(gpus):
                raise cuda_visible.NoDevice("%d GPU(s)" % len(gpus))
            return gpus[entry]
        found = [g for g in gpus if str(g.get("uuid") or "").lower().startswith(entry.lower())]
        if len(found) != 1:
            raise cuda_visible.NoDevice("%d GPU(s) match" % len(found))
        return found[0]

    visible = cuda_visible.read(spec, lookup, key=lambda g: str(g.get("uuid") or id(g)))
    chosen = gpus if visible is None else visible.devices
    try:
        count = int(float(row.get("num_devices") or 0))
    except ValueError:
        count = 0
    return chosen if chosen and count in (0, len(chosen)) else []


def worker(row: Mapping[str, Any], env: Optional[Mapping[str, Any]],
           used: Optional[Sequence[Mapping[str, Any]]] = None) -> Worker:
    """One worker's row with the machine's identity its environment capture gives (its GPUs:
    `used`, the run's own list of them, where it has one; _used_gpus). Its key is
    its host and its own run id (each worker process has one), so the same row recorded by its
    own process and again by the launcher that gathered it (or an import) is one worker."""
    env = env or {}
    host = str(row.get("hostname") or env.get("hostname") or "")
    gpus = _used_gpus(env, row, used)
    gpu_model = " + ".join(dict.fromkeys(str(g.get("name")) for g in gpus if g.get("name")))
    if not gpu_model and str(row.get("device_kind") or "") == "gpu":
        gpu_model = str(row.get("device_name") or "")
    return Worker(key="%s#%s" % (host, row.get("run_id") or ""), row=dict(row), hostname=host,
                  cpu_model=str((env.get("cpu") or {}).get("model") or ""),
                  gpu_model=gpu_model,
                  gpu_uuids=tuple(str(g["uuid"]) for g in gpus if g.get("uuid")))


def with_manifest_figures(row: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """A CSV row with the figures only the JSON manifest keeps (its `extra`: no CSV column,
    no structure), which the store keeps too; the row's own cells win."""
    cells = dict(row)
    for name, value in extra.items():
        figure = figures.BY_NAME.get(name)
        if figure is not None and not figure.csv and figure.type != "json":
            cells.setdefault(name, value)
    return cells


def from_run(row: Mapping[str, str], result_extra: Mapping[str, Any],
             environment: Mapping[str, Any], run_id: str, source: str = "run") -> Recorded:
    """A finished (or failed) run: its CSV row, the figures only its manifest keeps, its
    environment before the run."""
    cells = with_manifest_figures(row, result_extra)
    env = environment.get("before") or {}
    return Recorded(run_id=run_id, source=source,
                    workers=(worker(cells, env, result_extra.get("gpus")),),
                    environment=facts(env))


def add_run(flag: Optional[str], result: RunResult, row: Optional[Mapping[str, str]],
            files: Sequence[str]) -> Optional[str]:
    """Adds a finished (or failed) run, whose CSV row is `row` (the one output.files wrote), to
    the history --history (`flag`) names; the console line about it. On several workers the
    chief alone adds the run: one result per run."""
    from tfbench.history import location
    if not result.chief or result.server_task or row is None:
        return None
    recorded = from_run(row, result.extra, result.environment, result.run_id, source())
    return write(location.resolve(flag), [recorded], files)


def from_rows(rows: Sequence[Mapping[str, str]], source: str,
              manifests: Optional[Mapping[str, Mapping[str, Any]]] = None,
              one_run: bool = False) -> list[Recorded]:
    """Results from a results CSV's rows, one per run id; with `one_run`, the rows are the
    workers of one run (a launch's hosts), the first the chief's, whose run id the result
    takes. A manifest, where one is known, gives the environment."""
    manifests = manifests or {}
    by_run: dict[str, list[Mapping[str, str]]] = {}
    for row in rows:
        if row.get("run_id"):
            key = str(rows[0]["run_id"]) if one_run else str(row["run_id"])
            by_run.setdefault(key, []).append(row)
    out = []
    for run_id, run_rows in by_run.items():
        manifest = manifests.get(run_id) or {}
        env = (manifest.get("environment") or {}).get("before") or {}
        used = (manifest.get("extra") or {}).get("gpus")   # the chief's, as its environment
        cells = [dict(r, run_id=r["run_id"]) for r in run_rows]
        if len(cells) == 1:
            cells[0] = with_manifest_figures(cells[0], manifest.get("extra") or {})
        out.append(Recorded(run_id=run_id, source=source,
                            workers=tuple(worker(r, env, used) if i == 0 else worker(r, None)
                                          for i, r in enumerate(cells)),
                            environment=facts(env)))
    return out


def import_command(paths: Iterable[str]) -> str:
    """The command that adds these files' results to the history later."""
    return "tfbench history import " + " ".join(shlex.quote(os.path.abspath(p)) for p in paths)


def write(url: Optional[str], results: Sequence[Recorded], files: Sequence[str] = (),
          quiet_when_already: bool = False) -> Optional[str]:
    """Adds the results; returns the console line (None when the history is off). Never raises:
    a store that cannot be written gives one line with the import command for `files` (the CSV
    and manifests that hold the results)."""
    if url is None or not results:
        return None
    from tfbench.history import location
    where = location.describe(url)
    try:
        from tfbench.history.store import Store
        store = Store(url)
        try:
            outcomes = store.add_many(results)
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - the run's results are safe in its CSV and manifest
        from tfbench.history.errors import why
        later = (": add it later with `%s`" % import_command(files)) if files else ""
        return "History: not written to %s (%s)%s" % (where, why(exc), later)
    added = sum(o.outcome != "already" for o in outcomes)
    if quiet_when_already and not added:
        return None
    if len(results) == 1:
        verb = {"added": "result added to", "updated": "workers' rows added to the result in",
                "already": "result already in"}[outcomes[0].outcome]
        return "History: %s %s (run %s)" % (verb, where, results[0].run_id)
    return "History: %d result(s) added to %s, %d already there" % (
        added, where, len(results) - added)


def validation_id(meta: Mapping[str, Any]) -> str:
    """A validation's identity in the history: its host and start time (validate.json's)."""
    return "%s@%s" % (meta.get("host") or "", meta.get("started") or "")


def write_validation(url: Optional[str], meta: Mapping[str, Any],
                     checks: Sequence[Mapping[str, Any]], json_path: str) -> Optional[str]:
    """Adds a validation's verdict rows (its training runs added themselves); the console
    line, as write()'s."""
    if url is None or not checks:
        return None
    from tfbench.history import location
    where = location.describe(url)
    identity = validation_id(meta)
    try:
        from tfbench.history.store import Store
        store = Store(url)
        try:
            store.add_validation(identity, str(meta.get("started") or ""),
                                 str(meta.get("level") or ""), checks)
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - the verdicts are safe in validate.json
        from tfbench.history.errors import why
        return "History: not written to %s (%s): add it later with `%s`" % (
            where, why(exc), import_command([json_path]))
    return "History: %d verdict(s) of validation %s added to %s" % (len(checks), identity,
                                                                    where)
