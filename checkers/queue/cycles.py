"""Transaction dependency graph and G0 / G1c cycle search for the queue checker.

Vertices are the ok and info send/poll/txn completions (an info txn may have committed; failed
ones may not have, and reading them is already reported as G1a). Edges:

* ``wr``: T1 sent value v to key k and T2 polled v from k (T1 != T2).
* ``ww`` (only with ``ww_deps``): T1's value sits at dense index i-1 of key k's log and T2's at
  index i, i.e. successive offsets on one key (T1 != T2).

Strongly connected components are found with an iterative Tarjan (no recursion limit).
Within each non-trivial SCC we report at most one G1c cycle (if any ``wr`` edge lies inside the
SCC; the shortest of a few candidate cycles through such an edge) and, with ``ww_deps``, one G0
cycle per strongly connected component of the ``ww``-only subgraph. Jepsen's Elle finds the
same classes from the same edges; realtime/process variants (``G0-realtime`` ...) are not
searched because the queue history has no edges of those kinds here.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checkers.queue.analysis import Analysis
from checkers.queue.extract import Txn

WW = 0
WR = 1
_KIND_NAME = ("ww", "wr")
_G1C_CANDIDATES = 8
MAX_CYCLE_STEPS = 512


@dataclass(slots=True)
class Graph:
    """Adjacency lists over vertex ids; ``kinds[u][n]`` is the kind of edge ``succ[u][n]``."""

    txns: list[Txn]
    succ: list[list[int]]
    kinds: list[list[int]]
    ww_edges: int = 0
    wr_edges: int = 0

    def add(self, u: int, v: int, kind: int) -> None:
        self.succ[u].append(v)
        self.kinds[u].append(kind)
        if kind == WW:
            self.ww_edges += 1
        else:
            self.wr_edges += 1


def build_graph(a: Analysis, ww_deps: bool) -> Graph:
    """Build the wr (and optionally ww) dependency graph between committed-or-unknown txns."""
    verts = [t for t in a.parsed.txns if t.type in ("ok", "info")]
    vid = {id(t): i for i, t in enumerate(verts)}
    g = Graph(verts, [[] for _ in verts], [[] for _ in verts])
    writer_of = a.writer_of

    for j, t in enumerate(verts):
        if not t.reads:
            continue
        seen: set[int] = set()
        for k, pairs in t.reads.items():
            for _, v in pairs:
                w = writer_of.get((k, v))
                if w is None or w is t:
                    continue
                i = vid.get(id(w))
                if i is not None and i not in seen:
                    seen.add(i)
                    g.add(i, j, WR)

    if ww_deps:
        linked: set[tuple[int, int]] = set()
        for k, log in a.logs.items():
            prev: list[int] = []
            for vals in log.by_index:
                cur: list[int] = []
                for v in vals:
                    w = writer_of.get((k, v))
                    i = vid.get(id(w)) if w is not None else None
                    if i is not None:
                        cur.append(i)
                for i in prev:
                    for j in cur:
                        if i != j and (i, j) not in linked:
                            linked.add((i, j))
                            g.add(i, j, WW)
                prev = cur
    return g


def strongly_connected_components(succ: Sequence[Sequence[int]]) -> list[list[int]]:
    """Tarjan's algorithm with an explicit stack; returns only components of size > 1."""
    n = len(succ)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            edges = succ[v]
            if i < len(edges):
                work[-1] = (v, i + 1)
                w = edges[i]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def _bfs_path(
    g: Graph, start: int, goal: int, members: set[int], only: int | None
) -> list[tuple[int, int]] | None:
    """Shortest path start -> goal inside ``members``; [(vertex, kind of edge into it)]."""
    parent: dict[int, tuple[int, int]] = {start: (-1, -1)}
    q = deque([start])
    while q:
        u = q.popleft()
        if u == goal:
            path = []
            while u != start:
                p, kd = parent[u]
                path.append((u, kd))
                u = p
            path.reverse()
            return path
        for w, kd in zip(g.succ[u], g.kinds[u], strict=True):
            if w in members and w not in parent and (only is None or kd == only):
                parent[w] = (u, kd)
                q.append(w)
    return None


