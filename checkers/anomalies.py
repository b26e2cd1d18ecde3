"""Every anomaly type the checkers report: its name, what one count is, its example's shape.

Why one module: each family of checks has two engines (Spark and the pure-Python reference)
and a report that names what they found. When each of them listed the names and built the
examples on its own, they drifted (the same fenced zombie write had its fencing op in a
separate key in one engine and among ``ops`` in the other). Here each type is defined once;
both engines build every example through :meth:`AnomalyType.example`, which refuses a field
the definition does not name, and the report reads the descriptions from here.

The prose definitions, with the rules for what counts, are in ``docs/anomalies.md``; each
entry there names the :class:`AnomalyType` below.

Public API::

    lookup(checker, name) -> AnomalyType | None     # checker: a result's key under "checkers"
    describe(name, checker=None) -> str             # one sentence for a reader
    found(result) -> list[(checker, name, count)]   # what a result reports, any checker's shape
    EOS, EOS_NOTICES, EOS_PROGRESS, LOG_EVIDENCE, QUEUE, CONNECT, STREAMS, SHARE, OFFSETS
    names(types) -> tuple[str, ...]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

# Counting what a result reports is the verdict's business; the report reads it here, with
# the descriptions, so that it needs one module of the checkers (tests/test_architecture.py).
from checkers.verdict import counts_of as counts_of
from checkers.verdict import found as found


@dataclass(frozen=True)
class AnomalyType:
    """One anomaly type: who reports it, what is counted, what an example holds."""

    name: str
    #: The check reporting it: its key under a result's ``checkers`` (for the eos checks the
    #: check is named after its one type; ``queue`` for the queue checker's whole result).
    checker: str
    #: One sentence a reader can take in at a glance (the report shows it).
    summary: str
    #: What one unit of the count is.
    counts: str
    #: Keys every example has, in the order they are shown.
    example: tuple[str, ...] = ()
    #: Keys only some examples have (one ``kind`` of the type, or a reason's extra detail).
    optional: tuple[str, ...] = ()
    #: Values of an example's ``kind`` when the type has several.
    kinds: tuple[str, ...] = ()
    #: Reported with examples but never a reason to call the run invalid.
    allowed: bool = False

    def example_of(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` in this type's example shape: declared order, nothing missing or extra.

        A mismatch is a bug in the engine that built the example, so it raises ValueError
        rather than letting two engines' examples quietly differ.
        """
        missing = [k for k in self.example if k not in fields]
        extra = [k for k in fields if k not in self.example and k not in self.optional]
        if missing or extra:
            raise ValueError(f"{self.name} example: missing {missing}, unexpected {extra}")
        if self.kinds and fields.get("kind") not in self.kinds:
            raise ValueError(f"{self.name} example: kind {fields.get('kind')!r}")
        order = self.example + self.optional
        return {k: fields[k] for k in sorted(fields, key=order.index)}

    def make(self, **fields: Any) -> dict[str, Any]:
        """Keyword form of :meth:`example_of`."""
        return self.example_of(fields)


def names(types: Iterable[AnomalyType]) -> tuple[str, ...]:
    return tuple(t.name for t in types)


# ------------------------------------------------------------------------------------------
# eos workload: one check per type (docs/anomalies.md, "eos workload")


def _eos(name: str, summary: str, counts: str, example: tuple[str, ...], **kw: Any) -> AnomalyType:
    """An eos type: its check has its name, and every example ends with the ``ops`` involved.

    (A zombie write's ``reason`` is ``fenced``, its fencing op among the ``ops``, or
    ``overtaken``, with ``newer``: see :func:`checkers.eos.results.zombie_write`.)
    """
    return AnomalyType(name, name, summary, counts, (*example, "ops"), **kw)


