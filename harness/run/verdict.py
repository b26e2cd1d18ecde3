"""A run's verdict: the checkers' judgement of its stored evidence, as an exit status.

The harness never judges a run itself; it asks the checkers (``checkers.judge``, the same code
as ``python -m checkers RUN_DIR``) once the cluster is gone and its log dumps are on disk, so
a re-check of the stored run gives the same answer. A checker that cannot
judge (Spark failed, input unusable, a bug) yields ``valid: "unknown"``, never "valid".
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from checkers.judge import Judgement

log = logging.getLogger("harness.run.verdict")

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2


def judge(run_dir: Path, *, judgement: Judgement | None = None) -> dict[str, Any]:
    """The checkers' verdict on ``run_dir`` (also written to ``run_dir/results.json``),
    completing ``judgement`` if the run started one early (see :mod:`checkers.judge`)."""
    from checkers.judge import Judgement, RunDirUnusable

    try:
        return (judgement or Judgement(run_dir)).result()
    except RunDirUnusable as e:
        return {"valid": "unknown", "anomalies": {}, "errors": {"input": str(e)}, "checkers": {}}
    except Exception as e:  # a checker bug must not look like a verdict
        log.exception("checking %s failed", run_dir)
        return {
            "valid": "unknown",
            "anomalies": {},
            "errors": {"checker": f"{type(e).__name__}: {e}"},
            "checkers": {},
        }


def exit_status(result: dict[str, Any]) -> int:
    valid = result.get("valid")
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def bad_types(result: dict[str, Any]) -> list[str]:
    """The anomaly types that made the verdict invalid (allowed ones excluded)."""
    bad = result.get("bad_anomaly_types")
    if bad is None:
        bad = [t for t, n in result.get("anomalies", {}).items() if n]
    return sorted(bad)


def explain(result: dict[str, Any]) -> str:
    """One line for a test failure or a log: the verdict and the anomaly types."""
    valid = result.get("valid")
    if valid is True:
        return "valid"
    if valid is False:
        counts = result.get("anomalies", {})
        return "invalid: " + ", ".join(f"{t} x{counts.get(t, '?')}" for t in bad_types(result))
    errors = result.get("errors") or {"?": result.get("error", "unknown verdict")}
    return "unknown: " + "; ".join(f"{k}: {v}" for k, v in errors.items())
