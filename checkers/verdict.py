"""What every checker's result shares: how results combine into one verdict.

A verdict is ``valid: true``, ``false`` or ``"unknown"`` (the checks could not run); one
invalid result makes the whole invalid, an unknown one makes a valid whole unknown.
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
