"""The end-of-run summary: per checker, valid or not and what it found; then where to look.

Also where the run's time went: ``summary.json``'s ``phases``, the seconds of each phase,
derived from ``timeline.json`` (:func:`phase_seconds`), so any stored run says where its time
went without being run again (``bench/phases.py`` reads them over many runs).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from checkers.anomalies import counts_of
from checkers.findings import finding_lines
from harness.run.verdict import explain


def _mark(valid: Any) -> str:
    return {True: "[green]valid[/]", False: "[bold red]INVALID[/]"}.get(valid, "[yellow]?[/]")


def summary_table(verdict: dict[str, Any]) -> Table:
    """One row per checker (per check family of a checker that has several), then liveness."""
    table = Table(title="verdict", title_justify="left")
    table.add_column("checker")
    table.add_column("verdict")
    table.add_column("anomalies")
    checkers = verdict.get("checkers") or {}
    if not checkers:  # results.json of one checker, stored before the checker suites
        checkers = {str(verdict.get("checker", "checker")): verdict}
    for name, res in checkers.items():
        counts = counts_of(name, res)
        listed = ", ".join(f"{t} x{n}" for t, n in sorted(counts.items())) or "-"
        if res.get("valid") == "unknown":
            listed = str(res.get("error", "could not run"))
        table.add_row(name, _mark(res.get("valid")), listed)
    for part, res in (verdict.get("liveness") or {}).items():
        if isinstance(res, dict) and "valid" in res:
            note = "-"
            if res["valid"] is False:
                note = f"drain {res.get('drain')}; {res.get('unconsumed', '?')} seeded not consumed"
            table.add_row(f"progress ({part}, liveness)", _mark(res["valid"]), note)
    return table


def print_summary(
    verdict: dict[str, Any],
    run_dir: Path,
    report: Path | None,
    *,
    lines: list[str] | None = None,
    seconds: float = 0.0,
    console: Console | None = None,
) -> None:
    console = console or Console(highlight=False)
    console.print(summary_table(verdict))
    for line in lines or []:  # the driver's plain counts: beside the verdict, never one
        console.print(line)
    console.print(f"verdict: {explain(verdict)}")
    for line in finding_lines(verdict):  # a documented bug, now explained
        console.print(line)
    console.print(f"report: {report or '(not written: see the log)'}")
    console.print(f"run: {run_dir} ({seconds:.0f} s)")


# --- where the run's time went -----------------------------------------------------------

#: The phase each moment of ``timeline.json`` begins (its phases and the :class:`Drive`'s
#: marks), in run order. A phase lasts until the next moment; the last moment ("judged", or
#: "recorded" when the run is not judged) begins none. Names are stable: summary.json's
#: ``phases`` is read by scripts (docs/reading-reports.md documents them).
PHASE_OF: dict[str, str] = {
    "starting the cluster": "cluster_start",
    "running": "setup",
    "load": "load",
    "healing": "heal",
    "healed": "final_reads",
    "stopping the cluster, dumping its logs": "stop_and_dump",
    "checking": "checks",
}
#: What the running phase is called when the driver marked none inside it (a run of an older
#: version, or a driver with no faulty phase): its phases are not told apart.
UNSPLIT = "workload"
#: The process files that may hold the driver's drain (a ``drain`` op of process ``final`` or
#: ``supervisor``, whichever the workload's driver records it under): small files, read whole.
_DRAIN_FILES = ("final.jsonl", "supervisor.jsonl")


def phase_seconds(
    moments: Iterable[tuple[str, float]],
    drained: float | None = None,
    checks: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Seconds per phase, in run order, from the timeline's ``(name, wall)`` moments.

    ``drained`` (the wall time the driver's drain ended) splits the last phase after the heal
    into ``drain`` and ``final_reads``; ``checks`` (seconds per checker suite, side by side)
    become ``check:<suite>``, by name (they end in any order). A phase the run did not have or
    did not finish is absent, never zero: a figure of 0 would be averaged into a benchmark as
    if it were measured.
    """
    ordered = sorted(moments, key=lambda m: m[1])
    names = {name for name, _ in ordered}
    out: dict[str, float] = {}
    for (name, begin), (_, end) in itertools.pairwise(ordered):
        phase = PHASE_OF.get(name)
        if phase is None:
            continue
        if phase == "setup" and "load" not in names:
            phase = UNSPLIT
        if phase == "final_reads" and drained is not None and begin <= drained <= end:
            out["drain"] = drained - begin
            begin = drained
        out[phase] = end - begin
    out.update({f"check:{suite}": s for suite, s in sorted((checks or {}).items())})
    return {name: round(s, 3) for name, s in out.items()}


def read_phases(run_dir: Path) -> dict[str, float]:
    """:func:`phase_seconds` of a stored run (empty without ``timeline.json``)."""
    try:
        timeline = json.loads((run_dir / "timeline.json").read_text())
    except (OSError, ValueError):
        return {}
    moments = [(p["phase"], _wall(p["wall"])) for p in timeline.get("phases", [])]
    moments += [(m["mark"], _wall(m["wall"])) for m in timeline.get("marks", [])]
    return phase_seconds(moments, _drain_end(run_dir / "processes"), timeline.get("checks"))


def _drain_end(processes: Path) -> float | None:
    """When the driver's drain completed (ok, or timed out), if it has one."""
    for name in _DRAIN_FILES:
        with contextlib.suppress(OSError):
            for line in (processes / name).read_text().splitlines():
                with contextlib.suppress(ValueError):
                    op = json.loads(line)
                    if op.get("f") == "drain" and op.get("type") not in (None, "invoke"):
                        return _wall(op["wall"])
    return None


def _wall(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def record_phases(run_dir: Path) -> None:
    """Write the run's phases into its ``summary.json`` (kept: a report's seconds)."""
    _update_summary(run_dir, lambda phases: {**read_phases(run_dir), **_kept(phases)})


def record_report(run_dir: Path, seconds: float) -> None:
    """Add the seconds drawing ``report.html`` took (it is drawn after the verdict, by the
    command that made the run) to the run's ``phases``."""
    _update_summary(run_dir, lambda phases: {**phases, "report": round(seconds, 3)})


def _kept(phases: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in phases.items() if k == "report"}


def _update_summary(run_dir: Path, change: Callable[[dict[str, float]], dict[str, float]]) -> None:
    """Replace ``summary.json``'s ``phases`` by ``change(phases)``, atomically (the runs'
    index may be reading it); nothing if the run wrote no summary (it failed before)."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    summary["phases"] = change(summary.get("phases") or {})
    tmp = run_dir / f".summary.json.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
        tmp.replace(path)
