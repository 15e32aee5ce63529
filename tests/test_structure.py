"""The package structure: which packages may import which, no import cycles, small modules.

Imports are read from the source with ``ast`` (imports inside functions included), so a
lazy import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 400
MAX_MODULES_SIDE_BY_SIDE = 12
# The repository's folders and the package each installs as (pyproject.toml's package-dir).
FOLDERS = {"qcat": "qcat", "training": "qcat.training", "evaluation": "qcat.evaluation",
           "judging_app": "qcat.judging", "migrations": "qcat.migrations"}
# The layout, top to bottom: a package imports only those below it (the serving core is the rest of
# qcat/). The Alembic migrations belong to the judging store, so they sit in its layer.
LAYERS = [("qcat.judging", "qcat.migrations"), ("qcat.evaluation",), ("qcat.training",), ("qcat.measure",)]

# Issue 48: the serving core's own floors, bottom to top. A core module imports only its own floor
# and those below (the front door, qcat/__init__.py with qcat.load and the old paths' aliases, is
# the top). qcat.measure sits above the whole core in LAYERS.
CORE_FLOORS = [("qcat.errors", "qcat.version"), ("qcat.text", "qcat.console"), ("qcat.inputs",), ("qcat.taxonomy",),
               ("qcat.bundles",), ("qcat.models",), ("qcat.classifier",), ("qcat.rerank",), ("qcat.serve",),
               ("qcat.cli",), ("qcat",)]
# Every folder is held to the same rules (qcat/ too, since issue 48).
RULED_FOLDERS = ("qcat", "training", "judging_app", "evaluation")

def module_name(path: Path) -> str:
    folder, *parts = path.relative_to(REPO).with_suffix("").parts
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([FOLDERS[folder], *parts])


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (subpackages included), by dotted name."""
    folder = max((f for f, name in FOLDERS.items() if package == name or package.startswith(name + ".")),
                 key=lambda f: len(FOLDERS[f]))  # the longest installed name: qcat.training is training/, not qcat/
    root = REPO / folder / Path(*package.split(".")[len(FOLDERS[folder].split(".")):])
    return {module_name(path): path for path in sorted(root.rglob("*.py"))}


def imported(path: Path) -> set[str]:
    """The dotted names a module imports; ``from a import b`` gives both ``a`` and ``a.b``
    (``b`` may be a submodule)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def imports_package(names: set[str], package: str) -> set[str]:
    return {n for n in names if n == package or n.startswith(package + ".")}


def layer_of(module: str) -> int:
    """The module's layer: its index in LAYERS, or len(LAYERS) for the serving core."""
    return next((i for i, layer in enumerate(LAYERS) for package in layer
                 if module == package or module.startswith(package + ".")), len(LAYERS))


def core_floor(module: str) -> int | None:
    """The core module's floor: its index in CORE_FLOORS (the longest package that holds it), or
    None outside the core (qcat.measure, training, ...)."""
    if layer_of(module) != len(LAYERS):
        return None
    found = [(len(package), i) for i, floor in enumerate(CORE_FLOORS) for package in floor
             if module == package or (package != "qcat" and module.startswith(package + "."))]
    return max(found)[1] if found else None


def every_module() -> dict[str, Path]:
    return {name: path for folder in FOLDERS for name, path in modules(FOLDERS[folder]).items()}


@pytest.mark.slow
def test_no_import_runs_up_the_layout() -> None:
    """judging (and its migrations) -> evaluation -> training -> measure -> the serving core."""
    own = every_module()
    offenders = {name: sorted(n for n in imported(path) if n in own and layer_of(n) < layer_of(name))
                 for name, path in own.items()}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("qcat.evaluation.golden.cli") < layer_of("qcat.training.api") < layer_of("qcat.measure.metrics") \
        < layer_of("qcat.classifier")
    assert layer_of("qcat.judging.reporting.export") == layer_of("qcat.migrations.env") == 0


def test_no_core_import_runs_up_its_floors() -> None:
    """errors, version -> text, console -> inputs -> taxonomy -> bundles -> models -> classifier
    -> rerank -> serve -> cli -> qcat (the front door): each imports only its floor and below."""
    own = {name: path for name, path in modules("qcat").items() if core_floor(name) is not None}
    assert {"qcat.models.model", "qcat.classifier", "qcat.cli", "qcat.serve.app", "qcat.text.normalize"} <= set(own)
    unplaced = [name for name in own if core_floor(name) is None]
    offenders = {name: sorted(n for n in imported(path) if n in own and core_floor(n) > core_floor(name))
                 for name, path in own.items()}
    assert unplaced == [] and {name: found for name, found in offenders.items() if found} == {}


