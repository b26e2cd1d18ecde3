"""The offsets checker's examples and verdict, built the same way by both engines.

Each engine finds its lost commits its own way and hands each here as a :data:`Case` of plain
values, the cases in :data:`Case` order (its first four fields are unique to a case); the
example and the verdict are made only here, so the tests can demand that the two engines'
whole results are equal. An example's ``ops`` leave the engines as history indexes and are
replaced by the ops themselves once, after the verdict (:func:`with_ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from checkers.anomalies import OFFSETS, names
from checkers.verdict import checker_result

CHECKER: Final = "offsets"
ANOMALY_TYPES: Final = names(OFFSETS)
LOST_COMMIT: Final = OFFSETS[0]
NO_COMMITTERS: Final = (
    "no committer ops (a commit or read of an int process): not an offsets history, or its "
    "committers recorded nothing"
)

#: One lost commit: (group, topic, partition, the acknowledged offset, the offset read back
#: (None: no committed offset), the commit's invoke and ok indexes, the read's invoke and ok
#: indexes). The commit is the first acknowledgement of that offset to complete, the read the
#: first read to show it lost.
Case = tuple[str, str, int, int, "int | None", int, int, int, int]


def value_name(group: str, topic: str, partition: int, offset: int) -> str:
    """What a lost commit is called where the report follows values: the group's commit of
    ``offset`` on ``topic-partition``."""
    return f"{group}/{topic}-{partition}@{offset}"


def lost_commit(case: Case) -> dict[str, Any]:
    group, topic, partition, acked, read, *ops = case
    return LOST_COMMIT.make(
        values=[value_name(group, topic, partition, acked)],
        group=group,
        topic=topic,
        partition=partition,
        acknowledged_offset=acked,
        read_offset=read,
        ops=sorted(ops),
    )


def found(cases: list[Case], count: int) -> tuple[dict[str, int], dict[str, list[Any]]]:
    """An engine's counts and examples: ``count`` lost commits, ``cases`` the first of them."""
    if not count:
        return {}, {}
    name = LOST_COMMIT.name
    return {name: count}, {name: [lost_commit(c) for c in cases]}


def with_ops(
    result: dict[str, Any], ops_of: Callable[[set[int]], dict[int, dict[str, Any]]]
) -> dict[str, Any]:
    """``result`` with its examples' op indexes replaced by the ops, looked up in one pass
    for all of them, so a reader sees the evidence and the report marks it on the timeline."""
    examples = [ex for exs in result["examples"].values() for ex in exs]
    ops = ops_of({i for ex in examples for i in ex["ops"]})
    for ex in examples:
        ex["ops"] = [ops.get(i, {"index": i}) for i in ex["ops"]]
    return result


def result(
    counts: tuple[dict[str, int], dict[str, list[Any]]] | None,
    stats: dict[str, Any],
    notes: list[str],
    max_examples: int,
    error: str | None = None,
) -> dict[str, Any]:
    """The verdict: invalid iff a commit was lost (the one type is never allowed); with an
    ``error`` instead, ``valid: "unknown"`` and no counts: the run could not be judged."""
    got, examples = counts or ({}, {})
    out = checker_result(CHECKER, ANOMALY_TYPES, got, examples, stats, notes, max_examples)
    if error is not None:
        out["valid"], out["error"] = "unknown", error
    return out
