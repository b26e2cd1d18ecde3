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

from checkers.spark import spark_error, spark_session
from checkers.streams import pyref
from checkers.streams import results as R
from checkers.streams import spark as spark_engine
from checkers.streams.facts import StreamsFacts, read_facts
from history.logdump import CheckerInputError

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


def judge_facts(
    facts: StreamsFacts,
    *,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
) -> dict[str, Any]:
    """The verdict on ``facts`` by one engine (a session of its own when none is given)."""
    if type(max_examples) is not int or max_examples < 0:
        raise ValueError("max_examples must be a non-negative integer")
    notes = list(facts.notes) + ([] if facts.drained else [R.NOT_DRAINED_NOTE])
    stats = _stats(facts)
    if facts.unread:
        out = R.result({}, {}, stats, notes, max_examples)
        out["valid"] = "unknown"
        out["error"] = f"incomplete final reads: {', '.join(facts.unread)}"
        return out
    if engine == "python":
        counts, examples = pyref.judge(facts, max_examples)
        return R.result(counts, examples, stats, notes, max_examples)
    try:
        if spark is not None:
            counts, examples = spark_engine.judge(spark, facts, max_examples)
        else:
            with spark_session() as s:
                counts, examples = spark_engine.judge(s, facts, max_examples)
    except Exception as e:
        out = R.result({}, {}, stats, notes, max_examples)
        out["valid"] = "unknown"
        out["error"] = str(spark_error(e))
        return out
    return R.result(counts, examples, stats, notes, max_examples)


def check_streams(
    run_dir: str | Path,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
) -> dict[str, Any]:
    """The streams checker on a stored run."""
    source = Path(run_dir) / "history.jsonl"
    if not source.is_file():
        raise CheckerInputError(f"{source}: no such history")
    facts = read_facts(source)
    return judge_facts(facts, spark=spark, max_examples=max_examples, engine=engine)
