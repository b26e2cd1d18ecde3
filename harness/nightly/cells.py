"""Run one matrix cell as a child ``python -m harness run`` and judge what it left behind.

Why a child process per cell: every cell gets a fresh interpreter, a fresh cluster and its own
store, so a crash of a native client (see README, "Known problems") or a hung run costs one
cell, not the whole matrix; and the cell is exactly what a user would re-run by hand.

The run's contract: exit 0 = valid, 1 = invalid, 2 = unusable; ``<cell store>/latest`` is the
run directory with ``summary.json``, ``results.json`` (the checkers' verdict) and
``report.html``. A run without ``results.json`` has no verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from harness.nightly.scenarios import Cell
from harness.storefiles import read_json_dict
from history.schema import is_nemesis

#: Anomaly types that speak about liveness, not safety: they never make a "new safety" failure.
LIVENESS_TYPES = frozenset({"progress", "unseen", "stuck", "drain-timeout"})

#: How long a cell may take beyond its time limit (install, cluster, drain, dump, checkers).
CELL_OVERHEAD_S = 900.0


def run_cell(cell: Cell, store: Path, seed: int | None) -> dict[str, Any]:
    """Run ``cell`` with its evidence under ``store`` and return its matrix record.

    The child records the run (``--no-verdict``); this process judges it and draws its
    report, in the Spark session the matrix keeps for all its cells, so the JVM's start and
    warm-up are paid once per matrix. The record's ``command`` is the run as a user re-runs
    it by hand, which judges itself.
    """
    store.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "harness", "run", *cell.run_args(seed), "--store", str(store)]
    log_path = store / "cell.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        log.write((" ".join(cmd) + "\n").encode())
        log.flush()
        # A session of its own: a Ctrl-C reaches the matrix only, which passes it on once.
        proc = subprocess.Popen(
            [*cmd, "--no-verdict"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        rc = _wait(proc, cell.time_limit + CELL_OVERHEAD_S)
        if rc == 0:
            rc = _judge_here(store, log)
    wall = time.monotonic() - t0
    return judge_cell(cell, store, rc, wall, command=cmd, log_path=log_path)


def _judge_here(store: Path, log: IO[bytes]) -> int:
    """Judge the run the child recorded (``results.json``), draw its report; the exit status
    the run would have had."""
    from harness.report import write_report
    from harness.run.verdict import EXIT_UNKNOWN, exit_status, explain, judge

    link = store / "latest"
    if not link.exists():
        return EXIT_UNKNOWN
    run_dir = link.resolve()
    t0 = time.monotonic()
    verdict = judge(run_dir)
    try:
        write_report(run_dir)
    except Exception as exc:  # a failure to draw must not hide the verdict
        log.write(f"error: writing the report failed: {exc}\n".encode())
    took = time.monotonic() - t0
    log.write(f"judged by the matrix in {took:.1f}s: {explain(verdict)}\n".encode())
    log.flush()
    return exit_status(verdict)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Wait for the run; past ``timeout`` ask it to tear down (SIGTERM heals and cleans up),
    then kill it. None means it timed out."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return None
    except KeyboardInterrupt:
        # Let the run heal its faults and tear its cluster down. SIGTERM, not SIGINT: a run
        # started from a non-interactive shell's background job inherits SIGINT ignored.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if ln.startswith("error:")]
    return (errors or lines or [""])[-1][:300]


def verdict_of(
    rc: int | None, results: dict[str, Any] | None, summary: dict[str, Any] | None
) -> tuple[str, str]:
    """(verdict, source): ``valid``, ``invalid``, ``unknown`` or ``error``, and what said so.

    The checkers' ``results.json`` wins; without it, exit status 1 (invalid) or any other
    status (error): a run that exits 0 without a verdict on disk has not been judged."""
    if rc is None:
        return "error", "timeout"
    if results is not None:
        valid = results.get("valid")
        if valid is True:
            return "valid", "results.json"
        if valid is False:
            return "invalid", "results.json"
        return ("error" if rc == 2 else "unknown"), "results.json"
    if rc == 1:
        return "invalid", "exit status"
    return "error", ("exit status" if rc != 0 else "no results.json")


def outcome_of(
    expected: str, verdict: str, finding: str | None = None, named: Iterable[str] = ()
) -> str:
    """``pass`` when the verdict is the expected one (a caught broken variant passes) and,
    for a scenario that reproduces a finding, names it (``named``: the ids of the verdict's
    ``known_findings``); ``error`` when there is no verdict at all, else ``fail``."""
    if verdict in ("error", "unknown"):
        return "error"
    if verdict != expected:
        return "fail"
    return "fail" if finding is not None and finding not in named else "pass"


def named_findings(results: dict[str, Any] | None) -> list[str]:
    """The ids of the known findings a run's ``results.json`` names."""
    found = (results or {}).get("known_findings") or []
    return [str(f.get("id")) for f in found if isinstance(f, dict)]