def _explain(a: Analysis, kind: int, t1: Txn, t2: Txn) -> dict[str, Any]:
    """Say which key/value justifies the edge t1 -> t2 (recomputed only for reported cycles)."""
    if kind == WR:
        for k, pairs in t2.reads.items():
            for o, v in pairs:
                if a.writer_of.get((k, v)) is t1:
                    return {"type": "wr", "key": k, "value": v, "offset": o}
    else:
        for k, pairs in t2.writes.items():
            log = a.logs.get(k)
            if log is None:
                continue
            for _, v2 in pairs:
                for o2 in log.offsets_of.get(v2, ()):
                    idx = bisect.bisect_left(log.offsets, o2)
                    if idx == 0:
                        continue
                    for v1 in log.by_index[idx - 1]:
                        if a.writer_of.get((k, v1)) is t1:
                            return {
                                "type": "ww",
                                "key": k,
                                "value": v1,
                                "value2": v2,
                                "offsets": [log.offsets[idx - 1], o2],
                            }
    return {"type": _KIND_NAME[kind]}


def _cycle_case(
    a: Analysis, g: Graph, typ: str, first: int, path: list[tuple[int, int]], scc_size: int
) -> dict[str, Any]:
    """Render a cycle. ``path`` leads from ``first`` back to ``first``: [(vertex, edge kind)]."""
    verts = [first] + [v for v, _ in path]
    n = len(path)
    # Pathological histories can have cycles of thousands of txns; keep the example readable
    # by showing both ends of the cycle and saying how many steps were left out.
    shown = (
        range(n)
        if n <= MAX_CYCLE_STEPS
        else [*range(MAX_CYCLE_STEPS // 2), *range(n - MAX_CYCLE_STEPS // 2, n)]
    )
    steps = [_explain(a, path[s][1], g.txns[verts[s]], g.txns[verts[s + 1]]) for s in shown]
    case: dict[str, Any] = {
        "type": typ,
        "length": n,
        "scc_size": scc_size,
        "cycle": [g.txns[verts[s]].op for s in shown] + [g.txns[first].op],
        "steps": steps,
    }
    if n > MAX_CYCLE_STEPS:
        case["elided_steps"] = n - len(steps)
    return case


def cycle_cases(
    a: Analysis, g: Graph, ww_deps: bool
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Find G0 and G1c cycles; returns ``({type: cases}, stats)``."""
    found: dict[str, list[dict[str, Any]]] = {"G0": [], "G1c": []}
    sccs = strongly_connected_components(g.succ)
    for comp in sccs:
        members = set(comp)
        # G1c: a cycle through at least one wr edge. Any wr edge u->w inside the SCC closes
        # into a cycle via the path w ~> u, so try a few and keep the shortest.
        best: tuple[int, list[tuple[int, int]]] | None = None
        tried = 0
        for u in comp:
            for w, kd in zip(g.succ[u], g.kinds[u], strict=True):
                if kd != WR or w not in members:
                    continue
                path = _bfs_path(g, w, u, members, None)
                if path is not None and (best is None or len(path) + 1 < len(best[1])):
                    best = (u, [(w, WR), *path])
                tried += 1
                if tried >= _G1C_CANDIDATES:
                    break
            if tried >= _G1C_CANDIDATES:
                break
        if best is not None:
            found["G1c"].append(_cycle_case(a, g, "G1c", best[0], best[1], len(comp)))
        if ww_deps:
            found["G0"].extend(_g0_cases(a, g, comp, members))
    stats = {
        "vertices": len(g.txns),
        "ww_edges": g.ww_edges,
        "wr_edges": g.wr_edges,
        "nontrivial_sccs": len(sccs),
        "largest_scc": max((len(c) for c in sccs), default=0),
    }
    return found, stats


def _g0_cases(a: Analysis, g: Graph, comp: list[int], members: set[int]) -> list[dict[str, Any]]:
    """One G0 cycle per strongly connected piece of the ww-only subgraph of ``comp``."""
    local = {v: i for i, v in enumerate(comp)}
    sub = [
        [local[w] for w, kd in zip(g.succ[v], g.kinds[v], strict=True) if kd == WW and w in members]
        for v in comp
    ]
    out = []
    for piece in strongly_connected_components(sub):
        pm = {comp[i] for i in piece}
        u = comp[piece[0]]
        for w, kd in zip(g.succ[u], g.kinds[u], strict=True):
            if kd == WW and w in pm:
                path = _bfs_path(g, w, u, pm, WW)
                if path is not None:
                    out.append(_cycle_case(a, g, "G0", u, [(w, WW), *path], len(comp)))
                    break
    return out
