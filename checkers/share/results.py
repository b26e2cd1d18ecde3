"""The share checker's examples and verdict, built the same way by both engines.

Each engine finds its cases its own way and hands them here as plain values, in the order each
builder below names (the engines sort by it before they cut the list at ``max_examples``); the
examples and the verdict are made only here, so the tests can demand that the two engines'
whole results are equal. An example's ``ops`` leave the engines as history indexes and are
replaced by the ops themselves once (:func:`with_ops`), after the verdict, from the history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from checkers.anomalies import SHARE, names
from checkers.verdict import checker_result

CHECKER: Final = "share"
ANOMALY_TYPES: Final = names(SHARE)
_TYPES: Final = {t.name: t for t in SHARE}
NOT_DRAINED_NOTE: Final = (
    "the share group did not drain: a committed input at or above its partition's start "
    "offset that was neither processed nor archived is undelivered, not lost"
)
READ_UNCOMMITTED_NOTE: Final = (
    "isolation read_uncommitted: delivering an aborted value is allowed, aborted-read not checked"
)
#: A delivery as the engines hand it: (poll ok index, member, partition, offset, count).
Seen = tuple[int, int, int, int, int]


def outcome(status: str | None, error: str | None) -> str | None:
    """What became of an acknowledgement: ``ok`` (the broker took it), its error code (the
    broker refused it), ``unknown`` (the commit raised or never returned), None (none)."""
    if status is None:
        return None
    if status != "ok":
        return "unknown"
    return "ok" if error is None else error


def delivery(member: int, partition: int, offset: int, count: int) -> dict[str, Any]:
    return {"member": member, "partition": partition, "offset": offset, "count": count}


def _ops(indexes: Iterable[int | None]) -> list[int]:
    return sorted({int(i) for i in indexes if i is not None})


def _seen(rows: Iterable[Seen]) -> list[dict[str, Any]]:
    return [delivery(m, p, o, c) for _po, m, p, o, c in sorted(rows)]


def lost(
    value: str,
    partition: int,
    offset: int,
    start: int | None,
    drained: bool,
    seen: list[tuple[Seen, str | None, str | None, int | None]],
    send_op: int,
) -> dict[str, Any]:
    """Ordered by (partition, offset). ``seen``: each delivery of the record with the kind,
    outcome and op index of the first acknowledgement that answered it (None: none did)."""
    seen = sorted(seen, key=lambda s: s[0])
    rows = [delivery(*d[1:]) | {"ack": kind, "outcome": how} for d, kind, how, _ in seen]
    return _TYPES["lost"].make(
        value=value,
        partition=partition,
        offset=offset,
        start=start,
        drained=drained,
        deliveries=rows,
        ops=_ops([send_op, *(d[0] for d, *_ in seen), *(s[3] for s in seen)]),
    )


def redelivered(
    value: str,
    partition: int,
    offset: int,
    ack: tuple[int, int | None, str, int, int | None],
    again: Seen,
) -> dict[str, Any]:
    """Ordered by the delivery's (partition, offset, poll ok index, member, count). ``ack``:
    (member, count of the delivery it answered or None, kind, its op index, poll ok index of
    that delivery): of the taken accepts and rejects that completed before the poll was
    invoked, the first to complete."""
    member, count, kind, ack_op, answered = ack
    return _TYPES["redelivered-after-ack"].make(
        value=value,
        partition=partition,
        offset=offset,
        ack={"member": member, "count": count, "kind": kind},
        delivery=delivery(*again[1:]),
        ops=_ops([ack_op, answered, again[0]]),
    )


#: An acknowledgement the broker took: (member, count of the delivery it answered or None,
#: kind, its op index, poll ok index of that delivery or None).
Taken = tuple[int, "int | None", str, int, "int | None"]


def twice(value: str, partition: int, offset: int, first: Taken, second: Taken) -> dict[str, Any]:
    """Ordered by (partition, offset), then the second's (completion index, member, kind).
    ``first``: the record's first taken accept or reject (by completion, member, kind);
    ``second``: a later one answering another delivery."""
    return _TYPES["acknowledged-twice"].make(
        value=value,
        partition=partition,
        offset=offset,
        first={"member": first[0], "count": first[1], "kind": first[2]},
        second={"member": second[0], "count": second[1], "kind": second[2]},
        ops=_ops([first[3], first[4], second[3], second[4]]),
    )


def concurrent(value: str, held: Seen, ack: tuple[str, int], other: Seen) -> dict[str, Any]:
    """Ordered by (partition, offset), then the holder's and the other's (poll ok index,
    member, count). ``ack``: the kind and op index of the holder's first taken acknowledgement
    invoked after the other's poll completed."""
    return _TYPES["concurrent-acquisition"].make(
        value=value,
        partition=held[2],
        offset=held[3],
        holder=delivery(*held[1:]) | {"ack": ack[0]},
        other=delivery(*other[1:]),
        ops=_ops([held[0], other[0], ack[1]]),
    )


