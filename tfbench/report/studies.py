"""Study tables computed from result rows: scaling, batch size (knee), precision matrix, resolution.

Each function takes a typed frame (report.load.normalize) and uses only rows with status ok.
Repeated rows of one configuration are reduced to their median images/sec, so `--repeats` and
re-runs appended to one CSV need no special handling; their min, max, spread and stability
verdict follow the rule of --num_runs and `tfbench evaluate` (tfbench.report.repeats), and every
table with repeats shows them. Groups are formed from the configuration columns, minus the
one(s) a study varies, so a sweep over models x GPU counts gives one scaling table per model.
"""

from __future__ import annotations

from typing import Optional, Sequence

import dataclasses

import numpy as np
import pandas as pd

from tfbench import figures
from tfbench.measure import stats
from tfbench.report import load, repeats, scaling_explained

# Columns that identify a configuration (what ran, where), as the figures declare them.
CONFIG_COLUMNS = figures.CONFIGURATION
# Figure -> how a configuration's repeated rows make it (median; temp_c_max their max; text:
# the first row's).
_METRICS = figures.AGGREGATED


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["status"] == "ok") & df["images_per_sec"].notna()]


def aggregate(df: pd.DataFrame, keys: list[str],
              unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
              ) -> pd.DataFrame:
    """One row per distinct `keys`: median metrics and the repeats (REPEAT_COLUMNS)."""
    ok = ok_rows(df)
    if ok.empty:
        return pd.DataFrame(columns=keys + list(_METRICS) + list(repeats.REPEAT_COLUMNS)
                            + ["order"])
    ok = ok.assign(order=np.arange(len(ok)))
    grouped = ok.groupby(keys, dropna=False, sort=False)
    out = grouped.agg({**{c: how for c, how in _METRICS.items() if c not in keys},
                       "order": "min"})
    spread = [repeats.summarize(group, unstable_threshold_pct) for _, group in grouped]
    for column in repeats.REPEAT_COLUMNS:
        out[column] = [s[column] for s in spread]
    return out.reset_index().sort_values("order", kind="stable").reset_index(drop=True)


def _group_keys(vary: tuple[str, ...], extra: Sequence[str] = ()) -> list[str]:
    """Configuration columns minus the varied ones, plus `extra` (swept flags that have no CSV
    column, e.g. optimizer, so their points are not merged)."""
    return [c for c in CONFIG_COLUMNS if c not in vary] + [c for c in extra if c not in vary]


def _one_device_baselines(ok: pd.DataFrame) -> pd.DataFrame:
    """`ok` with each one-device row once per variable_update of the multi-device rows.

    One device shares no variables (OneDeviceStrategy whatever was asked), so its
    variable_update names a request, not what ran: --xla on several devices records replicated
    where the same flags on one device record parameter_server. The one-device row is the
    baseline of every series; rows on several devices keep their own.
    """
    one = (ok["devices"] == 1).to_numpy()
    shared = pd.unique(ok.loc[~one, "variable_update"])
    if not one.any() or len(shared) == 0:
        return ok
    reps = np.where(one, len(shared), 1)
    out = ok.iloc[np.arange(len(ok)).repeat(reps)].copy()
    labels = out["variable_update"].to_numpy(dtype=object).copy()
    labels[one.repeat(reps)] = np.tile(shared, int(one.sum()))
    out["variable_update"] = labels
    return out.reset_index(drop=True)


def _series(group: pd.DataFrame) -> list[pd.DataFrame]:
    """A configuration's points as scaling series, each the baseline plus one point per device
    count: rows that differ in device count alone.

    Baseline: the fewest devices (on the fewest workers). A row with as many devices in another
    split (1 x 2 workers against 2 x 1) is no scaling step and is left out. Where two splits give
    one count (4 x 1 and 2 x 2), one series per worker count, each against the baseline.
    """
    group = group.sort_values(["devices", "num_workers"], kind="stable")
    base = group.iloc[:1]
    rest = group[group["devices"] > base["devices"].iloc[0]]
    if rest.empty:
        return []
    parts = [rest] if rest["devices"].is_unique else \
        [part for _, part in rest.groupby("num_workers", sort=True)]
    return [pd.concat([base, part]) for part in parts]