LOST: Final = _eos(
    "lost",
    "an acknowledged seed the group committed past, with no committed output",
    "acknowledged seeds",
    ("values", "input", "committed_offset"),
    optional=("written", "log"),
)
DUPLICATE: Final = _eos(
    "duplicate",
    "an input with more than one committed output",
    "inputs (identities) with two or more outputs",
    ("values", "input", "copies", "records"),
)
ZOMBIE_WRITE: Final = _eos(
    "zombie-write",
    "a committed output of a fenced instance, or of a generation a newer one overtook",
    "drained records",
    ("values", "reason", "records"),
    optional=("newer",),
)
ABORTED_READ: Final = _eos(
    "aborted-read",
    "a committed output of an aborted, open or poison input, or a poison input processed",
    "drained records plus transactions",
    ("values", "kind"),
    optional=("records", "log"),
    kinds=("poison-output", "aborted-in-log", "open-in-log", "poison-input"),
)
#: KIP-890's "a message from a previous (aborted) transaction becomes part of the next
#: transaction": the writer's transaction did not commit (or committed elsewhere), yet a
#: later transaction's marker made the record visible. A record aborted-read names (the
#: reader saw an aborted, open or poison record) is not counted again here.
COMMITTED_IN_LATER_TRANSACTION: Final = _eos(
    "committed-in-later-transaction",
    "a record committed by a later transaction than the one that wrote it (KIP-890)",
    "drained records",
    ("values", "kind", "txn", "outcome", "records"),
    optional=("later", "log"),
    kinds=("writer-aborted", "merged-in-log"),
)
#: KAFKA-17754: a stale or duplicated EndTxn of a producer's previous transaction reaches
#: the coordinator while the next one is open; a transaction protocol that cannot tell them
#: apart (versions 0/1) commits the open one. Its client then fails it, yet read_committed
#: sees what it had written so far. Needs the dump: the marker's time against the failure's.
PREMATURE_COMMIT: Final = _eos(
    "premature-commit",
    "a record of a failed transaction committed by a marker written before the failure",
    "drained records",
    ("values", "kind", "txn", "outcome", "records", "marker_ms", "failed_ms", "early_ms"),
    optional=("log",),
    kinds=("commit-before-failure",),
)
TORN_TRANSACTION: Final = _eos(
    "torn-transaction",
    "a transaction partly visible, or committed with its offsets but none of its outputs",
    "transactions",
    ("values", "kind", "txn", "expected", "present", "missing"),
    optional=("written", "log"),
    kinds=("partial", "ok-offsets-committed-outputs-absent"),
)
ORDER: Final = _eos(
    "order",
    "outputs of one input partition out of input order within an output partition",
    "adjacent pairs whose source offset decreases",
    ("values", "output_partition", "src_partition", "records"),
)
HANGING_TRANSACTION: Final = _eos(
    "hanging-transaction",
    "a transaction still open at the end (LSO below HWM, or listed by find-hanging)",
    "partitions with lso < hwm plus find-hanging rows",
    ("values", "kind"),
    optional=(
        "topic", "partition", "lso", "hwm", "quiet_ms", "timeout_ms", "past_timeout",
        "find_hanging", "broker", "row", "lso_below_hwm", "log",
    ),
    kinds=("lso-below-hwm", "find-hanging"),
)  # fmt: skip
#: A consumer must start a partition it is given at the group's committed offset (KIP-447:
#: after waiting out pending transactional offsets); one that starts below an offset the group
#: had committed before it was given the partition reads committed inputs again. Finding F5
#: (librdkafka) is this after a rebalance interrupted the wait.
STARTED_BELOW_COMMITTED: Final = _eos(
    "started-below-committed",
    "a partition an instance was given, first read below the offset the group had committed "
    "before it was given it",
    "assignments (instance, partition) read first below the committed offset",
    ("values", "instance", "partition", "assigned", "first_read", "committed", "waited"),
    optional=("pending",),
)
#: The eos safety checks, in report order.
EOS: Final = (LOST, DUPLICATE, ZOMBIE_WRITE, ABORTED_READ, COMMITTED_IN_LATER_TRANSACTION,
              PREMATURE_COMMIT, TORN_TRANSACTION, ORDER, HANGING_TRANSACTION,
              STARTED_BELOW_COMMITTED)  # fmt: skip
