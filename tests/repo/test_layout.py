"""The package layout shows the design: imports flow one way and no module imports itself back.

Every import of every module counts, those inside functions too (a lazy import is still a
dependency). Layers, lowest first: a package imports its own modules and lower layers only.
"""

import ast
import os

import pytest

from helpers import ROOT

PACKAGE = os.path.join(ROOT, "tfbench")

# Lowest first; a layer may import the layers below it.
LAYERS = {
    "errors": 0, "results": 0, "figures": 0,
    "config": 1, "pins": 1,
    "data": 2, "models": 2,
    "measure": 3,
    "distribute": 4, "monitors": 4,
    "engine": 5, "output": 5,
    "report": 6,
    # The results history reads rows as reports do (their combining rule, their tables).
    "history": 7,
    "children": 8,
    # A validation runs its checks as children; a launch runs it on many hosts.
    "validate": 9,
    # One layer: a sweep and a launch share their rows through children, never each other.
    "sweep": 10, "launch": 10,
    "cli": 11,
    "__main__": 12,
}
# Below-layer imports that would still break the design.
FORBIDDEN = {
    # Reports read CSV files (and JSON manifests), never a live run.
    "report": {"engine", "distribute", "monitors", "data", "models"},
    # A sweep runs each point in its own process; it never imports the runner.
    "sweep": {"engine", "distribute", "monitors", "data", "models"},
    # So does a launch, one process per host.
    "launch": {"engine", "distribute", "monitors", "data", "models"},
    # Children are benchmarks in processes of their own, read from their flags and rows.
    "children": {"engine", "distribute", "monitors", "data", "models"},
    # Its TensorFlow checks run in children, so it runs where TensorFlow is broken.
    "validate": {"engine", "distribute", "monitors", "data", "models"},
    # `tfbench history` never imports TensorFlow; a run hands it its RunResult.
    "history": {"engine", "distribute", "monitors", "data", "models"},
}


def _modules() -> dict[str, str]:
    """dotted name -> path of every module in the package."""
    found = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return found


MODULES = _modules()


def _imports(name: str, path: str) -> set[str]:
    """The tfbench modules `name` imports, anywhere in its body."""
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = set()
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                candidate = "%s.%s" % (base, alias.name)
                found.add(candidate if candidate in MODULES else base)
    return {m for m in found if m.startswith("tfbench") and m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_package_has_a_layer():
    unknown = {_layer_of(m) for m in MODULES} - set(LAYERS) - {"__init__"}
    assert not unknown, "give these packages a layer in LAYERS: %s" % sorted(unknown)


def test_imports_flow_down_the_layers():
    wrong = []
    for module, imported in sorted(GRAPH.items()):
        here = _layer_of(module)
        if here == "__init__":
            continue
        for target in sorted(imported):
            there = _layer_of(target)
            if there == here or there == "__init__":
                continue
            if LAYERS[there] >= LAYERS[here] or there in FORBIDDEN.get(here, ()):
                wrong.append("%s imports %s" % (module, target))
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


# What argv becomes before the Settings (config.settings): never read outside tfbench.config.
_PARAMS_STAGE = {"Params", "make_params", "parse_params"}


def test_only_the_configuration_layer_reads_params():
    wrong = []
    for module, path in sorted(MODULES.items()):
        if module.startswith("tfbench.config"):
            continue
        if "tfbench.config.params" in GRAPH[module]:
            wrong.append("%s imports tfbench.config.params" % module)
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  for a in n.names}
        wrong += ["%s names %s" % (module, name) for name in sorted(names & _PARAMS_STAGE)]
    assert not wrong, ("below the configuration layer a run reads its Settings "
                       "(tfbench.config.settings: settings.schedule.batch_size, "
                       "settings.asks.run_mode, make_settings, argv.settings_of_flags), never "
                       "Params:\n" + "\n".join(wrong))


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles() == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    """About 400 lines at most; a longer module says why in its docstring."""
    with open(MODULES[module]) as handle:
        text = handle.read()
    lines = text.count("\n")
    doc = ast.get_docstring(ast.parse(text)) or ""
    assert lines <= 420 or "Longer than" in doc, "%s has %d lines" % (module, lines)


def test_the_cli_package_lists_the_subcommands():
    from tfbench.cli import SUBCOMMANDS
    modules = sorted(os.path.splitext(n)[0] for n in os.listdir(os.path.join(PACKAGE, "cli"))
                     if n.endswith(".py") and n != "__init__.py")
    # guard: how the long-running subcommands end (one error line, signals), shared by them
    assert modules == sorted(["run", "guard"] + list(SUBCOMMANDS))


def test_every_subcommand_has_its_test_module():
    """`tfbench NAME`'s command line (its arguments, its exit codes, its one-line errors) is
    tested in tests/cli/test_NAME.py, as docs/layout.md lays the tests out."""
    from tfbench.cli import SUBCOMMANDS
    missing = ["tests/cli/test_%s.py" % name for name in ["run"] + list(SUBCOMMANDS)
               if not os.path.exists(os.path.join(ROOT, "tests", "cli", "test_%s.py" % name))]
    assert missing == [], "add a test module for each subcommand: %s" % ", ".join(missing)


def test_no_test_module_imports_another():
    """What tests share lives in tests/support (on sys.path, not collected): a test module that
    imports another runs, or breaks with, that module's imports and fixtures."""
    found = []
    for folder, _, names in os.walk(os.path.join(ROOT, "tests")):
        if os.path.basename(folder) == "support":
            continue
        for name in names:
            if not (name.startswith("test_") and name.endswith(".py")):
                continue
            path = os.path.join(folder, name)
            with open(path) as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                found += ["%s imports %s" % (os.path.relpath(path, ROOT), m) for m in modules
                          if m.split(".")[0] == "tests" or m.split(".")[-1].startswith("test_")]
    assert found == []
