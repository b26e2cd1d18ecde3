"""The rules of a position in the broker log dump, shared by every family that joins with it.

Why here and not in one family: the eos and connect checks show, for a drained record, which
producer and transaction wrote it and what marker ended it; the logs family chooses the same
reference replica for its own checks. Both engines of each family must give identical
results, so the record type (:class:`Pos`), the reference replica's rank, the records an
example shows (selectors) and the sentence that explains a position live here once. Nothing
here needs Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

#: Records shown per transaction in an example: the first ones, then the last one.
MAX_TXN_RECORDS: Final = 16


#: A COMMIT/ABORT marker as a position's evidence names it: (offset, outcome, epoch).
Marker = tuple[int, str, int]


class Pos(NamedTuple):
    """Where one data record sits among its producer's transactions on a reference replica.

    Both engines' ``log_positions`` give these (the Spark one as rows of the same columns),
    so the eos checks can join a drained record with the broker log: which producer id and
    epoch wrote it, the producer's marker before it (``prior_marker``), the marker that ended
    its transaction (``end_marker``, None while open) and that transaction's first data
    offset. Non-transactional records are ``committed`` with no transaction fields.
    """

    node: int
    producerId: int
    epoch: int
    transactional: bool
    outcome: str
    first_offset: int | None
    prior_marker: Marker | None
    end_marker: Marker | None


def _marker(m: Sequence[Any] | None) -> dict[str, Any] | None:
    return None if m is None else {"offset": m[0], "outcome": m[1], "epoch": m[2]}


def position_selectors(topic: str, partition: int, offset: int, pos: Pos) -> list[Selector]:
    """The dump records a position's evidence shows: the producer's marker before it, the
    record itself, the marker that ended its transaction (those that exist)."""
    offs = [m[0] for m in (pos.prior_marker,) if m is not None] + [offset]
    offs += [m[0] for m in (pos.end_marker,) if m is not None]
    return [("at", pos.node, "data", topic, partition, o) for o in offs]


def position_evidence(
    topic: str,
    partition: int,
    offset: int,
    pos: Pos,
    resolved: dict[Selector, tuple[list[dict], int]],
) -> dict[str, Any]:
    """A drained position's broker-log evidence, as eos examples carry it (key ``log``).

    Built here for both engines from a :class:`Pos` and the resolved dump records, so the
    Spark and reference examples are equal; the report turns it into a journey step.
    """
    records = [r for s in position_selectors(topic, partition, offset, pos) for r in resolved[s][0]]
    return {
        "node": pos.node,
        "producerId": pos.producerId,
        "epoch": pos.epoch,
        "outcome": pos.outcome,
        "first_offset": pos.first_offset,
        "prior_marker": _marker(pos.prior_marker),
        "end_marker": _marker(pos.end_marker),
        "reason": position_reason(offset, pos),
        "records": records,
    }


def position_reason(offset: int, pos: Pos) -> str:
    """One sentence: who wrote the record at ``offset`` and what ended its transaction."""
    head = f"offset {offset}: producer {pos.producerId} epoch {pos.epoch}"
    if not pos.transactional or pos.producerId < 0:
        return head + ", not transactional"
    before = pos.prior_marker
    prior = (
        f"after its {before[1]} marker at offset {before[0]} (epoch {before[2]})"
        if before is not None
        else "with no earlier marker of that producer"
    )
    end = pos.end_marker
    ended = (
        f"{end[1]} marker at offset {end[0]} (epoch {end[2]}) ended its transaction "
        f"(first data offset {pos.first_offset})"
        if end is not None
        else f"no marker ended its transaction (first data offset {pos.first_offset})"
    )
    return f"{head}, {prior}; {ended}"


def reference_rank(node: int, max_ple: int, log_end: int) -> tuple[int, int, int]:
    """Sort key (smallest first) choosing a partition's reference replica.

    The replica that followed the newest leader (highest partition leader epoch stamped on
    its records), then the longest log, then the lowest node id: the broker dump has no record
    of who led at the end, and this is the replica whose log the last leader would have had.
    """
    return (-max_ple, -log_end, node)


#: A selector names records to show: ("at", node, kind, topic, partition, offset) or
#: ("range", node, kind, topic, partition, producerId, lo, hi): data records of the producer.
Selector = tuple[Any, ...]