#: KAFKA-20785 (F13): a fatal refusal where the producer should have been fenced; nothing
#: is lost by it, so it is reported beside the safety checks and never makes a run invalid.
EOS_NOTICES: Final = (
    _eos(
        "invalid-state-commit",
        "a commit refused with INVALID_TXN_STATE, fatal to the client, where Kafka should "
        "have fenced the producer (KAFKA-20785)",
        "transactions whose commit was refused so",
        ("values", "instance", "txn_seq", "code", "message"),
        allowed=True,
    ),
)
#: Liveness, reported under ``liveness`` and never part of ``valid``.
EOS_PROGRESS: Final = AnomalyType(
    "progress",
    "progress",
    "the run did not finish: drain incomplete, a read incomplete or seeds never consumed",
    "unconsumed seeds + incomplete reads + (1 if the drain did not complete)",
    ("values", "input", "committed_offset"),
)


# ------------------------------------------------------------------------------------------
# Broker log evidence (docs/anomalies.md, "Broker log evidence")

#: Every log-evidence example: the finding's place, its nodes, a sentence and the records.
_LOG = ("type", "kind", "topic", "partition", "offset", "nodes", "reason", "records")
_LOG_OPT = ("records_omitted",)
_PID = ("producerId",)


def _log(name: str, checker: str, summary: str, fields: tuple[str, ...], **kw: Any) -> AnomalyType:
    opt = tuple(kw.pop("optional", ())) + _LOG_OPT
    counts = kw.pop("counts", "cases (one however many replicas show it)")
    return AnomalyType(name, checker, summary, counts, _LOG + fields, optional=opt, **kw)


_REGRESSION = (*_PID, "epoch", "prior_epoch", "prior_offset")
_MARKER_PAIR = (*_PID, "epoch", "outcome", "prior_outcome", "prior_offset")
_OPEN = (*_PID, "epoch", "first_offset", "last_offset", "data_records", "reason_code")
_DIVERGED = ("variants", "min_log_end", "leader_epochs")


def _open(name: str, summary: str, more: tuple = (), opt: tuple = (), **kw: Any) -> AnomalyType:
    optional = ("later_epoch", "coordinator", *opt)
    return _log(name, "hanging_in_log", summary, (*_OPEN, *more), optional=optional, **kw)


LOG_EVIDENCE: Final = (
    _log(
        "data-epoch-regression",
        "epoch_violation",
        "a data record below its producer's prior epoch: a fenced (zombie) write the broker took",
        _REGRESSION,
    ),
    _log(
        "marker-epoch-regression",
        "epoch_violation",
        "a marker below its producer's prior epoch",
        (*_REGRESSION, "outcome"),
    ),
    _log(
        "marker-below-data",
        "epoch_violation",
        "a marker below the highest epoch of the transaction it ends",
        (*_PID, "epoch", "outcome", "data_epoch", "data_offset"),
    ),
    _log(
        "epoch-bump-in-open-transaction",
        "epoch_violation",
        "data at a higher epoch while the producer's transaction had no marker",
        (*_PID, "epoch", "prior_epoch", "first_offset"),
    ),
    _log(
        "marker-not-bumped",
        "epoch_violation",
        "TV2: a marker at the data's epoch (TV2 markers carry a bumped epoch)",
        (*_PID, "epoch", "outcome", "first_offset"),
    ),
    _log(
        "txn-epoch-reuse",
        "epoch_violation",
        "TV2: a transaction reusing the epoch of the producer's previous, ended transaction",
        (*_PID, "epoch", "prior_first_offset", "prior_marker_offset"),
    ),
    _log(
        "conflicting-markers",
        "epoch_violation",
        "TV2: an empty marker with the previous marker's epoch and the other outcome",
        _MARKER_PAIR,
    ),
    _log(
        "duplicate-marker",
        "epoch_violation",
        "TV2: an empty marker repeating the previous marker (a retried marker write)",
        _MARKER_PAIR,
        allowed=True,
    ),
    _log(
        "replica-divergence",
        "replica_divergence",
        "replicas holding different records at an offset below every replica's log end",
        _DIVERGED,
    ),
    _log(
        "unreconciled-replica",
        "replica_divergence",
        "a stale replica that never fetched from the newer leader disagrees",
        _DIVERGED,
        allowed=True,
    ),
    _open("hanging-transaction", "an open transaction in the log that can no longer be ended"),
    _open(
        "marker-skipped",
        "an open transaction its coordinator prepared here and completed with no marker (F9)",
        ("prepared",),
        ("prepared_at",),
    ),
    _open(
        "open-transaction",
        "an open transaction in the log that may have been in flight at the end",
        allowed=True,
    ),
)
#: The log-evidence checks, in report order.
LOG_CHECKERS: Final = ("epoch_violation", "replica_divergence", "hanging_in_log")


