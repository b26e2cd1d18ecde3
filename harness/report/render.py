"""Render ``report.html`` for a stored run (jinja2 template + matplotlib figures)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from checkers.anomalies import counts_of, describe, found
from harness.report.data import RunData, flagged_values, load_run
from harness.report.plots import fault_colors, series_figures, throughput_latency, timeline

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_EXAMPLES = 5


def workload_options(config: dict[str, Any]) -> dict[str, Any]:
    """The workload's options as ``config.json`` holds them (under the workload's name, in
    the options or beside them, in runs stored before the workload registry)."""
    from harness.run.workloads import DEFAULT

    opts = config.get("options", config)
    name = str(opts.get("workload", DEFAULT))
    return dict(opts.get("workload_options") or config.get(name) or opts.get(name) or {})


def repro_command(data: RunData) -> str:
    """The command line that runs this test again: the run's own flags, and the flags of
    its workload's options as the workload declares them (``workloads.spec.Option``)."""
    from harness.run.options import repro_args as run_flags
    from harness.run.workloads import DEFAULT, spec_of

    c = data.config
    opts = c.get("options", c)
    workload = str(opts.get("workload", DEFAULT))
    spec = spec_of(workload)
    args = ["python", "-m", "harness", "run", "--workload", workload]
    if spec is not None:
        args += spec.repro_args(workload_options(c))
    args += run_flags(opts)
    nemesis = opts.get("nemesis")
    if (data.run_dir / "schedule.json").exists():
        args += ["--replay", str(data.run_dir.resolve() / "schedule.json")]
    elif nemesis and nemesis not in ("none", ["none"]):
        args += ["--nemesis", ",".join(nemesis) if isinstance(nemesis, list) else str(nemesis)]
    return shlex.join(args)


def _verdict(data: RunData) -> tuple[str, str]:
    """The checkers' verdict; a run without ``results.json`` has none (the drain tally in
    ``summary.json`` is counts, not a verdict)."""
    if data.results is not None:
        v = data.results.get("valid")
        if v is True:
            return "valid", "valid"
        if v is False:
            return "invalid", "INVALID"
        return "unknown", "unknown"
    return "unknown", "not checked"


