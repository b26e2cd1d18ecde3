"""What every checker's result shares: how results combine into one verdict, and how the
anomalies one reports are read back from it whatever its shape (:func:`found`).

A verdict is ``valid: true``, ``false`` or ``"unknown"`` (the checks could not run); one
invalid result makes the whole invalid, an unknown one makes a valid whole unknown.
``found`` and ``counts_of`` are read through :mod:`checkers.anomalies`, beside the types'
descriptions, by the report and the run's summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def combine(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Merge checker results into one verdict: invalid if any is, unknown if any errored."""
    anomalies: dict[str, int] = {}
    bad: list[str] = []
    unknown = False
    for r in results.values():
        if r.get("valid") == "unknown":
            unknown = True
        anomalies.update(r.get("anomalies", {}))
        bad += r.get("bad_anomaly_types", [])
    valid: bool | str = False if bad else ("unknown" if unknown else True)
    return {
        "valid": valid,
        "anomalies": dict(sorted(anomalies.items())),
        "bad_anomaly_types": sorted(set(bad)),
        "checkers": results,
    }


def unknown_result(error: str) -> dict[str, Any]:
    """The verdict when the checks could not run: never ``valid: true``."""
    return {"valid": "unknown", "error": error, "anomalies": {}, "checkers": {}}


def checker_result(
    checker: str,
    types: Sequence[str],
    counts: dict[str, int],
    examples: dict[str, list[dict[str, Any]]],
    stats: dict[str, Any],
    notes: list[str],
    max_examples: int,
) -> dict[str, Any]:
    """One checker's result when every type it reports is a bug (none is allowed): invalid
    iff any of ``types`` has a count; its examples bounded by ``max_examples``."""
    found = [t for t in types if counts.get(t, 0) > 0]
    out: dict[str, Any] = {
        "checker": checker,
        "valid": not found,
        "anomalies": {t: int(counts[t]) for t in found},
        "anomaly_types": found,
        "bad_anomaly_types": sorted(found),
        "allowed_anomaly_types": [],
        "examples": {t: examples.get(t, [])[:max_examples] for t in found},
        "options": {"max_examples": max_examples},
        "stats": stats,
    }
    if notes:
        out["notes"] = list(notes)
    return out


def found(result: dict[str, Any]) -> list[tuple[str, str, int]]:
    """``(checker, type, count)`` for every type a result reports with a count above zero,
    from any result: one checker's (``checker`` and ``anomalies``), a family's or the run's
    (``checkers``: each an ``anomalies`` map or, for an eos check, its own ``count``)."""
    checkers = result.get("checkers")
    if not isinstance(checkers, dict):
        checkers = {str(result.get("checker", "")): result}
    out = []
    for checker, r in checkers.items():
        if not isinstance(r, dict):
            continue
        counts = r.get("anomalies")
        if not isinstance(counts, dict):
            counts = {checker: r.get("count")} if r.get("valid") is False else {}
        out += [(checker, t, n) for t, n in counts.items() if isinstance(n, int) and n > 0]
    return sorted(out)


def counts_of(checker: str, result: dict[str, Any]) -> dict[str, int]:
    """Type -> count (above zero) of one checker's result, read as :func:`found` reads it,
    so the report's table, its headings, the summary table and the runs index agree."""
    return {t: n for _, t, n in found({"checkers": {checker: result}})}
