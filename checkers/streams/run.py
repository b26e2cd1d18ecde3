"""The streams checker on a run directory: read the facts, judge them on Spark.

Public API::

    check_streams(run_dir, spark=None, max_examples=8, engine="spark") -> dict
        {"checker": "streams", "valid": bool | "unknown", "anomalies": {type: count},
         "examples": {type: [...]}, "stats", "notes"}

``engine="python"`` judges with the reference instead (the tests compare the two). A
malformed history raises :class:`history.logdump.CheckerInputError` (one line); a Spark
failure gives ``valid: "unknown"`` with ``error``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.engines import check_max_examples, history_of, judge_with
from checkers.streams import pyref
from checkers.streams import results as R
from checkers.streams import spark as spark_engine
from checkers.streams.facts import StreamsFacts, read_facts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["check_streams", "judge_facts"]


def _stats(facts: StreamsFacts) -> dict[str, Any]:
    return {
        "inputs": len(facts.inputs),
        "outputs": len(facts.outputs),
        "aggregate_updates": len(facts.aggregates),
        "changelog_records": len(facts.changelog),
        "drained": facts.drained,
        "guarantee": facts.options.get("guarantee"),
    }


def _unknown(
    stats: dict[str, Any], notes: list[str], max_examples: int, error: str
) -> dict[str, Any]:
    out = R.result({}, {}, stats, notes, max_examples)
    out["valid"] = "unknown"
    out["error"] = error
    return out


def judge_facts(
    facts: StreamsFacts,
    *,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
) -> dict[str, Any]:
    """The verdict on ``facts`` by one engine (a session of its own when none is given)."""
    check_max_examples(max_examples)
    notes = list(facts.notes) + ([] if facts.drained else [R.NOT_DRAINED_NOTE])
    stats = _stats(facts)
    if facts.unread:
        unread = f"incomplete final reads: {', '.join(facts.unread)}"
        return _unknown(stats, notes, max_examples, unread)
    found, error = judge_with(engine, facts, max_examples, pyref.judge, spark_engine.judge, spark)
    if error is not None:
        return _unknown(stats, notes, max_examples, error)
    counts, examples = found
    return R.result(counts, examples, stats, notes, max_examples)


def check_streams(
    run_dir: str | Path,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
) -> dict[str, Any]:
    """The streams checker on a stored run."""
    facts = read_facts(history_of(run_dir))
    return judge_facts(facts, spark=spark, max_examples=max_examples, engine=engine)
