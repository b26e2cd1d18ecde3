"""What the ``connect`` checker returns, built the same way by both engines.

Why one module: the Spark engine (:mod:`checkers.connect.checks`) and the reference
(:mod:`checkers.connect.pyref`) find cases differently, but each case becomes an example here
(in the shape of its :data:`checkers.anomalies.CONNECT` type) and the verdict is assembled
here, so the tests can demand that both engines' whole results are equal. Each builder says
in which order its check lists examples; the engines hand over the first ``max_examples``.
"""

from __future__ import annotations

from typing import Any, Final

from checkers.anomalies import CONNECT, names
from checkers.connect.extract import ConnectMeta
from checkers.connect.progress import stalled
from checkers.connect.views import ConnectInput, Plan
from checkers.engines import check_max_examples
from checkers.verdict import checker_result

__all__ = [
    "ANOMALY_TYPES",
    "CHECKER",
    "NO_DUMP_NOTE",
    "NO_JOURNAL_NOTE",
    "aborted_read",
    "acknowledged_lost",
    "add_progress",
    "base_notes",
    "base_stats",
    "check_max_examples",
    "duplicate",
    "lost",
    "malformed",
    "offset_case",
    "order",
    "record",
    "result",
    "seqno_value",
    "unknown",
    "zombie",
]

CHECKER: Final = "connect"
#: Every type the checker reports, in report order.
ANOMALY_TYPES: Final = names(CONNECT)
_TYPES: Final = {t.name: t for t in CONNECT}
NO_DUMP_NOTE: Final = "no broker log dump (evidence/logdump.jsonl): aborted-read not checked"
NO_JOURNAL_NOTE: Final = 'no task journals (process "tasks"): acknowledged-lost not checked'

Record = dict[str, Any]


def record(topic: str, partition: int, offset: int, key: str | None, value: str | None) -> Record:
    """A record as examples show it (data or offsets topic)."""
    return {"topic": topic, "partition": partition, "offset": offset, "key": key, "value": value}


def _rec_order(r: Record) -> tuple[int, int]:
    return (r["partition"], r["offset"])


def seqno_value(task: int, seqno: int) -> str:
    """The seqno an example is about as its ``value``: the report follows the string values
    examples name through the history (a seqno alone is not unique across tasks)."""
    return f"{task}:{seqno}"


def duplicate(task: int, seqno: int, copies: list[Record]) -> dict[str, Any]:
    """By (task, seqno); every copy, by (partition, offset)."""
    rs = sorted(copies, key=_rec_order)
    return _TYPES["duplicate"].make(
        value=seqno_value(task, seqno), task=task, seqno=seqno, copies=len(rs), records=rs
    )


def lost(
    task: int, first: int, last: int, max_seqno: int, before: Record | None, after: Record | None
) -> dict[str, Any]:
    """One run of missing seqnos ``first..last``, by (task, first); ``records``: the first
    copy (by partition, offset) of the committed seqno before the run (none when it starts
    at 0) and of the one after it."""
    recs = [r for r in (before, after) if r is not None]
    return _TYPES["lost"].make(
        value=seqno_value(task, first),
        task=task,
        first=first,
        last=last,
        missing=last - first + 1,
        max_seqno=max_seqno,
        records=recs,
    )


def acknowledged_lost(
    task: int, first: int, last: int, writer: str, ms: int, max_seqno: int | None
) -> dict[str, Any]:
    """One run of confirmed seqnos ``first..last`` with no copy, by (task, first). ``writer``
    and ``ms``: the ``committed`` journal op that confirmed ``first`` (the earliest, by
    history index, when several did): who was told the record was safe, and when.
    ``max_seqno``: the task's highest committed seqno (null without records), to tell a
    hole from a lost tail."""
    return _TYPES["acknowledged-lost"].make(
        value=seqno_value(task, first),
        task=task,
        first=first,
        last=last,
        missing=last - first + 1,
        writer=writer,
        ms=ms,
        max_seqno=max_seqno,
    )


def order(
    task: int, partition: int, seqno: int, prev_seqno: int, prev: Record, cur: Record
) -> dict[str, Any]:
    """By (task, partition, offset of the later record); ``records``: both."""
    return _TYPES["order"].make(
        value=seqno_value(task, seqno),
        task=task,
        partition=partition,
        seqno=seqno,
        prev_seqno=prev_seqno,
        records=[prev, cur],
    )