def delivery_count(value: str, kind: str, limit: int, *seen: Seen) -> dict[str, Any]:
    """Ordered by the counted delivery's (partition, offset, poll ok index, member, count),
    then kind; ``seen``: the earlier delivery it is judged against (the first in (poll ok
    index, member, count) order; none for ``over-limit``) and it."""
    last = seen[-1]
    name = "delivery-count" if kind == "over-limit" else "delivery-count-reset"
    return _TYPES[name].make(
        value=value,
        kind=kind,
        partition=last[2],
        offset=last[3],
        limit=limit,
        deliveries=_seen(seen),
        ops=_ops(s[0] for s in seen),
    )


def bad_value(
    name: str,
    value: str,
    seen: list[Seen],
    records: list[tuple[int, int, str | None]],
    topic: str,
    sent_op: int | None,
) -> dict[str, Any]:
    """``aborted-read`` or ``unknown-value``; ordered by value. ``records``: (partition,
    offset, key) of the output records holding the value."""
    records = sorted(records)
    return _TYPES[name].make(
        value=value,
        deliveries=_seen(seen),
        records=[
            {"topic": topic, "partition": p, "offset": o, "key": k, "value": value}
            for p, o, k in records
        ],
        ops=_ops([sent_op, *(s[0] for s in seen)]),
    )


def not_drained(
    state_op: int | None, error: str | None, starts: dict[int, int | None], ends: dict[int, int]
) -> dict[str, Any]:
    """The one ``undelivered`` example that says why the drain did not complete; it comes
    first, before the values'."""
    if state_op is None:
        reason = "no share-state op: the group's final state is unknown"
    elif error is not None:
        reason = f"the share group could not be described: {error}"
    else:
        behind = [
            f"partition {p}: start {starts.get(p)}, end {end}"
            for p, end in sorted(ends.items())
            if (starts.get(p) or 0) < end
        ]
        reason = "the drain did not finish" + (f" ({', '.join(behind)})" if behind else "")
    return _TYPES["undelivered"].make(reason=reason, ops=_ops([state_op]))


def undelivered(
    value: str, partition: int, offset: int, start: int | None, send_op: int
) -> dict[str, Any]:
    """Ordered by (partition, offset), after :func:`not_drained`'s example."""
    return _TYPES["undelivered"].make(
        reason="committed, neither processed nor archived when the drain gave up",
        value=value,
        partition=partition,
        offset=offset,
        start=start,
        ops=[send_op],
    )


def with_ops(
    result: dict[str, Any], ops_of: Callable[[set[int]], dict[int, dict[str, Any]]]
) -> dict[str, Any]:
    """``result`` with each example's op indexes replaced by the ops (looked up once for all),
    so a reader sees the evidence and the report can mark it on the timeline."""
    wanted = {i for exs in result["examples"].values() for ex in exs for i in ex["ops"]}
    ops = ops_of(wanted)
    for exs in result["examples"].values():
        for ex in exs:
            ex["ops"] = [ops.get(i, {"index": i}) for i in ex["ops"]]
    return result


def result(
    found: tuple[dict[str, int], dict[str, list[dict[str, Any]]]] | None,
    stats: dict[str, Any],
    notes: list[str],
    max_examples: int,
    error: str | None = None,
) -> dict[str, Any]:
    """The verdict on an engine's ``found`` (counts, examples): invalid iff a type that is
    not allowed (``delivery-count-reset`` is) has a count (``undelivered`` too: a group that
    could not drain once the faults healed is a liveness failure of the share group). With
    an ``error`` instead, ``valid: "unknown"`` and no counts: the run could not be judged."""
    counts, examples = found or ({}, {})
    out = checker_result(CHECKER, ANOMALY_TYPES, counts, examples, stats, notes, max_examples)
    allowed = [t for t in out["anomaly_types"] if _TYPES[t].allowed]
    if allowed:
        out["allowed_anomaly_types"] = allowed
        out["bad_anomaly_types"] = [t for t in out["bad_anomaly_types"] if t not in allowed]
        out["valid"] = not out["bad_anomaly_types"]
    if error is not None:
        out["valid"], out["error"] = "unknown", error
    return out
