"""What every checker's result shares: how results combine into one verdict.

A verdict is ``valid: true``, ``false`` or ``"unknown"`` (the checks could not run); one
invalid result makes the whole invalid, an unknown one makes a valid whole unknown.
"""

from __future__ import annotations

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
