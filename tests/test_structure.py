"""The package structure: which packages may import which, no import cycles, small modules.

Imports are read from the source with ``ast`` (imports inside functions included), so a
lazy import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_SIMULATOR_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (subpackages included), by dotted name."""
    return {module_name(path): path for path in sorted((REPO / package).rglob("*.py"))}


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


def test_training_does_not_import_evaluation() -> None:
    """Evaluation builds on training (corpora, datasets); what both need is in ``measure``."""
    offenders = {name: sorted(imports_package(imported(path), "evaluation"))
                 for name, path in modules("training").items()}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_measure_imports_only_qcat_and_itself() -> None:
    first_party = ("training", "evaluation", "judging_app", "migrations")
    offenders = {name: sorted(n for package in first_party for n in imports_package(imported(path), package))
                 for name, path in modules("measure").items()}
    assert modules("measure"), "the measure package is missing"
    assert {name: found for name, found in offenders.items() if found} == {}


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
    migrate = imported(REPO / "judging_app" / "migrate.py")
    store = imported(REPO / "judging_app" / "store.py")
    assert not ("judging_app.store" in migrate and "judging_app.migrate" in store)


def test_no_import_cycle_in_judging_app() -> None:
    assert find_cycle(import_graph("judging_app")) is None


@pytest.mark.parametrize("path", sorted((REPO / "training").glob("simulate*.py")), ids=lambda p: p.name)
def test_simulator_modules_are_small(path: Path) -> None:
    n_lines = len(path.read_text(encoding="utf-8").splitlines())
    assert n_lines < MAX_SIMULATOR_LINES, f"{path.name} has {n_lines} lines"
