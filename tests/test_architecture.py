"""The rooms and the direction of their arrows (docs/architecture.md), checked on the source.

Every import counts, including the ones inside functions and ``if TYPE_CHECKING:`` blocks:
a cycle hidden behind a lazy import is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "history", "workloads", "nemeses", "checkers", "harness")

#: Which top-level packages each package may import (besides itself).
ALLOWED = {
    "common": set(),
    "history": {"common"},
    "workloads": {"common", "history"},
    "nemeses": {"common", "history"},
    "checkers": {"common", "history"},
    "harness": {"common", "history", "workloads", "nemeses", "checkers"},
}


#: Rooms inside ``harness``: which other rooms each may import (``harness`` top-level
#: modules such as ``storefiles`` and ``cli`` are not rooms and may import any room).
HARNESS_ROOMS = {
    "kafka": set(),
    "substrate": {"kafka"},
    "run": {"kafka", "substrate"},
    "report": {"run"},
    "nightly": {"kafka", "substrate", "run", "report"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            out[module_name(path)] = path
    return out


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules ``path`` imports (a ``from pkg import name`` of a submodule counts
    as that submodule)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {m: imports_of(p, modules) - {m} for m, p in modules.items()}


def test_packages_import_only_what_their_room_may(graph: dict[str, set[str]]) -> None:
    wrong = []
    for mod, deps in graph.items():
        top = mod.split(".")[0]
        for dep in deps:
            other = dep.split(".")[0]
            if other != top and other not in ALLOWED[top]:
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "imports against the direction of the arrows:\n" + "\n".join(sorted(wrong))


def test_harness_rooms_point_one_way(graph: dict[str, set[str]]) -> None:
    """Kafka knows nothing of clusters, the substrate nothing of runs, the nightly jobs sit
    on top of the run (docs/architecture.md)."""
    wrong = []
    for mod, deps in graph.items():
        parts = mod.split(".")
        if parts[0] != "harness" or len(parts) < 3 or parts[1] not in HARNESS_ROOMS:
            continue
        room = parts[1]
        for dep in deps:
            dparts = dep.split(".")
            if dparts[0] != "harness" or len(dparts) < 2 or dparts[1] == room:
                continue
            if dparts[1] in HARNESS_ROOMS and dparts[1] not in HARNESS_ROOMS[room]:
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "harness rooms importing against the arrows:\n" + "\n".join(sorted(wrong))


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    """Tarjan's strongly connected components; a package's ``__init__`` re-exporting its
    own submodules is not a cycle a reader trips on, so edges into a parent package from
    its own children are ignored."""

    def edges(mod: str) -> set[str]:
        return {d for d in graph[mod] if not mod.startswith(d + ".")}

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for mod in sorted(graph):
        if mod not in index:
            visit(mod)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