def offset_case(
    name: str,
    task: int,
    source_offset: int | None,
    max_seqno: int | None,
    offsets_record: Record | None,
    rec: Record | None,
) -> dict[str, Any]:
    """``offset-ahead`` or ``offset-behind``, by task. ``gap``: how many seqnos lie between
    the two (an absent one counts as -1): lost ones (ahead), or ones a restart would write
    again (behind). ``offsets_record``: the committed source offset's record; ``record``: the
    first copy of the task's highest committed seqno. ``value``: the one of the two that is
    ahead of the other (the source offset, or the highest seqno), the seqno past what the
    other side knows of (each case guarantees it is not null)."""
    lo = -1 if max_seqno is None else max_seqno
    so = -1 if source_offset is None else source_offset
    gap = so - lo if name == "offset-ahead" else lo - so
    return _TYPES[name].make(
        value=seqno_value(task, so if name == "offset-ahead" else lo),
        task=task,
        source_offset=source_offset,
        max_seqno=max_seqno,
        gap=gap,
        offsets_record=offsets_record,
        record=rec,
    )


def zombie(
    task: int,
    partition: int,
    seqno: int,
    writer: str,
    newer_writer: str,
    newer: Record,
    cur: Record,
) -> dict[str, Any]:
    """By (task, partition, offset). ``seqno``: the zombie's record's (its ``value``);
    ``newer``: the first record of the writer that started last before this record
    (``newer_writer``); ``records``: it, then the zombie's."""
    return _TYPES["zombie-task-write"].make(
        value=seqno_value(task, seqno),
        task=task,
        partition=partition,
        writer=writer,
        newer_writer=newer_writer,
        records=[newer, cur],
    )


def aborted_read(
    task: int | None, seqno: int | None, rec: Record, log: dict[str, Any] | None
) -> dict[str, Any]:
    """By (partition, offset); ``log``: the record's broker-log evidence
    (:func:`checkers.logs.rules.position_evidence`). ``task``/``seqno`` null, and no
    ``value``, when malformed."""
    named = {} if task is None or seqno is None else {"value": seqno_value(task, seqno)}
    return _TYPES["aborted-read"].make(task=task, seqno=seqno, records=[rec], log=log, **named)


def malformed(reason: str, rec: Record) -> dict[str, Any]:
    """By (partition, offset)."""
    return _TYPES["malformed-record"].make(reason=reason, records=[rec])


# ------------------------------------------------------------------------------------------
# Results


def base_notes(plan: Plan, log_dump: bool, journal_ops: int) -> list[str]:
    """The notes both engines know without judging: the plan's, and each check skipped for
    want of its input (a run without a dump, a history older than the task journals)."""
    out = list(plan.notes)
    if not log_dump:
        out.append(NO_DUMP_NOTE)
    if not journal_ops:
        out.append(NO_JOURNAL_NOTE)
    return out


def base_stats(
    meta: ConnectMeta | None, plan: Plan, log_dump: bool, journal_ops: int
) -> dict[str, Any]:
    """The stats both engines know without judging anything."""
    return {
        "connect": None if meta is None else meta.as_dict(),
        "partitions": len(plan.data_ops),
        "settle": plan.settle,
        "log_dump": log_dump,
        "journal_ops": journal_ops,
    }


def add_progress(
    got: ConnectInput,
    counts: dict[str, int],
    examples: dict[str, list[dict[str, Any]]],
    notes: list[str],
    max_examples: int,
) -> None:
    """``stalled-task`` (:func:`checkers.connect.progress.stalled`), the same for both
    engines: judged from the scan's facts, not from the committed records."""
    if not got.journal_ops or got.meta is None:
        return  # no journals (an older history): no confirmations to judge by
    n, made, note = stalled(got.progress, got.meta.connector, got.path.parent, max_examples)
    counts["stalled-task"], examples["stalled-task"] = n, made
    if note is not None:
        notes.append(note)


def result(
    counts: dict[str, int],
    examples: dict[str, list[dict[str, Any]]],
    stats: dict[str, Any],
    notes: list[str],
    input_notes: list[str],
    max_examples: int,
) -> dict[str, Any]:
    """The verdict: invalid iff any type has a count (none is allowed)."""
    out = checker_result(CHECKER, ANOMALY_TYPES, counts, examples, stats, notes, max_examples)
    if input_notes:
        out["input_notes"] = list(input_notes)
    return out


def unknown(
    error: str,
    stats: dict[str, Any],
    notes: list[str],
    input_notes: list[str],
    max_examples: int,
) -> dict[str, Any]:
    """The verdict when the run cannot be judged (input incomplete, or the engine failed):
    never valid, no counts, the reason under ``error`` (as every checker says it)."""
    out = result({}, {}, stats, notes, input_notes, max_examples)
    out["valid"] = "unknown"
    out["error"] = error
    return out
