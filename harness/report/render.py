"""Render ``report.html`` for a stored run (jinja2 template + matplotlib figures)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from harness.report.data import RunData, load_run
from harness.report.plots import throughput_latency, timeline

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_EXAMPLES = 5


def repro_command(data: RunData) -> str:
    c = data.config
    opts = c.get("options", c)
    eos = opts.get("eos") or {}
    args = ["python", "-m", "harness", "run", "--workload", str(opts.get("workload", "eos"))]
    for flag, value in (
        ("--variant", eos.get("variant")),
        ("--client", eos.get("client")),
        ("--processors", eos.get("processors")),
        ("--partitions", eos.get("partitions")),
        ("--values", eos.get("values")),
        ("--txn-size", eos.get("txn_size")),
        ("--time-limit", opts.get("time_limit")),
        ("--seed", opts.get("seed")),
        ("--kafka-version", opts.get("kafka_version")),
        ("--transaction-version", opts.get("transaction_version")),
    ):
        if value is not None:
            args += [flag, str(value)]
    if (data.run_dir / "schedule.json").exists():
        args += ["--replay", str(data.run_dir / "schedule.json")]
    return shlex.join(args)


def _verdict(data: RunData) -> tuple[str, str]:
    if data.results is not None:
        v = data.results.get("valid")
        if v is True:
            return "valid", "valid"
        if v is False:
            return "invalid", "INVALID"
        return "unknown", "unknown"
    if data.summary is not None:
        ok = (data.summary.get("summary") or {}).get("exactly_once")
        return ("valid", "exactly-once") if ok else ("invalid", "NOT exactly-once")
    return "unknown", "no verdict"


def _checkers(results: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    if not results:
        return []
    checkers = results.get("checkers") or {"checker": results}
    out = []
    for name, r in checkers.items():
        if not isinstance(r, dict):
            continue
        v = r.get("valid")
        cls = "valid" if v is True else "invalid" if v is False else "unknown"
        out.append((name, {"valid": v, "cls": cls, "anomalies": r.get("anomalies", {})}))
    return out


def _anomalies(results: dict[str, Any] | None) -> list[tuple[str, list[str]]]:
    if not results:
        return []
    merged: dict[str, list[Any]] = {}
    sources = [results] + [
        c for c in (results.get("checkers") or {}).values() if isinstance(c, dict)
    ]
    for src in sources:
        for kind, examples in (src.get("examples") or {}).items():
            merged.setdefault(kind, []).extend(examples if isinstance(examples, list) else [])
    return [
        (kind, [json.dumps(e, indent=1, default=str)[:4000] for e in exs[:MAX_EXAMPLES]])
        for kind, exs in sorted(merged.items())
    ]


def _flagged_indexes(results: dict[str, Any] | None) -> set[int]:
    found: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("index"), int) and "f" in node:
                found.add(node["index"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(results or {})
    return found


def _journeys(data: RunData) -> list[tuple[str, list[dict[str, Any]]]]:
    out = []
    for value, steps in sorted(data.journeys.items()):
        rows = []
        for s in sorted(steps, key=lambda s: s["t"]):
            active = [
                f"{f.kind}->{f.targets}"
                for f in data.faults
                if f.start <= s["t"] <= (f.end or data.span)
            ]
            detail = {"invoke": s["invoke"], "result": s["result"], "error": s["error"]}
            rows.append(
                {**s, "faults": ", ".join(active), "detail": json.dumps(detail, default=str)[:600]}
            )
        out.append((value, rows))
    return out


def write_report(run_dir: Path) -> Path:
    """Render the report of ``run_dir`` to ``run_dir/report.html`` and return its path."""
    run_dir = Path(run_dir)
    data = load_run(run_dir)
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    cls, text = _verdict(data)
    opts = data.config.get("options", data.config)
    links = [
        (label, href)
        for label, href in [
            ("merged history (history.jsonl)", "history.jsonl"),
            ("checker results (results.json)", "results.json"),
            ("fault schedule (schedule.json)", "schedule.json"),
            ("run configuration (config.json)", "config.json"),
            ("broker log-segment dumps (evidence/logdump.jsonl)", "evidence/logdump.jsonl"),
        ]
        if (run_dir / href).exists()
    ] + [
        (f"broker {p.parent.name} server.log", str(p.relative_to(run_dir)))
        for p in sorted(run_dir.glob("nodes/*/server.log"))
    ]
    html = env.get_template("report.html.j2").render(
        name=opts.get("test_name", run_dir.parent.name),
        verdict_class=cls,
        verdict_text=text,
        run_id=data.config.get("run_id", ""),
        kafka_version=data.config.get("kafka_version_resolved", opts.get("kafka_version")),
        client=(opts.get("eos") or {}).get("client", "python"),
        seed=opts.get("seed"),
        nemesis=opts.get("nemesis", "none"),
        op_count=data.op_count,
        span=data.span,
        repro=repro_command(data),
        checkers=_checkers(data.results),
        summary=json.dumps((data.summary or {}).get("summary")) if data.summary else "",
        anomalies=_anomalies(data.results),
        journeys=_journeys(data),
        timeline_png=timeline(data, _flagged_indexes(data.results)),
        throughput_png=throughput_latency(data),
        faults=(data.schedule or {}).get("executed", []),
        links=links,
    )
    out = run_dir / "report.html"
    out.write_text(html)
    return out