def log_types(checker: str) -> tuple[str, ...]:
    """The anomaly types one log-evidence checker reports, in definition order."""
    return tuple(t.name for t in LOG_EVIDENCE if t.checker == checker)


# ------------------------------------------------------------------------------------------
# queue workload (docs/anomalies.md, "queue workload"); allowed types depend on the options
# (checkers.queue.allowed_anomaly_types), and examples carry the ops of each case.


def _queue(name: str, summary: str, counts: str = "cases") -> AnomalyType:
    return AnomalyType(name, "queue", summary, counts)


QUEUE: Final = (
    _queue("G0", "a cycle of write-write dependencies", "strongly connected ww pieces"),
    _queue("G1a", "an ok read of a value a failed send wrote (aborted read)"),
    _queue("G1c", "a dependency cycle with a write-read edge", "strongly connected components"),
    _queue("duplicate", "one value at more than one offset of a key"),
    _queue("empty-transaction-graph", "no read saw another operation's write"),
    _queue("inconsistent-offsets", "different values claimed at the same offset of a key"),
    _queue("int-nonmonotonic-poll", "inside one poll, a key's next record is not after the last"),
    _queue("int-nonmonotonic-send", "inside one send, a key's next send landed not after the last"),
    _queue("int-poll-skip", "inside one poll, two records of a key more than one index apart"),
    _queue("int-send-skip", "inside one send, two sends to a key more than one index apart"),
    _queue("lost-write", "a committed value below what readers saw that no reader returned"),
    _queue("nonmonotonic-poll", "a poll starts at or before where the last ok poll ended"),
    _queue("nonmonotonic-send", "a send's first value lands at or before the previous send's"),
    _queue("poll-skip", "a poll starts more than one index after where the last ok poll ended"),
    _queue("precommitted-read", "an operation read its own write before committing"),
    _queue("unseen", "an acknowledged value no read returned by the end", "values"),
)


# ------------------------------------------------------------------------------------------
# connect workload (docs/anomalies.md, "connect workload"), KIP-618 source tasks; checker
# ``connect``. An example's ``value`` (first, for the report's journeys) is its seqno as
# ``"<task>:<seqno>"``; its records are the final read's (a malformed record names none).


def _of(checker: str, name: str, summary: str, counts: str, ex: tuple, **kw: Any) -> AnomalyType:
    """A type of a family with one checker (connect, streams)."""
    return AnomalyType(name, checker, summary, counts, ex, **kw)


_connect = partial(_of, "connect")


