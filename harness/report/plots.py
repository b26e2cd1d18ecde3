"""The report's figures, drawn with matplotlib and embedded as PNG (a report opens from disk).

Every time axis is seconds since the run's first op, and every figure shades the intervals in
which a fault was active, so a glance shows what the cluster was going through when the
throughput dropped or an anomalous op happened. The timeline downsamples ops per process so
that 100k+ ops stay readable, but never drops an op the checkers flagged.
"""

from __future__ import annotations

import base64
import io
from collections import Counter

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from harness.report.data import RunData

COLORS = {"ok": "#2e7d32", "fail": "#c62828", "info": "#ef6c00", "invoke": "#90a4ae"}
FAULT_COLORS = ["#ffe0b2", "#e1bee7", "#bbdefb", "#c8e6c9", "#ffcdd2", "#d7ccc8", "#f0f4c3"]
MAX_POINTS_PER_PROCESS = 4000


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def fault_colors(data: RunData) -> dict[str, str]:
    kinds = sorted({f.kind for f in data.faults})
    return {k: FAULT_COLORS[i % len(FAULT_COLORS)] for i, k in enumerate(kinds)}


def _shade(ax: plt.Axes, data: RunData, legend: bool = False) -> None:
    """A band per fault; an instantaneous one (a kill) gets a minimum width and an edge line,
    or it would be thinner than a pixel."""
    colors = fault_colors(data)
    seen: set[str] = set()
    least = max(data.span, 1.0) / 250
    for f in data.faults:
        label = f.kind if legend and f.kind not in seen else None
        seen.add(f.kind)
        end = max(f.end if f.end is not None else data.span, f.start + least)
        ax.axvspan(f.start, end, color=colors[f.kind], alpha=0.6, lw=0, label=label)
        if end - f.start <= least * 1.01:
            ax.axvline(f.start, color=colors[f.kind], lw=1.5)


def timeline(data: RunData, flagged: set[int]) -> str:
    procs = sorted(data.processes, key=lambda p: (not p.isdigit(), p.zfill(6)))
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.32 * len(procs) + 1)))
    _shade(ax, data, legend=True)
    for row, proc in enumerate(procs):
        ops = [o for o in data.processes[proc] if o[1] != "invoke"]
        keep = [o for o in data.processes[proc] if o[2] in flagged]
        step = max(1, len(ops) // MAX_POINTS_PER_PROCESS)
        sample = ops[::step] + keep
        for kind in ("ok", "info", "fail"):
            xs = [o[0] for o in sample if o[1] == kind]
            if xs:
                ax.scatter(xs, [row] * len(xs), s=6, color=COLORS[kind], marker="|")
        lost = [o[0] for o in data.unfinished if o[1] == proc]
        if lost:
            ax.scatter(lost, [row] * len(lost), s=40, color=COLORS["fail"], marker="x")
        if keep:
            ax.scatter(
                [o[0] for o in keep],
                [row] * len(keep),
                s=60,
                facecolors="none",
                edgecolors="black",
                linewidths=1.2,
            )
    ax.set_yticks(range(len(procs)), procs)
    ax.set_xlabel("seconds since the first op")
    ax.set_xlim(0, max(data.span, 1))
    ax.set_title(
        "operations per process (green ok, orange info, red fail, red x: never completed; "
        "circled: flagged by a checker)"
    )
    if data.faults:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="faults")
    return _png(fig)


def throughput_latency(data: RunData) -> str:
    """Throughput, latency and backlog as the workload's figures count them; no latency panel
    for a workload that times no op."""
    if data.figures.latency_fs:
        fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(12, 7.5), sharex=True)
    else:
        fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(12, 5.2), sharex=True)
        ax2 = None
    span = int(data.span) + 1
    committed = Counter()
    for t, n in data.committed:
        committed[int(t)] += n
    _shade(ax1, data)
    ax1.plot(range(span), [committed.get(s, 0) for s in range(span)], color="#1565c0", lw=1)
    ax1.set_ylabel(data.figures.throughput_label)
    for t, event, _proc, _gen in data.rebalances:
        ax1.axvline(t, color="#6a1b9a" if event == "assign" else "#9e9e9e", lw=0.5, alpha=0.6)
    if ax2 is not None:
        _latency(ax2, data)
    _shade(ax3, data)
    seeded = committed_total = 0
    backlog = []
    events = sorted([(t, n, 1) for t, n in data.seeded] + [(t, n, -1) for t, n in data.committed])
    for t, n, sign in events:
        if sign > 0:
            seeded += n
        else:
            committed_total += n
        backlog.append((t, seeded - committed_total))
    if backlog:
        ax3.plot([b[0] for b in backlog], [b[1] for b in backlog], color="#37474f", lw=1)
    ax3.set_ylabel(data.figures.backlog_label)
    ax3.set_xlim(0, max(data.span, 1))  # shared x: the same seconds as the timeline
    ax3.set_xlabel(
        f"seconds since the first op (vertical lines: {data.report.assignments_title.lower()})"
    )
    ax1.set_title(data.figures.title)
    return _png(fig)


def _latency(ax: plt.Axes, data: RunData) -> None:
    _shade(ax, data)
    for kind in ("ok", "info", "fail"):
        pts = [(t, lat) for t, lat, k in data.txn_latency if k == kind]
        if pts:
            ax.scatter(
                [p[0] for p in pts], [p[1] for p in pts], s=4, color=COLORS[kind], label=kind
            )
    ax.set_ylabel(data.figures.latency_label)
    if data.txn_latency:
        ax.set_yscale("log")
        ax.legend(loc="upper right", fontsize=8)


def series_figures(data: RunData) -> list[tuple[str, str]]:
    """The workload's own figures (``workloads.spec.Series``), each a step line per series
    with the fault bands: ``(title, png)`` for those with points."""
    out = []
    for spec in data.report.series:
        points = data.series.get(spec.title)
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(12, 2.6))
        _shade(ax, data)
        names = sorted({name for _, name, _ in points})
        for name in names:
            xs = [t for t, n, _ in points if n == name]
            ys = [y for _, n, y in points if n == name]
            ax.step([*xs, data.span], [*ys, ys[-1]], where="post", lw=1, label=name)
        ax.set_ylabel(spec.ylabel)
        ax.set_xlim(0, max(data.span, 1))
        ax.set_xlabel("seconds since the first op")
        ax.set_title(spec.title)
        if len(names) <= 12:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        out.append((spec.title, _png(fig)))
    return out