def test_the_floor_check_sees_an_upward_import() -> None:
    assert core_floor("qcat.errors") < core_floor("qcat.text.lines") < core_floor("qcat.inputs.table") \
        < core_floor("qcat.taxonomy.tree") < core_floor("qcat.bundles.bundle") < core_floor("qcat.models.nb") \
        < core_floor("qcat.classifier") < core_floor("qcat.rerank.model") < core_floor("qcat.serve.app") \
        < core_floor("qcat.cli.info") < core_floor("qcat")
    assert core_floor("qcat.measure.metrics") is None and core_floor("qcat.training.api") is None


def test_every_module_is_found_under_its_installed_name() -> None:
    names = every_module()
    assert {"qcat.training.api", "qcat.judging.pages.app", "qcat.evaluation.golden.cli", "qcat.measure.metrics",
            "qcat.migrations.env", "qcat.classifier"} <= set(names)
    assert not [n for n in names if n.split(".")[0] != "qcat"]


@pytest.mark.parametrize("folder", RULED_FOLDERS)
def test_no_folder_holds_more_than_12_modules_side_by_side(folder: str) -> None:
    """Issue 33's rule for the folders it split, and (issue 48) for qcat/, the serving core."""
    crowded = {str(d.relative_to(REPO)): n for d in [REPO / folder, *(REPO / folder).rglob("*")]
               if d.is_dir() and (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES_SIDE_BY_SIDE}
    assert crowded == {}


def test_every_subpackage_says_what_lives_there() -> None:
    for folder in RULED_FOLDERS:
        for init in (REPO / folder).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc and doc.strip(), f"{init.relative_to(REPO)} has no docstring"


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    own = modules(package)
    return {name: imported(path) & set(own) - {name} for name, path in own.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first = last), or None."""
    state: dict[str, str] = {}  # "open" while on the DFS stack, "done" after
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_migrate_and_store_do_not_import_each_other() -> None:
    migrate = imported(REPO / "judging_app" / "store" / "migrate.py")
    store = imported(REPO / "judging_app" / "store" / "connection.py")
    assert not ("qcat.judging.store.connection" in migrate and "qcat.judging.store.migrate" in store)


@pytest.mark.parametrize("package", ["qcat", "qcat.judging", "qcat.training", "qcat.evaluation"])
def test_no_import_cycle(package: str) -> None:
    assert find_cycle(import_graph(package)) is None


def subpackage_graph(package: str, modules_apart: bool = False) -> dict[str, set[str]]:
    """Subpackage -> the other subpackages of ``package`` its modules import (modules directly in
    ``package`` count as one node, the package itself; with ``modules_apart`` each is a node of
    its own: qcat's errors.py and classifier.py sit on different floors)."""
    depth = len(package.split(".")) + 1
    own = modules(package)
    subpackages = {n for n in own if len(n.split(".")) == depth and (own[n].name == "__init__.py")}

    def node(name: str) -> str:
        head = ".".join(name.split(".")[:depth])
        return head if head in subpackages or (modules_apart and head in own) else package

    graph: dict[str, set[str]] = {node(n): set() for n in own}
    for name, path in own.items():
        graph[node(name)] |= {node(t) for t in imported(path) & set(own)} - {node(name)}
    return graph


@pytest.mark.parametrize("package", ["qcat", "qcat.judging", "qcat.training", "qcat.evaluation"])
def test_no_import_cycle_between_subpackages(package: str) -> None:
    """Folders by concern read one way too: e.g. grading uses the store, never the other way."""
    graph = subpackage_graph(package, modules_apart=package == "qcat")
    if package == "qcat":  # every subpackage of the core is a node: qcat.training and friends are other folders
        assert {"qcat.models", "qcat.bundles", "qcat.cli", "qcat.serve", "qcat.errors", "qcat.classifier"} <= set(graph)
    assert find_cycle(graph) is None


# Issue 48: no module over MAX_MODULE_LINES lines in these folders, Python or JavaScript. None of them
# holds generated or vendored code (the Alembic versions, written by a tool, live in migrations/), so
# nothing in them is exempt.
SIZED_FOLDERS = ("qcat", "training", "judging_app", "evaluation", "benchmarks")


def module_lines() -> dict[str, int]:
    """Lines of every .py and .js module in SIZED_FOLDERS, by path from the repository's root."""
    return {str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
            for folder in SIZED_FOLDERS for path in sorted((REPO / folder).rglob("*"))
            if path.suffix in (".py", ".js") and "__pycache__" not in path.parts}


def test_no_module_over_400_lines() -> None:
    """Split by what the parts do, not by line count; a module this long holds several things."""
    lines = module_lines()
    assert "judging_app/pages/panel.js" in lines and "benchmarks/bench_scale.py" in lines  # both kinds, every folder
    assert {path: n for path, n in lines.items() if n > MAX_MODULE_LINES} == {}


def test_pyproject_lists_every_package() -> None:
    """The wheel carries exactly the folders that are packages (setuptools' explicit list, since
    package-dir maps folders to other names and find_packages cannot)."""
    import tomllib

    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {module_name(init) for folder in FOLDERS for init in (REPO / folder).rglob("__init__.py")}
    assert sorted(listed) == sorted(found)
