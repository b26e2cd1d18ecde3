"""The share checker on a run directory: read the facts, judge them on Spark.

Public API::

    check_share(run_dir, spark=None, max_examples=8, engine="spark", options=None) -> dict
        {"checker": "share", "valid": bool | "unknown", "anomalies": {type: count},
         "examples": {type: [...]}, "stats", "notes"}

``engine="python"`` judges with the reference instead (the tests compare the two);
``options`` are the run's workload options (``config.json``), else the history header's. A
malformed history raises :class:`history.logdump.CheckerInputError` (one line); a Spark
failure gives ``valid: "unknown"`` with ``error``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.engines import check_max_examples, history_of, judge_with
from checkers.share import pyref
from checkers.share import results as R
from checkers.share import spark as spark_engine
from checkers.share.facts import ShareFacts, ops_at, read_facts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["check_share", "judge_facts"]


def figures(facts: ShareFacts) -> dict[str, Any]:
    """What the run did, counted, not judged: redeliveries and processing duplicates are
    what at-least-once delivery allows, so they are figures here and anomalies nowhere."""
    top: dict[tuple[int, int], int] = {}
    for d in facts.deliveries:
        top[(d[0], d[1])] = max(top.get((d[0], d[1]), 0), d[3])
    copies = Counter(out[3] for out in facts.outputs if out[3] is not None)
    taken = Counter(a[3] for a in facts.acks if pyref.taken(a))
    errors = Counter(a[8] for a in facts.acks if a[7] == "ok" and a[8] is not None)
    return {
        "inputs": len(facts.inputs),
        "deliveries": len(facts.deliveries),
        "records_delivered": len(top),
        # Per record, how often the broker handed it out again (its highest count - 1):
        # acquisitions a member never saw (a poll that raised) count too.
        "redeliveries": sum(c - 1 for c in top.values() if c > 1),
        "outputs": len(facts.outputs),
        "processing_duplicates": sum(1 for n in copies.values() if n > 1),
        "accepted": taken.get("accept", 0),
        "released": taken.get("release", 0),
        "rejected": taken.get("reject", 0),
        "archived": len(pyref.archived(facts)),
        "ack_errors": dict(sorted(errors.items())),
        "ack_unknown": sum(1 for a in facts.acks if a[7] != "ok"),
        "drained": facts.drained,
        "delivery_limit": facts.limit,
        "isolation": facts.isolation,
        "variant": facts.options.get("variant"),
    }


def _notes(facts: ShareFacts) -> list[str]:
    notes = list(facts.notes)
    if not facts.drained:
        notes.append(R.NOT_DRAINED_NOTE)
    if facts.isolation != "read_committed":
        notes.append(R.READ_UNCOMMITTED_NOTE)
    return notes


def judge_facts(
    facts: ShareFacts,
    *,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
) -> dict[str, Any]:
    """The verdict on ``facts`` by one engine (a session of its own when none is given).

    A final read that did not reach its end leaves nothing to judge; a Spark failure leaves
    the verdict unknown rather than valid. A failure of the reference is raised: a bug there
    is not Spark's failure, and the judgement then asks Spark (:mod:`checkers.judge`). Both
    engines' examples get their ops from the history the same way, after the verdict.
    """
    check_max_examples(max_examples)
    stats, notes = figures(facts), _notes(facts)
    if facts.unread:
        error = f"incomplete final reads: {', '.join(facts.unread)}"
        return R.result(None, stats, notes, max_examples, error)
    found, error = judge_with(engine, facts, max_examples, pyref.judge, spark_engine.judge, spark)
    if error is not None:
        return R.result(None, stats, notes, max_examples, error)
    out = R.result(found, stats, notes, max_examples)
    return R.with_ops(out, lambda wanted: ops_at(facts.path, wanted))


def check_share(
    run_dir: str | Path,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The share checker on a stored run."""
    facts = read_facts(history_of(run_dir), options)
    return judge_facts(facts, spark=spark, max_examples=max_examples, engine=engine)