def scaling_table(df: pd.DataFrame, scaling: str = "weak", extra: Sequence[str] = (),
                  unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                  ) -> pd.DataFrame:
    """Throughput, speed-up and efficiency against the fewest devices in each series.

    weak: per-device batch fixed (global grows with N); strong: global batch fixed.
    efficiency = (throughput on N / throughput on N0) / (N / N0) x 100, N = devices x workers,
    N0 = the baseline's. A series relates rows that differ in device count alone: every other
    configuration column (variable_update, dataset, accum_steps, ...) is the same, except the
    variable_update of a one-device baseline (see _one_device_baselines).
    Only series with two or more device counts are returned.
    """
    if scaling not in ("weak", "strong"):
        raise ValueError("scaling must be weak or strong, got %r" % scaling)
    df = df.assign(devices=load.devices(df))
    fixed = "batch_size" if scaling == "weak" else "global_batch_size"
    keys = _group_keys(("num_devices", "num_workers", "batch_size", "global_batch_size"),
                       extra) + [fixed]
    other = "global_batch_size" if scaling == "weak" else "batch_size"
    point = ["num_devices", "num_workers", "devices", other]
    agg = aggregate(_one_device_baselines(ok_rows(df)), keys + point, unstable_threshold_pct)
    frames = []
    for _, candidates in agg.groupby(keys, dropna=False, sort=False):
        for group in _series(candidates):
            base = group.iloc[0]
            group = group.assign(
                scaling=scaling,
                speedup=group["images_per_sec"] / base["images_per_sec"],
                images_per_sec_per_device=group["images_per_sec"] / group["devices"])
            group["efficiency_pct"] = group["speedup"] / (group["devices"] / base["devices"]) \
                * 100.0
            frames.append(group.assign(group="%s%d" % (scaling, len(frames))))
    shown = keys + point + ["scaling", "images_per_sec"] + list(repeats.REPEAT_COLUMNS) + [
        "images_per_sec_per_device", "speedup", "efficiency_pct", "peak_mem_gb", "group"]
    # Every other aggregated figure too: the probes that explain_table splits the step with.
    return _concat(frames, shown + [c for c in _METRICS if c in agg.columns and c not in shown])


def _identity(frame: pd.DataFrame, extra: Sequence[str] = ()) -> list[tuple]:
    """Each row's configuration as a tuple of strings; a one-device row's variable_update is
    left out (it is the baseline of every series, see _one_device_baselines)."""
    cols = list(CONFIG_COLUMNS) + [c for c in extra if c not in CONFIG_COLUMNS]
    ident = frame[cols].astype(str)
    ident.loc[(load.devices(frame) == 1).to_numpy(), "variable_update"] = ""
    return list(map(tuple, ident.values))


def scaling_tables(df: pd.DataFrame, extra: Sequence[str] = (),
                   unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                   ) -> pd.DataFrame:
    """Weak and strong scaling groups found in the rows (a CSV does not say which was meant).

    A strong group whose multi-device rows all belong to weak groups is dropped: it is a
    by-product of a weak study plus a batch-size study, not a strong-scaling measurement.
    """
    weak = scaling_table(df, "weak", extra, unstable_threshold_pct)
    strong = scaling_table(df, "strong", extra, unstable_threshold_pct)
    if not weak.empty and not strong.empty:
        in_weak = set(_identity(weak, extra))
        keep = []
        for gid, group in strong.groupby("group", sort=False):
            rest = group[group["devices"] > group["devices"].min()]
            if any(ident not in in_weak for ident in _identity(rest, extra)):
                keep.append(gid)
        strong = strong[strong["group"].isin(keep)]
    return _concat([weak, strong], None)


def batch_size_study(df: pd.DataFrame, knee_pct: float = 90.0, extra: Sequence[str] = (),
                     unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                     ) -> pd.DataFrame:
    """Throughput and memory per batch size; `knee` marks the smallest batch reaching knee_pct%
    of the group's best throughput, `best` the batch of the best (median) throughput."""
    keys = _group_keys(("batch_size", "global_batch_size"), extra)
    agg = aggregate(df, keys + ["batch_size", "global_batch_size"], unstable_threshold_pct)
    frames = []
    for _, group in agg.groupby(keys, dropna=False, sort=False):
        if group["batch_size"].nunique() < 2:
            continue
        group = group.sort_values("batch_size")
        best = group["images_per_sec"].max()
        pct = group["images_per_sec"] / best * 100.0
        reaching = group.loc[pct >= knee_pct, "batch_size"]
        knee = reaching.min()
        frames.append(group.assign(pct_of_best=pct, knee=group["batch_size"] == knee,
                                   best=group["images_per_sec"] == best, knee_pct=knee_pct,
                                   group="batch%d" % len(frames)))
    return _concat(frames, keys + ["batch_size", "global_batch_size", "images_per_sec"]
                   + list(repeats.REPEAT_COLUMNS) + ["peak_mem_gb", "pct_of_best", "knee", "best",
                                             "knee_pct", "group"])


def knees(study: pd.DataFrame) -> pd.DataFrame:
    """The knee row of each batch-size group."""
    return study[study["knee"].astype(bool)] if not study.empty else study


