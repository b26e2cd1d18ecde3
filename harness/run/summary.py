"""The end-of-run summary: per checker, valid or not and what it found; then where to look."""

from __future__ import annotations

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
    for line in finding_lines(verdict):  # a documented bug: still invalid, now explained
        console.print(line)
    console.print(f"report: {report or '(not written: see the log)'}")
    console.print(f"run: {run_dir} ({seconds:.0f} s)")