def recovery_seconds(history: Path) -> list[float]:
    """Per injected fault, seconds from its start until every input partition that commits
    again has committed again: how long the pipeline (rebalance, fencing, leader election)
    took to make progress everywhere. Empty for a run without faults."""
    starts: list[int] = []
    commits: dict[int, list[int]] = {}
    if not history.is_file():
        return []
    with open(history, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if '"nemesis' not in line and '"txn"' not in line:
                continue
            try:
                op = json.loads(line)
            except ValueError:
                continue
            if op.get("type") != "ok" or "time" not in op:
                continue
            if is_nemesis(op.get("process")) and op.get("f") == "start":
                starts.append(op["time"])
            elif op.get("f") == "txn" and isinstance(op.get("process"), int):
                value = op.get("value")
                # The eos processors' txn values; the queue workload's txn ops hold a list.
                offsets = value.get("offsets") if isinstance(value, dict) else None
                for partition, *_ in offsets or [[None]]:
                    commits.setdefault(partition, []).append(op["time"])
    out = []
    for start in starts:
        firsts = [min((t for t in ts if t >= start), default=None) for ts in commits.values()]
        after = [t for t in firsts if t is not None]
        if after:
            out.append(round((max(after) - start) / 1e9, 3))
    return out


def base_record(cell: Cell) -> dict[str, Any]:
    """A cell's record before it ran: what it is, and no verdict yet."""
    return {
        "id": cell.cell_id,
        "version": cell.version,
        "scenario": cell.scenario_id,
        "base_scenario": cell.scenario.name,
        "client": cell.scenario.client,
        "variant": cell.scenario.variant,
        "nemesis": cell.scenario.nemesis,
        "transaction_version": cell.tv_label,
        "time_limit": cell.time_limit,
        "expected": cell.scenario.expected,
        "finding": cell.scenario.finding,
        "known_findings": [],
        "verdict": "error",
        "verdict_source": "not run",
        "outcome": "error",
        "exit_code": None,
        "anomalies": {},
        "bad_anomaly_types": [],
        "safety_anomaly_types": [],
        "records_per_s": None,
        "txns_per_s": None,
        "recovery_s": None,
        "faults": 0,
        "drained": None,
        "wall_s": 0.0,
        "run_dir": None,
        "report": None,
        "log": None,
        "command": None,
        "message": "",
    }


def judge_cell(
    cell: Cell,
    store: Path,
    rc: int | None,
    wall: float,
    *,
    command: list[str] | None = None,
    log_path: Path | None = None,
) -> dict[str, Any]:
    """The cell's record in ``matrix.json`` from its exit status and its run directory."""
    link = store / "latest"
    run_dir = link.resolve() if link.exists() else None
    summary = read_json_dict(run_dir / "summary.json") if run_dir else None
    results = read_json_dict(run_dir / "results.json") if run_dir else None
    verdict, source = verdict_of(rc, results, summary)
    if results is not None:
        anomalies = {str(k): int(v) for k, v in (results.get("anomalies") or {}).items() if v}
        bad = [str(t) for t in results.get("bad_anomaly_types") or []]
    else:
        anomalies, bad = {}, []
    stats = (summary or {}).get("stats") or {}
    if not stats.get("txns_per_s"):
        # No processor transactions in the history (Kafka's Java copier records none): the
        # throughput is unknown, not zero, and must not drag the trends' medians down.
        stats = {}
    recovery = recovery_seconds(run_dir / "history.jsonl") if run_dir else []
    report = run_dir / "report.html" if run_dir else None
    named = named_findings(results)
    outcome = outcome_of(cell.scenario.expected, verdict, cell.scenario.finding, named)
    record = {
        **base_record(cell),
        "known_findings": named,
        "verdict": verdict,
        "verdict_source": source,
        "outcome": outcome,
        "exit_code": rc,
        "anomalies": anomalies,
        "bad_anomaly_types": bad,
        "safety_anomaly_types": sorted(t for t in bad if t not in LIVENESS_TYPES),
        "records_per_s": _num(stats.get("records_per_s")),
        "txns_per_s": _num(stats.get("txns_per_s")),
        "recovery_s": max(recovery) if recovery else None,
        "faults": len(recovery),
        "drained": (summary or {}).get("drained"),
        "wall_s": round(wall, 1),
        "run_dir": str(run_dir) if run_dir else None,
        "report": str(report) if report and report.exists() else None,
        "log": str(log_path) if log_path else None,
        "command": command,
    }
    record["message"] = cell_message(record, log_path)
    return record


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) else None


def cell_message(record: dict[str, Any], log_path: Path | None) -> str:
    """One line for a human: what was expected, what came out, which anomalies, where to look."""
    anomalies = ", ".join(f"{k}={v}" for k, v in sorted(record["anomalies"].items())) or "none"
    where = record["report"] or record["run_dir"] or (str(log_path) if log_path else "?")
    text = (
        f"expected {record['expected']}, got {record['verdict']} "
        f"({record['verdict_source']}); anomalies: {anomalies}; report: {where}"
    )
    finding = record.get("finding")
    verdict_given = record["verdict"] in ("valid", "invalid")
    if finding and verdict_given and finding not in (record.get("known_findings") or []):
        text = f"{finding} no longer reproduces on {record['version']}: {text}"
    if record["verdict"] == "error" and log_path is not None:
        text += f"; last log line: {_last_line(log_path)}"
    return text


def relpath(path: str | None, start: Path) -> str | None:
    """``path`` relative to ``start`` (for links in HTML that must survive moving the store)."""
    return os.path.relpath(path, start) if path else None
