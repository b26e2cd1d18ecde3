"""The rooms and the direction of their arrows (docs/architecture.md), checked on the source.

Every import counts, including the ones inside functions and ``if TYPE_CHECKING:`` blocks:
a cycle hidden behind a lazy import is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
import re
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


#: Of the other packages, the only modules these harness rooms may import (docs/architecture.md).
NARROW = {
    "harness.substrate": {
        "workloads": ("workloads.base",),
        "nemeses": ("nemeses.control",),
        "checkers": (),
    },
    "harness.report": {
        "workloads": ("workloads.spec",),
        "nemeses": (),
        "checkers": ("checkers.anomalies",),
    },
}
#: The top-level ``harness`` modules a room may import (the rest compose the rooms).
HARNESS_TOP_ALLOWED = {"harness.report": {"harness.storefiles"}}


def test_substrate_and_report_import_only_their_narrow_share(graph: dict[str, set[str]]) -> None:
    """The substrate sees the workload and nemesis sides only through their protocols; the
    report sees workloads through their declarations and checkers through the anomaly table."""
    wrong = []
    for mod, deps in graph.items():
        room = next((r for r in NARROW if mod == r or mod.startswith(r + ".")), None)
        if room is None:
            continue
        for dep in deps:
            top = dep.split(".")[0]
            allowed = NARROW[room].get(top)
            if allowed is not None and not any(
                dep == a or dep.startswith(a + ".") for a in allowed
            ):
                wrong.append(f"{mod} -> {dep}")
            parts = dep.split(".")
            harness_top = top == "harness" and len(parts) > 1 and parts[1] not in HARNESS_ROOMS
            if harness_top and dep not in HARNESS_TOP_ALLOWED.get(room, set()):
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "imports beyond the room's narrow share:\n" + "\n".join(sorted(wrong))


CHECKER_FAMILIES = ("eos", "queue", "connect", "logs", "streams", "share", "offsets")
#: The shared top's modules that compose the families.
CHECKER_COMPOSERS = {"checkers.suites", "checkers.cli"}


def _family(mod: str, families: tuple[str, ...], pkg: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == pkg and parts[1] in families else None


def test_checker_families_borrow_nothing_sideways(graph: dict[str, set[str]]) -> None:
    """What two families need lives at the top (or in ``checkers.logdump``); the top imports
    a family only where it composes them."""
    wrong = []
    for mod, deps in graph.items():
        if not mod.startswith("checkers"):
            continue
        own = _family(mod, CHECKER_FAMILIES, "checkers")
        for dep in deps:
            theirs = _family(dep, CHECKER_FAMILIES, "checkers")
            if theirs is None or theirs == own:
                continue
            if own is not None or mod not in CHECKER_COMPOSERS:
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "checker modules borrowing a family's:\n" + "\n".join(sorted(wrong))


WORKLOAD_PACKAGES = ("eos", "queue", "connect", "streams", "share")


def test_workload_packages_borrow_nothing_sideways(graph: dict[str, set[str]]) -> None:
    """A workload package imports no other: what two share is a module of ``workloads/``
    itself (the drive contract, process supervision, final reads, the client machinery)."""
    wrong = []
    for mod, deps in graph.items():
        if not mod.startswith("workloads."):
            continue
        own = _family(mod, WORKLOAD_PACKAGES, "workloads")
        for dep in deps:
            theirs = _family(dep, WORKLOAD_PACKAGES, "workloads")
            if theirs is not None and theirs != own:
                wrong.append(f"{mod} -> {dep}")
    assert not wrong, "workload modules borrowing another package's:\n" + "\n".join(sorted(wrong))


FAULT_FAMILIES = ("network", "brokers", "clients", "moments", "late", "topics", "leaderless")


def test_fault_families_stand_on_base_alone(graph: dict[str, set[str]]) -> None:
    """``base`` imports no family and no family another, but ``moments``, which aims the
    broker and network faults at a protocol moment."""
    wrong = []
    for mod, deps in graph.items():
        if not mod.startswith("nemeses.faults"):
            continue
        own = mod.split(".")[2] if mod.count(".") >= 2 else None
        for dep in deps:
            theirs = dep.split(".")[2] if dep.startswith("nemeses.faults.") else None
            if theirs not in FAULT_FAMILIES or theirs == own or own == "moments":
                continue
            wrong.append(f"{mod} -> {dep}")
    assert not wrong, "fault families importing each other:\n" + "\n".join(sorted(wrong))


def test_every_family_is_in_the_tree() -> None:
    for family in CHECKER_FAMILIES:
        assert (ROOT / "checkers" / family / "__init__.py").is_file(), family
    for family in FAULT_FAMILIES:
        assert (ROOT / "nemeses" / "faults" / f"{family}.py").is_file(), family
    for family in WORKLOAD_PACKAGES:
        assert (ROOT / "workloads" / family / "driver.py").is_file(), family


#: No module outside the tests is longer: one that grows past it holds several things.
MAX_MODULE_LINES = 600


def test_no_module_outside_the_tests_is_over_the_limit() -> None:
    long = []
    for pkg in (*PACKAGES, "bench"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            n = len(path.read_text().splitlines())
            if n > MAX_MODULE_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


#: A block of this many lines or more, copied between two places outside the tests, fails.
MIN_DUPLICATE_LINES = 11


def test_no_block_is_copied_outside_the_tests() -> None:
    """One way to do each thing: a block repeated in two modules belongs in one place both
    import (pylint's similarity checker, every line counted: comments, docstrings and imports
    included)."""
    import contextlib
    import io

    from pylint.checkers.symilar import Symilar

    sims = Symilar(min_lines=MIN_DUPLICATE_LINES)
    for pkg in (*PACKAGES, "bench"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            with path.open(encoding="utf-8") as stream:
                sims.append_stream(str(path.relative_to(ROOT)), stream)
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        sims.run()
    text = report.getvalue()
    assert text.strip().endswith("duplicates=0 percent=0.00"), "copied blocks:\n" + text


ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"
#: The parents whose every directory the page must name (a workload package, a checker
#: family, the fault families' folder, a harness room, the clients and their manifests).
NAMED_PARENTS = ("workloads", "checkers", "nemeses", "harness")
#: A backticked path: segments of names joined by ``/`` (no spaces, placeholders or globs).
_PATH_SPAN = re.compile(r"[\w.-]+(?:/[\w.-]+)*/?")


def _doc_paths(text: str) -> set[str]:
    """The paths the page names in inline code, outside its code blocks, without the
    trailing ``/`` of a directory."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    spans = re.findall(r"`([^`\n]+)`", prose)
    return {s.rstrip("/") for s in spans if "/" in s and _PATH_SPAN.fullmatch(s)}


def _tracked_dirs(parent: Path) -> list[Path]:
    """The directories of ``parent`` that hold a file (a folder of bytecode caches alone is
    what a moved package leaves behind, not part of the tree)."""
    return [
        d
        for d in sorted(parent.iterdir())
        if d.is_dir()
        and not d.name.startswith((".", "_"))
        and any(f.is_file() and "__pycache__" not in f.parts for f in d.rglob("*"))
    ]


def test_the_architecture_page_names_the_tree_as_it_is() -> None:
    """docs/architecture.md is regenerated from the tree: every path it names in backticks
    exists (from the project's root, or, for one named inside its room such as ``faults/``,
    as the tail of a path in the tree), and it names every top-level package and every
    directory directly under ``workloads/``, ``checkers/``, ``nemeses/`` and ``harness/``."""
    paths = _doc_paths(ARCHITECTURE_DOC.read_text())
    assert paths, "the page names no path"
    tops = {p.name for p in ROOT.iterdir()}
    tree = {
        p.relative_to(ROOT).as_posix()
        for top in (*PACKAGES, "bench", "docker", "docs", "tests")
        for p in (ROOT / top).rglob("*")
        if "__pycache__" not in p.parts and "node_modules" not in p.parts
    }
    missing = sorted(
        p
        for p in paths
        if not (
            (ROOT / p).exists()
            if p.split("/")[0] in tops
            else any(t.endswith("/" + p) for t in tree)
        )
    )
    assert not missing, "docs/architecture.md names paths the tree lacks:\n" + "\n".join(missing)

    def named(rel: str) -> bool:
        return any(p == rel or p.startswith(rel + "/") for p in paths)

    packages = [d.name for d in ROOT.iterdir() if (d / "__init__.py").is_file()]
    under = [
        d.relative_to(ROOT).as_posix() for top in NAMED_PARENTS for d in _tracked_dirs(ROOT / top)
    ]
    unnamed = sorted(p for p in [*packages, *under] if not named(p))
    assert not unnamed, "docs/architecture.md does not name:\n" + "\n".join(unnamed)