def _checkers(results: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """One row per checker: its verdict, anomaly count and counts per anomaly type."""
    if not results:
        return []
    checkers = results.get("checkers") or {"checker": results}
    out = []
    for name, r in checkers.items():
        if not isinstance(r, dict):
            continue
        v = r.get("valid")
        cls = "valid" if v is True else "invalid" if v is False else "unknown"
        out.append(
            (
                name,
                {
                    "valid": {"valid": "valid", "invalid": "INVALID"}.get(cls, "unknown"),
                    "cls": cls,
                    "count": sum(counts_of(name, r).values()),
                    "anomalies": counts_of(name, r),
                    "error": r.get("error", ""),
                },
            )
        )
    return out


def _examples_of(src: dict[str, Any], name: str) -> dict[str, list[Any]]:
    """Examples keyed by anomaly type: a checker of several types keeps ``{type: [..]}``, a
    checker of one a plain list (its type is the checker's name)."""
    ex = src.get("examples")
    if isinstance(ex, dict):
        return {k: v for k, v in ex.items() if isinstance(v, list)}
    if isinstance(ex, list) and ex:
        return {name: ex}
    return {}


def _anomalies(
    results: dict[str, Any] | None,
) -> list[tuple[str, int, str, list[dict[str, Any]]]]:
    """Per anomaly type: how many were found, what the type means (its one definition in
    ``checkers.anomalies``), and the first examples, each with the values it names (linked
    to their journeys) and its JSON."""
    if not results:
        return []
    merged: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    summaries: dict[str, str] = {}
    sources = [("checker", results)] + [
        (n, c) for n, c in (results.get("checkers") or {}).items() if isinstance(c, dict)
    ]
    for name, src in sources:
        for kind, examples in _examples_of(src, name).items():
            merged.setdefault(kind, []).extend(examples)
            summaries.setdefault(kind, describe(kind, name) or describe(kind))
    for checker, kind, n in found(results):
        counts[kind] = max(counts.get(kind, 0), n)
        summaries[kind] = describe(kind, checker) or summaries.get(kind, "")
    out = []
    for kind, exs in sorted(merged.items()):
        shown = [
            {
                "values": sorted(flagged_values({"examples": [e]}, 50)),
                "brief": _brief(e),
                "json": json.dumps(e, indent=1, default=str)[:4000],
            }
            for e in exs[:MAX_EXAMPLES]
        ]
        out.append((kind, counts.get(kind, len(exs)), summaries.get(kind, ""), shown))
    return out


def _brief(example: Any) -> str:
    """An example's own fields in one line (its ops and records are context, shown below)."""
    if not isinstance(example, dict):
        return json.dumps(example, default=str)[:200]
    keep = {k: v for k, v in example.items() if k not in ("ops", "records", "values")}
    if isinstance(keep.get("log"), dict):  # broker-log evidence: its sentence, not its records
        keep["log"] = keep["log"].get("reason")
    return json.dumps(keep, default=str)[:200] if keep else ""


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


def _active(data: RunData, t: float, until: float | None = None) -> list[str]:
    """Faults in effect at any moment of ``[t, until]`` (seconds since the first op), as
    ``kind->targets``."""
    end = t if until is None else until
    return [
        f"{f.kind}->{f.targets}"
        for f in data.faults
        if f.start <= end and t <= (f.end if f.end is not None else data.span)
    ]


def _journeys(data: RunData) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every op that touched a flagged value, in time order, with the faults active while it
    ran."""
    out = []
    order = data.report.journeys.order
    for value, steps in sorted(data.journeys.items(), key=lambda kv: order(kv[0])):
        rows = []
        for s in sorted(steps, key=lambda s: s["t"]):
            # An op that never completed: the faults at its start (its end is unknown).
            until = s["t_end"] if s["t_end"] is not None else s["t"]
            detail = {"invoke": s["invoke"], "result": s["result"], "error": s["error"]}
            rows.append(
                {
                    **s,
                    "faults": ", ".join(_active(data, s["t"], until)),
                    "detail": json.dumps(detail, default=str)[:2000],
                }
            )
        out.append((value, rows))
    return out


def _links(run_dir: Path) -> list[tuple[str, str]]:
    """The run's raw evidence, relative to the report so the store can be moved or served."""
    fixed = [
        ("merged history (history.jsonl)", "history.jsonl"),
        ("checker results (results.json)", "results.json"),
        ("final drain summary (summary.json)", "summary.json"),
        ("fault schedule (schedule.json)", "schedule.json"),
        ("run configuration (config.json)", "config.json"),
        ("broker log-segment dumps (evidence/logdump.jsonl)", "evidence/logdump.jsonl"),
        ("toxiproxy log", "toxiproxy.log"),
    ]
    globs = [
        ("broker {} server.log", "nodes/*/server.log"),
        ("processor log {}", "logs/*"),
        ("per-process history {}", "processes/*.jsonl"),
    ]
    links = [(label, href) for label, href in fixed if (run_dir / href).exists()]
    for label, pattern in globs:
        for path in sorted(run_dir.glob(pattern)):
            name = path.parent.name if "{}" in label and "nodes" in pattern else path.name
            links.append((label.format(name), str(path.relative_to(run_dir))))
    return links


def _time(data: RunData) -> str:
    c = data.config
    return str(c.get("written_wall") or (data.results or {}).get("written_wall") or "")


def write_report(run_dir: Path) -> Path:
    """Render the report of ``run_dir`` to ``run_dir/report.html`` and return its path."""
    from harness.run.workloads import DEFAULT

    run_dir = Path(run_dir)
    data = load_run(run_dir)
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    cls, text = _verdict(data)
    opts = data.config.get("options", data.config)
    wopts = workload_options(data.config)
    nemesis = opts.get("nemesis", "none")
    colors = fault_colors(data)
    faults = [
        {
            "kind": f.kind,
            "start": round(f.start, 2),
            "end": round(f.end, 2) if f.end is not None else None,
            "targets": f.targets,
            "why": f.why,
            "color": colors[f.kind],
        }
        for f in data.faults
    ]
    html = env.get_template("report.html.j2").render(
        name=opts.get("test_name", run_dir.parent.name),
        verdict_class=cls,
        verdict_text=text,
        run_id=data.config.get("run_id") or data.config.get("cluster_run_id", ""),
        run_time=_time(data),
        kafka_version=data.config.get("kafka_version_resolved") or opts.get("kafka_version"),
        transaction_version=opts.get("transaction_version"),
        broker_patch=opts.get("broker_patch"),
        security=opts.get("security") or "plaintext",
        workload=opts.get("workload", DEFAULT),
        client=wopts.get("client", ""),
        variant=wopts.get("variant", ""),
        seed=opts.get("seed"),
        nemesis=",".join(nemesis) if isinstance(nemesis, list) else nemesis,
        op_count=data.op_count,
        span=data.span,
        repro=repro_command(data),
        hooks=wopts.get("hooks"),
        config_json=json.dumps(data.config, indent=1, default=str),
        checkers=_checkers(data.results),
        errors=(data.results or {}).get("errors") or {},
        known_findings=(data.results or {}).get("known_findings") or [],
        summary_lines=(data.summary or {}).get("lines") or [],
        time_instances=(((data.summary or {}).get("stats") or {}).get("time_use") or {}).get(
            "instances"
        )
        or {},
        drained=(data.summary or {}).get("drained", True),
        anomalies=_anomalies(data.results),
        journeys=_journeys(data),
        journeys_intro=data.report.journeys.intro,
        assignments_title=data.report.assignments_title,
        series=series_figures(data),
        timeline_png=timeline(data, _flagged_indexes(data.results)),
        throughput_png=throughput_latency(data),
        figures_title=data.figures.title,
        faults=faults,
        fault_kinds=sorted(colors.items()),
        rebalances=[
            {
                "t": round(t, 2),
                "event": e,
                "process": p,
                "generation": g,
                "faults": _active(data, t),
            }
            for t, e, p, g in data.rebalances
        ],
        links=_links(run_dir),
    )
    out = run_dir / "report.html"
    out.write_text(html)
    return out
