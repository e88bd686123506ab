"""What an evaluation ran on, and what changed while it ran, from its runs' JSON manifests.

Every run records the environment manifest (tfbench.measure.environment) before and after it,
and the fields that changed in between (extra.environment_changes). An evaluation spans many
runs, possibly several sessions when it was resumed, so this module also compares the key fields
(GPU, driver, CUDA, cuDNN, TensorFlow, container, host) of every run, before and after, with the
first run's: a driver updated between two sessions is flagged like one updated during a run.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import pandas as pd


def _get(env: dict, path: str) -> Any:
    value: Any = env
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _gpus(env: dict) -> Optional[str]:
    nvidia = env.get("nvidia") or {}
    names = [str(g.get("name")) for g in nvidia.get("gpus") or [] if g.get("name")]
    if names:
        counts = {n: names.count(n) for n in dict.fromkeys(names)}
        return ", ".join("%d x %s" % (c, n) if c > 1 else n for n, c in counts.items())
    reason = nvidia.get("reason")
    return "none (%s)" % reason if reason else "none"


def _joined(*paths: str) -> Callable[[dict], Optional[str]]:
    def get(env: dict) -> Optional[str]:
        parts = [str(v) for v in (_get(env, p) for p in paths) if v not in (None, "")]
        return " ".join(parts) if parts else None
    return get


def _container(env: dict) -> Optional[str]:
    c = env.get("container") or {}
    if not c.get("in_container"):
        return "none" if c else None
    return c.get("nvidia_image") or c.get("runtime") or "yes"


# Field title -> how to read it from a manifest.
KEY_FIELDS: tuple[tuple[str, Callable[[dict], Optional[str]]], ...] = (
    ("GPUs on the host (NVML)", _gpus),
    ("NVIDIA driver", _joined("nvidia.driver_version")),
    ("CUDA (driver)", _joined("nvidia.cuda_driver_version")),
    ("CUDA (TensorFlow build)", _joined("tensorflow.build.cuda_version")),
    ("cuDNN (TensorFlow build)", _joined("tensorflow.build.cudnn_version")),
    ("TensorFlow", _joined("tensorflow.version", "tensorflow.git_version")),
    ("Keras", _joined("keras.version")),
    ("Container", _container),
    ("Kernel", _joined("os.kernel")),
    ("CPU", _joined("cpu.model")),
    ("Host", _joined("hostname")),
    ("tfbench", _joined("tfbench.version", "tfbench.git_hash")),
)


def key_values(env: Optional[dict]) -> dict[str, Optional[str]]:
    env = env or {}
    return {title: get(env) for title, get in KEY_FIELDS}


def _ordered(manifests: Sequence[dict]) -> list[dict]:
    return sorted((m for m in manifests if m), key=lambda m: str(m.get("timestamp") or ""))


def devices_used(manifests: Sequence[dict]) -> Optional[str]:
    """The devices the runs computed on, 'N x name' per distinct set (the host may hold more
    GPUs than the runs used: CUDA_VISIBLE_DEVICES, --gpu_indices, inference on one GPU)."""
    used = []
    for run in _ordered(manifests):
        name = (run.get("extra") or {}).get("device_name")
        count = int(run.get("num_devices") or 1)
        if name:
            label = "%d x %s" % (count, name) if count > 1 else str(name)
            if label not in used:
                used.append(label)
    return "; ".join(used) or None


def environment_table(manifests: Sequence[dict]) -> pd.DataFrame:
    """Field | Value: the devices the runs used, then the key fields as the first run found
    them (before it started)."""
    runs = _ordered(manifests)
    if not runs:
        return pd.DataFrame(columns=["Field", "Value"])
    values = {"Devices used by the runs": devices_used(runs),
              **key_values((runs[0].get("environment") or {}).get("before"))}
    return pd.DataFrame([{"Field": k, "Value": v if v is not None else "unknown"}
                         for k, v in values.items()])


def changes(manifests: Sequence[dict]) -> list[str]:
    """One line per change: key fields that differ from the first run's (before or after any
    run), then each run's own before/after differences (every recorded field)."""
    runs = _ordered(manifests)
    if not runs:
        return []
    first = key_values((runs[0].get("environment") or {}).get("before"))
    lines, seen = [], set()
    for run in runs:
        env = run.get("environment") or {}
        for when in ("before", "after"):
            if when not in env:
                continue
            for field, value in key_values(env[when]).items():
                if value != first[field] and (field, value) not in seen:
                    seen.add((field, value))
                    lines.append("%s: %s -> %s (%s run %s, %s %s)" % (
                        field, first[field], value, when, run.get("run_id"), run.get("model"),
                        run.get("mode")))
    for run in runs:
        for line in (run.get("extra") or {}).get("environment_changes") or []:
            lines.append("%s (run %s, %s %s)" % (line, run.get("run_id"), run.get("model"),
                                                  run.get("mode")))
    return lines
