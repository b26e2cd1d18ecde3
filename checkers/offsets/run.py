"""The offsets checker on a run directory: read the facts, judge them on Spark.

Public API::

    check_offsets(run_dir, spark=None, max_examples=8, engine="spark", options=None) -> dict
        {"checker": "offsets", "valid": bool | "unknown", "anomalies": {type: count},
         "examples": {type: [...]}, "stats", "notes"}

``engine="python"`` judges with the reference instead (the tests hold the two to the whole
same result); ``options`` are the run's workload options (``config.json``), else the history
header's. A malformed history raises :class:`history.logdump.CheckerInputError` (one line);
a history with no committer op, or a Spark failure, gives ``valid: "unknown"`` with ``error``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.engines import check_engine, check_max_examples, history_of, judge_with
from checkers.offsets import pyref
from checkers.offsets import results as R
from checkers.offsets import spark as spark_engine
from checkers.offsets.facts import Key, OffsetsFacts, ops_of, read_facts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["check_offsets", "judge_facts"]

#: How many of the groups never read back the note names.
NAMED_UNREAD = 10


def unread_groups(facts: OffsetsFacts) -> list[str]:
    """The groups with a partition whose last acknowledged commit no ``ok`` read was invoked
    after: had that commit been lost, nothing in the history could show it (the committer
    died, or its final read failed)."""
    last: dict[Key, int] = {}
    for group, topic, partition, _offset, _invoke, done in facts.acknowledged():
        last[(group, topic, partition)] = max(done, last.get((group, topic, partition), -1))
    latest: dict[Key, int] = {}
    for group, topic, partition, _offset, invoke, _done in facts.reads:
        latest[(group, topic, partition)] = max(invoke, latest.get((group, topic, partition), -1))
    return sorted({key[0] for key, done in last.items() if latest.get(key, -1) < done})


def figures(facts: OffsetsFacts, unread: list[str]) -> dict[str, Any]:
    """What the committers did, counted, not judged."""
    outcomes = Counter(c[6] for c in facts.commits)
    return {
        "commits_acknowledged": outcomes.get("ok", 0),
        "commits_unknown": outcomes.get("info", 0),
        "commits_refused": outcomes.get("fail", 0),
        "reads_ok": len(facts.reads),
        "groups": len(facts.groups),
        "unread": len(unread),
        "variant": facts.options.get("variant"),
    }


def _unread_note(unread: list[str]) -> str:
    named = ", ".join(unread[:NAMED_UNREAD]) + (", ..." if len(unread) > NAMED_UNREAD else "")
    whose = "group's" if len(unread) == 1 else "groups'"
    return (
        f"{len(unread)} {whose} last acknowledged commit was never read back, so its loss "
        f"could not show: {named}"
    )


def judge_facts(
    facts: OffsetsFacts,
    *,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
) -> dict[str, Any]:
    """The verdict on ``facts`` by one engine (Spark in a session of its own when none is
    given). The figures and notes are the facts', whichever engine judges; a Spark failure
    leaves the verdict unknown, a failure of the reference is raised
    (:mod:`checkers.engines`)."""
    check_max_examples(max_examples)
    check_engine(engine)
    unread = unread_groups(facts)
    stats = figures(facts, unread)
    notes = list(facts.notes) + ([_unread_note(unread)] if unread else [])
    if not facts.groups:
        return R.result(None, stats, notes, max_examples, R.NO_COMMITTERS)
    counts, error = judge_with(engine, facts, max_examples, pyref.judge, spark_engine.judge, spark)
    if error is not None:
        return R.result(None, stats, notes, max_examples, error)
    out = R.result(counts, stats, notes, max_examples)
    return R.with_ops(out, lambda wanted: ops_of(facts.path, wanted))


def check_offsets(
    run_dir: str | Path,
    spark: SparkSession | None = None,
    max_examples: int = 8,
    engine: str = "spark",
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The offsets checker on a stored run (its ``history.jsonl``)."""
    facts = read_facts(history_of(run_dir), options)
    return judge_facts(facts, spark=spark, max_examples=max_examples, engine=engine)