def execution_label(precision: str, xla: int) -> str:
    label = "fp32" if precision in ("", "fp32") else "%s mixed" % precision
    return label + " + XLA" if int(xla) else label


def precision_matrix(df: pd.DataFrame, extra: Sequence[str] = (),
                     unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                     ) -> pd.DataFrame:
    """Each precision/XLA combination with its speed-up over plain fp32 in the same group."""
    keys = _group_keys(("precision", "xla"), extra)
    agg = aggregate(df, keys + ["precision", "xla"], unstable_threshold_pct)
    frames = []
    for _, group in agg.groupby(keys, dropna=False, sort=False):
        if len(group) < 2:
            continue
        base = group[(group["precision"] == "fp32") & (group["xla"] == 0)]
        ref = base["images_per_sec"].iloc[0] if len(base) else np.nan
        frames.append(group.assign(
            execution=[execution_label(p, x) for p, x in zip(group["precision"], group["xla"])],
            speedup_vs_fp32=group["images_per_sec"] / ref, group="precision%d" % len(frames)))
    return _concat(frames, keys + ["precision", "xla", "execution", "images_per_sec"]
                   + list(repeats.REPEAT_COLUMNS) + ["peak_mem_gb", "speedup_vs_fp32", "group"])


def resolution_study(df: pd.DataFrame, extra: Sequence[str] = (),
                     unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                     ) -> pd.DataFrame:
    """Throughput and memory per image size, relative to the first size (order of appearance)."""
    keys = _group_keys(("image_size",), extra)
    agg = aggregate(df, keys + ["image_size"], unstable_threshold_pct)
    frames = []
    for _, group in agg.groupby(keys, dropna=False, sort=False):
        if group["image_size"].nunique() < 2:
            continue
        first = group.iloc[0]
        frames.append(group.assign(
            pixels_rel=(group["image_size"] / first["image_size"]) ** 2,
            images_per_sec_rel=group["images_per_sec"] / first["images_per_sec"],
            peak_mem_rel=group["peak_mem_gb"] / first["peak_mem_gb"],
            group="resolution%d" % len(frames)))
    return _concat(frames, keys + ["image_size", "images_per_sec"]
                   + list(repeats.REPEAT_COLUMNS) + ["peak_mem_gb", "pixels_rel",
                                                     "images_per_sec_rel", "peak_mem_rel",
                                                     "group"])


def summary_table(df: pd.DataFrame,
                  unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                  ) -> pd.DataFrame:
    """One row per configuration, the shape people publish (model x device and its metrics).

    efficiency_pct: from the scaling series holding this very configuration (weak first).
    """
    keys = list(CONFIG_COLUMNS)
    agg = aggregate(df, keys, unstable_threshold_pct)
    if agg.empty:
        return agg
    agg["devices"] = load.devices(agg)
    eff = scaling_tables(df, (), unstable_threshold_pct)
    found: dict[tuple, float] = {}
    if not eff.empty:
        for ident, value in zip(_identity(eff), eff["efficiency_pct"]):
            found.setdefault(ident, value)
    agg["efficiency_pct"] = [found.get(ident, np.nan) for ident in _identity(agg)]
    return agg


