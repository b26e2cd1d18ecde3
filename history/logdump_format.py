"""Broker log dump format v1: the contract between the writer (the substrate's evidence
step, both backends) and the readers (:mod:`history.logdump`, :mod:`checkers.load`).

``<run>/evidence/logdump.jsonl``: line 1 is the header ``{"logdump_format": 1, "nodes": N}``;
each further line is one record of one replica, a JSON object with the :data:`FIELDS` below.
The prose is in ``docs/anomalies.md``, "Broker log evidence", "Input". Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

#: Major version of the dump format, carried by the header under :data:`HEADER_KEY`.
LOGDUMP_FORMAT: Final = 1
#: Header key that carries the version; its presence is also what marks a file as a log dump.
HEADER_KEY: Final = "logdump_format"

#: Record ``kind`` values: user data, ``__consumer_offsets``, ``__transaction_state``,
#: ``__share_group_state`` (share groups' acknowledged state, Kafka 4.0 on).
KINDS: Final = ("data", "offsets", "txnlog", "share-state")
#: Kinds whose records come from producers (and so carry producer ids, epochs and markers).
TXN_KINDS: Final = ("data", "offsets")
#: Values of a control record's ``marker``.
MARKERS: Final = ("COMMIT", "ABORT")

#: Fields every record copies from its batch header (DumpLogSegments' names).
BATCH_FIELDS: Final = (
    "baseOffset",
    "lastOffset",
    "count",
    "baseSequence",
    "lastSequence",
    "producerId",
    "producerEpoch",
    "partitionLeaderEpoch",
    "isTransactional",
    "isControl",
)

#: Every field of a dumped record, in the order examples show them.
FIELDS: Final[tuple[str, ...]] = (
    "node",
    "kind",
    "topic",
    "partition",
    "offset",
    *BATCH_FIELDS,
    "sequence",
    "create_time",
    "header_keys",
    "key",
    "payload",
    "marker",
    "coordinator_epoch",
    "segment",
)
REQUIRED_INT: Final = ("node", "partition", "offset", "producerId", "producerEpoch")
REQUIRED_BOOL: Final = ("isTransactional", "isControl")
REQUIRED_STR: Final = ("topic", "kind")
OPTIONAL_INT: Final = (
    "baseOffset",
    "lastOffset",
    "count",
    "baseSequence",
    "lastSequence",
    "partitionLeaderEpoch",
    "sequence",
    "create_time",
    "coordinator_epoch",
)
OPTIONAL_STR: Final = ("key", "payload", "marker", "segment")
_INT32: Final = frozenset(
    {
        "node",
        "partition",
        "count",
        "baseSequence",
        "lastSequence",
        "producerEpoch",
        "partitionLeaderEpoch",
        "sequence",
        "coordinator_epoch",
    }
)


def column_type(name: str) -> str:
    """How the checkers type a field's column: ``int`` (32-bit), ``long``, ``bool``,
    ``strings`` (a list) or ``string``; both of the dump's converters follow it."""
    if name in _INT32:
        return "int"
    if name in REQUIRED_INT or name in OPTIONAL_INT:
        return "long"
    if name in REQUIRED_BOOL:
        return "bool"
    return "strings" if name == "header_keys" else "string"


def header(nodes: int) -> dict[str, int]:
    """Line 1 of a dump of a cluster of ``nodes`` brokers."""
    return {HEADER_KEY: LOGDUMP_FORMAT, "nodes": nodes}
