"""The figures' declaration (tfbench/figures/table.py) is what the outputs show: the CSV's
columns, docs/csv.md, and every console label printed next to its own figure on its own line;
and every model module registers its models (the catalog imports them by name).

The literal CSV header of each schema version is pinned apart from the declaration, in
test_promises.py.
"""

import ast
import os
import pkgutil
import re

import pytest

from helpers import ROOT
from tfbench import figures
from tfbench.output import classic_log, console, csv_out
from tfbench.results import RunResult

LABELLED = [f for f in figures.FIGURES if f.label and f.name != "unstable"]

# A value per figure whose first digit a perturbation changes (1 -> 6): the printed number
# then differs from its first character on, whatever the format.
BASE = {f.name: 1.0 + 0.01 * i for i, f in enumerate(figures.FIGURES)}
BASE.update(params=1234567, num_runs=3, steady_step_sec_mean=0.0123,
            joules_per_image=0.0345, gpu_util_pct_mean=15.0, cpu_util_pct_mean=25.0,
            process_cpu_pct_mean=125.0, temp_c_max=15.0, sm_clock_mhz_mean=1350.0)


def _perturbed(value):
    text = repr(value)
    digit = next(i for i, c in enumerate(text) if c in "123456789")
    changed = text[:digit] + str(int(text[digit]) + 5) + text[digit + 1:]
    return type(value)(changed)


def _result(values, unstable=True):
    values = {f.name: values[f.name] for f in LABELLED}
    res = RunResult(mode="forward_only", params=values["params"])
    extra = {"nvml_monitor": "ok", "host_monitor": "ok", "peak_mem_source": "device",
             "num_warmup_steps": 10, "num_cpus": 8, "unstable": unstable,
             "unstable_threshold_pct": 10.0, "estimate_dataset_size": 1281167,
             "estimate_epochs": 90, "estimate_images_per_sec": 2345.6,
             "estimate_utilization": 0.7}
    for name, value in values.items():
        if name == "params":
            continue
        if hasattr(res, name):
            setattr(res, name, value)
        else:
            extra[name] = value
    res.extra = extra
    return res


def _render(values, unstable=True):
    res = _result(values, unstable)
    step = classic_log.step_line(1, res.step_images_per_sec, res.step_images_per_sec_plusminus,
                                 res.jitter, 0.0)
    return [step] + console.summary_lines(res) + console.footer(res)


def _line_of(text):
    """The declared console line (Figure.line) a rendered line is."""
    if re.match(r"\d+\timages/sec: ", text):
        return "Step line"
    if text.startswith("total images/sec:"):
        return "footer"
    return next(f.line for f in figures.FIGURES if f.line and text.startswith(f.line))


def _nearest_label(text, start, end, candidates):
    """The figure whose label is printed closest to text[start:end] (before or after it)."""
    best = None
    for figure in candidates:
        for match in re.finditer(re.escape(figure.label), text):
            if match.end() <= start:
                distance = start - match.end()
            elif match.start() >= end:
                distance = match.start() - end
            else:
                continue
            # At one distance the longer label wins: "temp max" over the "max" inside it.
            if best is None or (distance, -len(figure.label)) < best[:2]:
                best = (distance, -len(figure.label), figure.name)
    return best and best[2]


@pytest.mark.parametrize("figure", LABELLED, ids=[f.name for f in LABELLED])
def test_each_console_label_is_printed_next_to_its_own_figure(figure):
    before = _render(BASE)
    after = _render(dict(BASE, **{figure.name: _perturbed(BASE[figure.name])}))
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == 1, changed
    text, other = changed[0]
    start = next(i for i, (x, y) in enumerate(zip(text, other)) if x != y)
    while start and text[start - 1] in "0123456789.,":
        start -= 1
    end = start
    while end < len(text) and text[end] in "0123456789.,":
        end += 1
    while text[end - 1] in ".,":   # the punctuation after the number
        end -= 1
    line = _line_of(text)
    assert line == figure.line, text
    on_line = [f for f in figures.FIGURES if f.line == line and f.label]
    assert _nearest_label(text, start, end, on_line) == figure.name, text


def test_the_unstable_mark():
    (repeats,) = [t for t in _render(BASE) if t.startswith("Repeats:")]
    assert " %s (spread > 10%%)" % figures.label("unstable") in repeats
    assert "UNSTABLE" not in " ".join(_render(BASE, unstable=False))


def test_every_labelled_figure_is_printed():
    text = "\n".join(_render(BASE))
    assert [f.name for f in figures.FIGURES if f.label and f.label not in text] == []


def test_the_csv_columns_are_the_declared_figures_in_order():
    assert csv_out.COLUMN_NAMES == tuple(f.name for f in figures.FIGURES if f.csv)
    assert csv_out.SCHEMA_VERSION == figures.SCHEMA_VERSION
    assert len(set(figures.BY_NAME)) == len(figures.FIGURES)
    for f in figures.FIGURES:
        assert f.definition and "\n" not in f.definition, f.name
        assert not f.label or f.line, f.name


def test_docs_csv_has_each_column_with_its_unit():
    with open(os.path.join(ROOT, "docs", "csv.md")) as handle:
        doc = handle.read()
    assert "| `latency_ms_p99` | ms | 99th percentile step time per batch |" in doc
    assert "| `peak_mem_gb` | GiB | peak device memory over the timed steps" in doc
    rows = re.findall(r"^\| `(\w+)` \|", doc, re.M)
    assert rows == list(csv_out.COLUMN_NAMES)


# --- model modules ----------------------------------------------------------------------------
def _registering_modules():
    """tfbench.models modules that call register() at import (model families), by their source."""
    import tfbench.models as package
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        path = os.path.join(package.__path__[0], info.name + ".py")
        with open(path) as handle:
            tree = ast.parse(handle.read())
        calls = {node.func.id for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        if info.name != "registry" and calls & {"register", "_register"}:
            found.append("tfbench.models." + info.name)
    return found


def _catalog_imports():
    with open(os.path.join(ROOT, "tfbench", "models", "catalog.py")) as handle:
        tree = ast.parse(handle.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tfbench.models":
            found.update("tfbench.models." + alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tfbench.models."):
            found.add(node.module)
    return found


def test_every_model_module_is_imported_by_the_catalog():
    """A model module the catalog does not import never registers its models."""
    modules = _registering_modules()
    assert len(modules) >= 12 and "tfbench.models.lenet" in modules
    assert [m for m in modules if m not in _catalog_imports()] == []
