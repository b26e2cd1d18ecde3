"""The run verdict: merging the checkers' partial verdicts and turning them into exit codes."""

from __future__ import annotations

from checkers.judge import merge_verdicts
from harness.run.verdict import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, exit_status, explain


def _eos_part(**counts: int) -> dict:
    checks = {
        name: {"valid": counts.get(name, 0) == 0, "count": counts.get(name, 0), "examples": []}
        for name in ("lost", "duplicate", "zombie-write", "order")
    }
    anomalies = {k: v for k, v in counts.items() if v}
    return {
        "valid": not anomalies,
        "anomalies": anomalies,
        "checkers": checks,
        "liveness": {"valid": True, "drain": "ok", "unconsumed": 0},
    }


def _evidence_part(bad: dict[str, int], allowed: dict[str, int] | None = None) -> dict:
    allowed = allowed or {}
    return {
        "valid": not bad,
        "checkers": {
            "epoch_violation": {
                "valid": not bad,
                "anomalies": {**bad, **allowed},
                "bad_anomaly_types": sorted(bad),
            }
        },
    }


def test_clean_parts_are_valid() -> None:
    merged = merge_verdicts({"log_evidence": _evidence_part({}), "eos": _eos_part()})
    assert merged["valid"] is True
    assert merged["bad_anomaly_types"] == []
    assert merged["liveness"]["eos"]["valid"] is True
    assert exit_status(merged) == EXIT_VALID


def test_an_eos_anomaly_makes_the_run_invalid() -> None:
    merged = merge_verdicts({"log_evidence": _evidence_part({}), "eos": _eos_part(duplicate=3)})
    assert merged["valid"] is False
    assert merged["bad_anomaly_types"] == ["duplicate"]
    assert merged["anomalies"] == {"duplicate": 3}
    assert exit_status(merged) == EXIT_INVALID
    assert explain(merged) == "invalid: duplicate x3"


def test_an_evidence_anomaly_makes_the_run_invalid_but_allowed_ones_do_not() -> None:
    bad = merge_verdicts({"log_evidence": _evidence_part({"data-epoch-regression": 1})})
    assert bad["valid"] is False and bad["bad_anomaly_types"] == ["data-epoch-regression"]
    ok = merge_verdicts({"log_evidence": _evidence_part({}, {"some-allowed": 2})})
    assert ok["valid"] is True and ok["anomalies"] == {"some-allowed": 2}


def test_an_invalid_part_without_named_types_is_still_invalid() -> None:
    merged = merge_verdicts({"mystery": {"valid": False, "checkers": {}}})
    assert merged["valid"] is False and merged["bad_anomaly_types"] == ["mystery"]


def test_a_check_that_could_not_run_is_unknown_not_valid() -> None:
    part = _eos_part()
    part["checkers"]["order"] = {"valid": "unknown", "error": "Spark died"}
    merged = merge_verdicts({"eos": part})
    assert merged["valid"] == "unknown"
    assert exit_status(merged) == EXIT_UNKNOWN
    assert "Spark died" in explain(merged)


def test_summary_table_names_the_invalid_checkers() -> None:
    import io

    from rich.console import Console

    from harness.run.summary import summary_table

    merged = merge_verdicts({"eos": _eos_part(duplicate=3)})
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(summary_table(merged))
    text = out.getvalue()
    assert "duplicate x3" in text and "INVALID" in text
    assert "progress (eos, liveness)" in text