def failed_rows(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["run_id", "status", "model", "mode", "precision", "batch_size", "num_devices",
            "image_size", "device_name", "error"]
    failed = df.loc[df["status"] != "ok", cols].reset_index(drop=True)
    for col in ("batch_size", "image_size"):  # 0 = not known for a run that never started
        failed[col] = failed[col].where(failed[col] > 0)
    return failed


def varying(df: pd.DataFrame, columns, always=("model",)) -> list[str]:
    """The columns among `columns` that take more than one value (plus `always`): what a reader
    needs to tell rows apart, without constant noise columns."""
    return [c for c in columns if c in df.columns and (c in always or df[c].nunique() > 1)]


@dataclasses.dataclass
class Section:
    """One study table: its file stem, a title, the frame and the columns worth showing; a
    line before the table (`intro`) and a class per row for the page's style (`row_classes`)
    where a table has them."""

    slug: str
    title: str
    frame: pd.DataFrame
    columns: list[str]
    note: str = ""
    intro: str = ""
    row_classes: Optional[list[str]] = None


STUDY_KINDS = ("scaling", "batch_size", "precision", "resolution")


def study_sections(df: pd.DataFrame, kinds: Sequence[str] = STUDY_KINDS,
                   scaling: Optional[str] = None, knee_pct: float = 90.0,
                   extra: Sequence[str] = (),
                   unstable_threshold_pct: float = stats.DEFAULT_UNSTABLE_THRESHOLD_PCT
                   ) -> list[Section]:
    """The non-empty study tables among `kinds`; scaling None looks for weak and strong groups.
    A table whose points were repeated shows their spread (with_repeats) and names every
    unstable point in its note; the batch-size knee and best batch say when they are one."""
    out = []
    shown = ["model", "device_name"]
    threshold = unstable_threshold_pct

    def section(slug, title, table, keys, point, columns, note):
        out.append(Section(slug, title, table, repeats.with_repeats(table, keys + columns),
                           note + repeats.note(table, keys + point, threshold)))

    if "scaling" in kinds:
        table = scaling_tables(df, extra, threshold) if scaling is None else \
            scaling_table(df, scaling, extra, threshold)
        if not table.empty:
            keys = varying(table, list(CONFIG_COLUMNS) + list(extra), shown)
            keys = [k for k in keys if k not in ("batch_size", "global_batch_size",
                                                 "num_devices", "num_workers")]
            # The split (devices per worker x workers) tells apart rows of one device count.
            split = ["num_devices", "num_workers"] if table["num_workers"].nunique() > 1 else []
            section("scaling", "Scaling efficiency", table, keys, ["scaling"] + split
                    + ["devices"], ["scaling"] + split + [
                        "devices", "batch_size", "global_batch_size", "images_per_sec",
                        "images_per_sec_per_device", "speedup", "efficiency_pct"],
                    "efficiency = (images/sec on N / images/sec on N0) / (N / N0) x 100%, N = "
                    "devices x workers, N0 the fewest in the series; a series holds rows that "
                    "differ in device count alone (a one-device baseline shares no variables "
                    "and serves every variable_update); weak scaling keeps the per-device "
                    "batch, strong scaling the global batch")
            explained = scaling_explained.explain_table(table)
            if not explained.empty:
                out.append(Section(
                    "scaling_explained", "Where the scaling efficiency goes", explained,
                    keys + ["scaling"] + split + [
                        "devices", "images_per_sec", "efficiency_pct", "explained_by"]
                    + list(scaling_explained.EXPLAINED_PTS)
                    + ["allreduce_busbw_gbs", "expected_busbw_gbs", "link"],
                    scaling_explained.explain_note(explained, keys)))
    if "batch_size" in kinds:
        table = batch_size_study(df, knee_pct, extra, threshold)
        if not table.empty:
            keys = [k for k in varying(table, list(CONFIG_COLUMNS) + list(extra), shown)
                    if k not in ("batch_size", "global_batch_size")]
            section("batch_size", "Batch-size study", table, keys, ["batch_size"],
                    ["batch_size", "global_batch_size", "images_per_sec", "peak_mem_gb",
                     "pct_of_best", "knee"],
                    "knee = smallest batch reaching %g%% of the best throughput: %s"
                    % (knee_pct, _knee_text(table, keys)))
    if "precision" in kinds:
        table = precision_matrix(df, extra, threshold)
        if not table.empty:
            keys = [k for k in varying(table, list(CONFIG_COLUMNS) + list(extra), shown)
                    if k not in ("precision", "xla")]
            section("precision", "Precision / execution matrix", table, keys, ["execution"],
                    ["execution", "images_per_sec", "speedup_vs_fp32", "peak_mem_gb"],
                    "speed-up over fp32 without XLA in the same configuration")
    if "resolution" in kinds:
        table = resolution_study(df, extra, threshold)
        if not table.empty:
            keys = [k for k in varying(table, list(CONFIG_COLUMNS) + list(extra), shown)
                    if k != "image_size"]
            section("resolution", "Resolution study", table, keys, ["image_size"],
                    ["image_size", "pixels_rel", "images_per_sec", "images_per_sec_rel",
                     "peak_mem_gb", "peak_mem_rel"], "relative to the first image size")
    return out


def _knee_text(table: pd.DataFrame, keys: list[str]) -> str:
    """Per group: the knee and the best batch, each marked when its repeats were unstable."""
    parts = []
    for _, group in table.groupby("group", sort=False):
        knee = group[group["knee"].astype(bool)].iloc[0]
        best = group[group["best"].astype(bool)].iloc[0]
        text = "batch %d%s" % (knee["batch_size"], repeats.unstable_text(knee))
        if best["batch_size"] != knee["batch_size"] or repeats.unstable_text(best):
            text += ", best batch %d%s" % (best["batch_size"], repeats.unstable_text(best))
        label = repeats.label(knee, keys)
        parts.append("%s: %s" % (label, text) if label else text)
    return "; ".join(parts)


def _concat(frames: list[pd.DataFrame], columns: Optional[list[str]]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=columns or [])
    out = pd.concat(frames, ignore_index=True)
    return out[columns] if columns else out
