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

from harness.storefiles import read_json_dict
from history import is_nemesis, iter_history
from history.schema import wall_ms
from workloads.spec import Figures, ReportSpec, WorkloadSpec


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
    rebalances: list[tuple[float, str, str, Any]] = field(default_factory=list)
    journeys: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    op_count: int = 0
    unfinished: list[tuple[float, str, int]] = field(default_factory=list)
    #: What the workload's figures count (``workloads.spec.Figures``).
    figures: Figures = field(default_factory=Figures)
    #: What else the workload's report shows (``workloads.spec.ReportSpec``).
    report: ReportSpec = field(default_factory=ReportSpec)
    #: The workload's own figures: per figure title, ``(t, series, value)`` points.
    series: dict[str, list[tuple[float, str, float]]] = field(default_factory=dict)


def spec_of_run(config: dict[str, Any]) -> WorkloadSpec | None:
    """The declaration of the run's workload (None for one no longer registered)."""
    from harness.run.workloads import spec_of

    return spec_of(config.get("workload", (config.get("options") or {}).get("workload")))


def flagged_values(results: dict[str, Any] | None, limit: int) -> set[str]:
    """Input values named by the checkers' examples (their ``value`` / ``values`` keys), at
    most ``limit``, taken in turn from each checker so that every anomaly type gets some.

    The ops and records an example carries as context are not walked: they name every value
    of a transaction, most of them innocent (and some examples' records hold a record's
    JSON text under ``value``, not a value's name).
    """

    def walk(node: Any, out: dict[str, None]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("value", "values") and isinstance(v, str):
                    out[v] = None
                elif k == "values" and isinstance(v, list):
                    out.update((x, None) for x in v if isinstance(x, str))
                elif k not in ("ops", "records", "record", "offsets_record"):
                    walk(v, out)
        elif isinstance(node, list):
            for item in node:
                walk(item, out)

    if not results:
        return set()
    root = results.get("checkers", results.get("examples", {}))
    parts = list(root.values()) if isinstance(root, dict) else [root]
    per_part: list[list[str]] = []
    for part in parts:
        found: dict[str, None] = {}
        walk(part, found)
        per_part.append(list(found))
    chosen: set[str] = set()
    for i in range(max((len(p) for p in per_part), default=0)):
        for values in per_part:
            if i < len(values) and len(chosen) < limit:
                chosen.add(values[i])
    return chosen


def load_run(run_dir: Path, journey_limit: int = 12) -> RunData:
    run_dir = Path(run_dir)
    data = RunData(
        run_dir,
        read_json_dict(run_dir / "config.json") or {},
        read_json_dict(run_dir / "results.json"),
        read_json_dict(run_dir / "summary.json"),
        read_json_dict(run_dir / "schedule.json"),
    )
    spec = spec_of_run(data.config)
    if spec is not None:
        data.figures, data.report = spec.figures, spec.report
    figures, journeys = data.figures, data.report.journeys
    visible, fed = figures.throughput(), figures.fed()
    series = [(s.title, s.points()) for s in data.report.series]
    history = run_dir / "history.jsonl"
    if not history.exists():
        return data
    flagged = flagged_values(data.results, journey_limit)
    # A value the workload's finder claims is found by what the ops mean, any other by the
    # name the ops carry; each search runs only if some value of its kind is wanted.
    claimed = {v for v in flagged if journeys.claims(v)}
    finder = None
    if claimed and journeys.finder is not None:
        finder = journeys.finder(
            claimed, lambda v, inv, op, what, res: _step(v, inv, op, data.t0, (what, res))
        )
    wanted = flagged - claimed

    def step(v: str, inv: dict[str, Any], op: dict[str, Any] | None) -> dict[str, Any]:
        return _step(v, inv, op, data.t0, (_said(journeys.describe(v, inv, op), inv), None))

    invokes: dict[Any, tuple[int, dict[str, Any]]] = {}
    open_faults: dict[str, list[Fault]] = defaultdict(list)
    first = True
    wall0: int | None = None
    for op in iter_history(history):
        if first:
            data.t0 = op["time"]
            wall0 = wall_ms(op.get("wall"))
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
            if f in figures.latency_fs:
                data.txn_latency.append((t, (op["time"] - started) / 1e9, kind))
            if wanted:
                vals = set(journeys.carried(inv)) | set(journeys.carried(op))
                for v in vals & wanted:
                    data.journeys.setdefault(v, []).append(step(v, inv, op))
            if finder:
                finder.see(inv, op)
        if is_nemesis(proc) and kind == "ok":
            value = op.get("value") or {}
            if f == "start":
                fault = Fault(
                    value.get("kind", "?"), t, None, value.get("targets"), value.get("why", "")
                )
                data.faults.append(fault)
                open_faults[fault.kind].append(fault)
            elif f == "stop" and open_faults.get(value.get("kind", "")):
                open_faults[value["kind"]].pop(0).end = t
        if kind == "ok" and (n := visible(op)) is not None:
            data.committed.append((t, n))
        if kind == "ok" and (n := fed(op)) is not None:
            data.seeded.append((t, n))
        if kind == "ok" and (change := data.report.assignment(op)) is not None:
            data.rebalances.append((t, change[0], proc, change[1]))
        if kind == "ok":
            for title, points in series:
                for name, y in points(op) or ():
                    data.series.setdefault(title, []).append((t, name, y))
    # Invokes never completed: the process was killed (or hung) inside the op. What it did
    # may still have reached Kafka, so these ops belong on the timeline and in journeys.
    for _started, inv in invokes.values():
        t = (inv["time"] - data.t0) / 1e9
        data.unfinished.append((t, str(inv["process"]), inv.get("index", 0)))
        for v in set(journeys.carried(inv)) & wanted:
            data.journeys.setdefault(v, []).append(step(v, inv, None))
        if finder:
            finder.see(inv, None)
    for v, steps in (finder.finish() if finder else {}).items():
        data.journeys.setdefault(v, []).extend(steps)
    for fault in data.faults:
        if fault.end is None:
            fault.end = data.span
    for value, step in log_steps(data.results, wall0, data.span):
        if value in flagged:
            data.journeys.setdefault(value, []).append(step)
    return data


def log_steps(
    results: dict[str, Any] | None, wall0: int | None, end: float = 0.0
) -> list[tuple[str, dict[str, Any]]]:
    """One journey step per checker example that carries broker-log evidence (``log``, see
    ``checkers.logs.rules.position_evidence``), for each value the example names.

    Why: the history says what clients believed; the dump says what the brokers stored. A
    record committed by a later transaction, an aborted record a reader saw, a stuck last
    stable offset: each is only understood with both side by side. The step is placed at the
    record's ``create_time`` (the producer's clock, which shares the machine's wall clock with
    the history's ``wall``), so it lands among the ops that wrote it; without one, at ``end``
    (the run's last op).
    """
    out: list[tuple[str, dict[str, Any]]] = []
    for checker, res in ((results or {}).get("checkers") or {}).items():
        exs = res.get("examples") if isinstance(res, dict) else None
        for ex in exs if isinstance(exs, list) else []:
            log = ex.get("log") if isinstance(ex, dict) else None
            if not isinstance(log, dict):
                continue
            t = None
            for rec in log.get("records") or []:
                if not rec.get("isControl") and rec.get("create_time") is not None and wall0:
                    t = round((rec["create_time"] - wall0) / 1000, 3)
            step = {
                "t": t if t is not None else round(end, 3),
                "t_end": None,
                "process": f"broker {log.get('node')}",
                "f": "log",
                "type": str(log.get("outcome")),
                "what": f"{checker} ({ex.get('kind', checker)}), broker log: {log.get('reason')}"
                + _marker_times(log, wall0),
                "invoke": {k: v for k, v in log.items() if k != "records"},
                "result": {"records": log.get("records")},
                "error": None,
            }
            named = list(ex.get("values") or [])
            if isinstance(ex.get("value"), str):  # an example that names its one value
                named.append(ex["value"])
            for v in named:
                if isinstance(v, str):
                    out.append((v, step))
    return out


def _marker_times(log: dict[str, Any], wall0: int | None) -> str:
    """When the markers around the record were written (run seconds), if the dump says."""
    if not wall0:
        return ""
    parts = []
    for rec in log.get("records") or []:
        if rec.get("isControl") and rec.get("create_time") is not None:
            t = (rec["create_time"] - wall0) / 1000
            parts.append(f"{rec.get('marker')} marker @{rec.get('offset')} written at {t:.3f} s")
        elif rec.get("create_time") is not None:
            t = (rec["create_time"] - wall0) / 1000
            parts.append(f"record @{rec.get('offset')} created at {t:.3f} s")
    return f" ({'; '.join(parts)})" if parts else ""


def _step(
    value: str,
    inv: dict[str, Any],
    op: dict[str, Any] | None,
    t0: int,
    found: tuple[str, Any] | None = None,
) -> dict[str, Any]:
    """One row of a value's journey: when, who, and what happened to that value.

    ``found``: what the op did to the value and the part of its result that concerns it (None:
    the whole result), as the workload's journeys say (``workloads.spec.Journeys``).
    """
    return {
        "t": round((inv["time"] - t0) / 1e9, 3),
        "t_end": round((op["time"] - t0) / 1e9, 3) if op else None,
        "process": inv["process"],
        "f": inv["f"],
        "type": op["type"] if op else "never completed",
        "what": found[0] if found else "",
        "invoke": inv.get("value"),
        "result": found[1] if found and found[1] is not None else op.get("value") if op else None,
        "error": op.get("error") if op else None,
    }


def _said(what: str, inv: dict[str, Any]) -> str:
    """What the workload said an op did to a value, or the op's own value when it said nothing."""
    return what or json.dumps(inv.get("value"), default=str)[:300]