CONNECT: Final = (
    _connect(
        "duplicate",
        "a task's seqno committed more than once",
        "extra copies",
        ("value", "task", "seqno", "copies", "records"),
    ),
    _connect(
        "lost",
        "a task's seqno below its highest committed one that was never committed",
        "missing seqnos",
        ("value", "task", "first", "last", "missing", "max_seqno", "records"),
    ),
    _connect(
        "acknowledged-lost",
        "a seqno Connect confirmed to its task (the task journal's commitRecord) not committed",
        "confirmed seqnos missing",
        ("value", "task", "first", "last", "missing", "writer", "ms", "max_seqno"),
    ),
    _connect(
        "order",
        "a task's committed record not above the task's previous record in its partition",
        "records",
        ("value", "task", "partition", "seqno", "prev_seqno", "records"),
    ),
    _connect(
        "offset-ahead",
        "a task's committed source offset above its highest committed seqno (records lost)",
        "tasks",
        ("value", "task", "source_offset", "max_seqno", "gap", "offsets_record", "record"),
    ),
    _connect(
        "offset-behind",
        "a task's highest committed seqno above its committed source offset (would repeat)",
        "tasks",
        ("value", "task", "source_offset", "max_seqno", "gap", "offsets_record", "record"),
    ),
    _connect(
        "zombie-task-write",
        "a committed record of a task instance after its successor's first committed record",
        "records",
        ("value", "task", "partition", "writer", "newer_writer", "records"),
    ),
    _connect(
        "aborted-read",
        "a read_committed record that the broker log shows inside an aborted transaction",
        "records",
        ("task", "seqno", "records", "log"),
        optional=("value",),  # only a record of the connector's names a seqno
    ),
    _connect(
        "malformed-record",
        "a committed data-topic record that is not the connector's task/seqno/writer object",
        "records",
        ("reason", "records"),
    ),
    _connect(
        "stalled-task",
        "a task of the final configuration that confirmed nothing for 30 s after the faults "
        "healed and its task count was set",
        "tasks",
        ("task", "worker", "last_confirmed_ms", "quiet_s", "since_ms", "stop_ms", "log"),
    ),
)


# --- the streams checker -------------------------------------------------------------------
# Kafka Streams under exactly_once_v2 (docs/anomalies.md, "streams workload"); checker
# ``streams``. An example's ``value`` is the input value (or the group key) it is about; its
# records are the final read's.


_streams = partial(_of, "streams")

STREAMS: Final = (
    _streams(
        "lost",
        "a committed input the application committed past, with no committed output (or no "
        "committed aggregate update)",
        "inputs per topic",
        ("value", "partition", "offset", "topic", "committed"),
    ),
    _streams(
        "duplicate",
        "an input with more than one committed output (or aggregate update)",
        "extra copies",
        ("value", "partition", "offset", "topic", "copies", "records"),
    ),
    _streams(
        "aborted-read",
        "a committed output or aggregate update of no committed input (an aborted one)",
        "records",
        ("value", "topic", "records"),
    ),
    _streams(
        "wrong-aggregate",
        "a committed aggregate update not equal to its key's inputs up to the one it came from",
        "aggregate records",
        ("value", "kind", "key", "partition", "offset", "got", "want", "records"),
        kinds=("counted-twice", "skipped", "wrong-sum"),
    ),
    _streams(
        "wrong-final-aggregate",
        "a key whose last committed aggregate is not the count and sum of all its inputs",
        "keys",
        ("value", "got", "want", "records"),
    ),
    _streams(
        "changelog-mismatch",
        "a key whose last committed changelog value is not the count and sum of its inputs",
        "keys",
        ("value", "got", "want", "records"),
    ),
    _streams(
        "progress",
        "the run did not finish: the application did not commit past every input in time",
        "1 if the drain did not complete",
        ("reason",),
    ),
)


# ------------------------------------------------------------------------------------------
# share workload (docs/anomalies.md, "share workload"), KIP-932; checker ``share``. A delivery
# is ``{"member", "partition", "offset", "count"}``; every example names its input ``value``
# first and ends with the ``ops`` it rests on (an op that never completed: its invocation).


