"""The streams checker's examples and verdict, built the same way by both engines.

Each engine finds its cases its own way and hands them here as plain tuples, in the order
each builder below names; the examples and the verdict are made only here, so the tests can
demand that the two engines' whole results are equal.
"""

from __future__ import annotations

from typing import Any, Final

from checkers.anomalies import STREAMS, names
from checkers.verdict import checker_result

CHECKER: Final = "streams"
ANOMALY_TYPES: Final = names(STREAMS)
_TYPES: Final = {t.name: t for t in STREAMS}
NOT_DRAINED_NOTE: Final = (
    "the application did not drain: wrong-final-aggregate and changelog-mismatch not checked"
)

Record = dict[str, Any]


def record(topic: str, partition: int, offset: int, key: Any, value: Any) -> Record:
    return {"topic": topic, "partition": partition, "offset": offset, "key": key, "value": value}


def pair(v: tuple[int, int] | None) -> list[int] | None:
    return None if v is None else [int(v[0]), int(v[1])]


def lost(value: str, partition: int, offset: int, topic: str, committed: int) -> dict[str, Any]:
    """Ordered by (partition, offset, topic)."""
    return _TYPES["lost"].make(
        value=value, partition=partition, offset=offset, topic=topic, committed=committed
    )


def duplicate(
    value: str, partition: int, offset: int, topic: str, records: list[Record]
) -> dict[str, Any]:
    """Ordered by (topic, partition, offset); records by (partition, offset)."""
    return _TYPES["duplicate"].make(
        value=value,
        partition=partition,
        offset=offset,
        topic=topic,
        copies=len(records),
        records=sorted(records, key=lambda r: (r["partition"], r["offset"])),
    )


def aborted_read(value: str | None, topic: str, rec: Record) -> dict[str, Any]:
    """Ordered by (topic, partition, offset) of the record."""
    return _TYPES["aborted-read"].make(value=value, topic=topic, records=[rec])


def aggregate_kind(got: tuple[int, int] | None, want: tuple[int, int]) -> str:
    if got is not None and got[0] > want[0]:
        return "counted-twice"
    if got is not None and got[0] < want[0]:
        return "skipped"
    return "wrong-sum"


def wrong_aggregate(
    value: str,
    key: str,
    partition: int,
    offset: int,
    got: tuple[int, int] | None,
    want: tuple[int, int],
    rec: Record,
) -> dict[str, Any]:
    """Ordered by (source partition, source offset, record partition, record offset)."""
    return _TYPES["wrong-aggregate"].make(
        value=value,
        kind=aggregate_kind(got, want),
        key=key,
        partition=partition,
        offset=offset,
        got=pair(got),
        want=pair(want),
        records=[rec],
    )


def wrong_last(
    name: str, key: str, got: tuple[int, int] | None, want: tuple[int, int], rec: Record | None
) -> dict[str, Any]:
    """``wrong-final-aggregate`` or ``changelog-mismatch``; ordered by key."""
    return _TYPES[name].make(
        value=key, got=pair(got), want=pair(want), records=[] if rec is None else [rec]
    )


def progress(reasons: list[str]) -> dict[str, Any]:
    return _TYPES["progress"].make(reason="; ".join(reasons))


def result(
    counts: dict[str, int],
    examples: dict[str, list[dict[str, Any]]],
    stats: dict[str, Any],
    notes: list[str],
    max_examples: int,
) -> dict[str, Any]:
    """The verdict: invalid iff any type has a count."""
    return checker_result(CHECKER, ANOMALY_TYPES, counts, examples, stats, notes, max_examples)
