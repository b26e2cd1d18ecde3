"""What a report needs from a stored run, read once, in one pass over the history.

The history can hold hundreds of thousands of ops; this module keeps only what the report
shows: per-process op times and outcomes (for the timeline), fault intervals, transaction
latencies and committed records per second, rebalances, seeded-but-not-yet-committed
backlog, and the ops that touch the values the checkers flagged (for their journeys).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history import iter_history


@dataclass
class Fault:
    kind: str
    start: float
    end: float | None
    targets: Any
    why: str


@dataclass
class RunData:
    run_dir: Path
    config: dict[str, Any]
    results: dict[str, Any] | None
    summary: dict[str, Any] | None
    schedule: dict[str, Any] | None
    t0: int = 0
    span: float = 0.0
    processes: dict[str, list[tuple[float, str, int]]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    txn_latency: list[tuple[float, float, str]] = field(default_factory=list)
    committed: list[tuple[float, int]] = field(default_factory=list)
    seeded: list[tuple[float, int]] = field(default_factory=list)
    rebalances: list[tuple[float, str]] = field(default_factory=list)
    journeys: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    op_count: int = 0


def _json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def flagged_values(results: dict[str, Any] | None, limit: int) -> set[str]:
    """Input values named by the checkers' examples (``values`` or ``value`` keys)."""
    out: set[str] = set()

    def walk(node: Any) -> None:
        if len(out) >= limit:
            return
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("value", "values", "input", "inputs") and isinstance(v, str):
                    out.add(v)
                elif k in ("values",) and isinstance(v, list):
                    out.update(x for x in v if isinstance(x, str))
                else:
                    walk(v)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    if results:
        walk(results.get("checkers", results.get("examples", {})))
    return set(sorted(out)[:limit])


def _values_in(op: dict[str, Any]) -> list[str]:
    v = op.get("value")
    if not isinstance(v, dict):
        return []
    found = []
    for key in ("inputs", "values"):
        for item in v.get(key) or []:
            if isinstance(item, list):
                found += [x for x in item if isinstance(x, str)]
    for key in ("outputs", "records"):
        for item in v.get(key) or []:
            if isinstance(item, list) and len(item) > 2 and isinstance(item[2], str):
                found.append(item[2][4:] if item[2].startswith("out-") else item[2])
    return found


def load_run(run_dir: Path, journey_limit: int = 12) -> RunData:
    run_dir = Path(run_dir)
    data = RunData(
        run_dir,
        _json(run_dir / "config.json") or {},
        _json(run_dir / "results.json"),
        _json(run_dir / "summary.json"),
        _json(run_dir / "schedule.json"),
    )
    history = run_dir / "history.jsonl"
    if not history.exists():
        return data
    wanted = flagged_values(data.results, journey_limit)
    invokes: dict[Any, tuple[int, dict[str, Any]]] = {}
    open_faults: dict[str, list[Fault]] = defaultdict(list)
    first = True
    for op in iter_history(history):
        if first:
            data.t0 = op["time"]
            first = False
        t = (op["time"] - data.t0) / 1e9
        data.span = max(data.span, t)
        data.op_count += 1
        proc = str(op["process"])
        kind, f = op["type"], op["f"]
        data.processes.setdefault(proc, []).append((t, kind, op.get("index", 0)))
        if kind == "invoke":
            invokes[op["process"]] = (op["time"], op)
        elif op["process"] in invokes and invokes[op["process"]][1]["f"] == f:
            started, inv = invokes.pop(op["process"])
            if f == "txn":
                data.txn_latency.append((t, (op["time"] - started) / 1e9, kind))
            if wanted:
                vals = set(_values_in(inv)) | set(_values_in(op))
                for v in vals & wanted:
                    data.journeys.setdefault(v, []).append(_step(inv, op, t, data.t0))
        if proc == "nemesis" and kind == "ok":
            value = op.get("value") or {}
            if f == "start":
                fault = Fault(
                    value.get("kind", "?"), t, None, value.get("targets"), value.get("why", "")
                )
                data.faults.append(fault)
                open_faults[fault.kind].append(fault)
            elif f == "stop" and open_faults.get(value.get("kind", "")):
                open_faults[value["kind"]].pop(0).end = t
        if f == "txn" and kind == "ok":
            data.committed.append((t, len((op.get("value") or {}).get("outputs") or [])))
        elif f == "send" and kind == "ok" and proc == "seeder":
            data.seeded.append((t, len((op.get("value") or {}).get("values") or [])))
        elif f == "rebalance" and kind == "ok":
            data.rebalances.append((t, str((op.get("value") or {}).get("event", ""))))
    for fault in data.faults:
        if fault.end is None:
            fault.end = data.span
    return data


def _step(inv: dict[str, Any], op: dict[str, Any], t: float, t0: int) -> dict[str, Any]:
    return {
        "t": round(t, 3),
        "process": op["process"],
        "f": op["f"],
        "type": op["type"],
        "invoke": inv.get("value"),
        "result": op.get("value"),
        "error": op.get("error"),
    }