def _share(name: str, summary: str, counts: str, fields: tuple[str, ...], **kw: Any) -> AnomalyType:
    """A share type: every example ends with the ``ops`` it rests on."""
    return AnomalyType(name, "share", summary, counts, (*fields, "ops"), **kw)


SHARE: Final = (
    _share(
        "lost",
        "a committed input neither in the output nor archived by the broker, after the drain "
        "(or below the group's start offset)",
        "committed input values",
        ("value", "partition", "offset", "start", "drained", "deliveries"),
    ),
    _share(
        "redelivered-after-ack",
        "a record delivered again by a poll invoked after an accept or reject of it the broker "
        "took",
        "deliveries",
        ("value", "partition", "offset", "ack", "delivery"),
    ),
    _share(
        "acknowledged-twice",
        "a record's second accept or reject the broker took, answering another delivery than "
        "the first it took",
        "acknowledgements",
        ("value", "partition", "offset", "first", "second"),
    ),
    _share(
        "concurrent-acquisition",
        "a record handed to a second delivery while its holder still held it, and the holder's "
        "acknowledgement then taken",
        "pairs of deliveries",
        ("value", "partition", "offset", "holder", "other"),
    ),
    _share(
        "delivery-count",
        "a delivery count above the group's delivery limit",
        "deliveries",
        ("value", "kind", "partition", "offset", "limit", "deliveries"),
        kinds=("over-limit",),
    ),
    _share(
        "delivery-count-reset",
        "a delivery count repeated, or lower than an earlier delivery's: allowed, KIP-932 "
        "persists no acquisition, so a share-partition leader change forgets one",
        "deliveries",
        ("value", "kind", "partition", "offset", "limit", "deliveries"),
        kinds=("repeated", "skipped-back"),
        allowed=True,
    ),
    _share(
        "aborted-read",
        "a value of a transaction the seeder aborted, delivered (or processed) under "
        "read_committed",
        "values",
        ("value", "deliveries", "records"),
    ),
    _share(
        "unknown-value",
        "a delivered or processed value the seeder never sent",
        "values",
        ("value", "deliveries", "records"),
    ),
    _share(
        "undelivered",
        "the run did not finish: committed inputs neither processed nor archived when the "
        "drain gave up",
        "committed input values + (1 if the drain did not complete)",
        ("reason",),
        optional=("value", "partition", "offset", "start"),
    ),
)


# ------------------------------------------------------------------------------------------
# offsets workload (docs/anomalies.md, "offsets workload"): consumer groups committing offsets
# and reading them back; checker ``offsets``. Its one rule needs no liveness type: a group
# whose last commit was never read back is a note, not an anomaly.
OFFSETS: Final = (
    _of(
        "offsets",
        "lost-commit",
        "an offset commit the group coordinator acknowledged, later read back lower (KAFKA-20634)",
        "acknowledged commits (group, topic, partition, offset) read back lower",
        ("values", "group", "topic", "partition", "acknowledged_offset", "read_offset", "ops"),
    ),
)

# --- every type, for the look-ups -----------------------------------------------------------
_ALL: Final = (*EOS, *EOS_NOTICES, EOS_PROGRESS, *LOG_EVIDENCE, *QUEUE, *CONNECT, *STREAMS,
               *SHARE, *OFFSETS)  # fmt: skip
_BY_KEY: Final = {(t.checker, t.name): t for t in _ALL}


def lookup(checker: str, name: str) -> AnomalyType | None:
    """The type ``name`` as reported by ``checker`` (``None`` if no such type): names are
    unique per checker only (eos and queue both have a ``duplicate``)."""
    return _BY_KEY.get((checker, name))


def describe(name: str, checker: str | None = None) -> str:
    """One sentence for the anomaly type ``name`` (of ``checker`` if given; else the first
    definition of the name, in the order eos, log evidence, queue, connect, streams, share,
    offsets)."""
    if checker is not None:
        t = lookup(checker, name)
        return t.summary if t is not None else ""
    return next((t.summary for t in _ALL if t.name == name), "")
