"""Per-key version orders and the non-cycle Kafka anomalies.

This follows the analysis in Jepsen's ``jepsen.tests.kafka`` (re-implemented, not translated):
first reconstruct, for every key, the log of offsets -> values that sends and polls claim; then
compare each transaction and each process against that log. The definitions are summarized in
``docs/anomalies.md``; every ``*_cases`` function below returns a list of plain dicts (one per
anomaly instance) whose op references are the original op dicts, ready to be used as examples.
The ordering anomalies (skips, nonmonotonic polls/sends) live in :mod:`checkers.queue.ordering`
and the cycle search in :mod:`checkers.queue.cycles`.

Deliberate differences from Jepsen, all in the direction of determinism or of not hiding bugs:

* Jepsen picks one arbitrary value for an offset that several values claim; here every value
  observed in the log gets a dense index (the last index at which it appears), and conflicting
  offsets are reported as ``inconsistent-offsets`` either way.
* A poll that returns no records for a key does not reset that process's position for the key
  (Jepsen's bookkeeping forgets the last read in that case, which can mask a skip); see
  :mod:`checkers.queue.ordering`.
* A read of a value nobody sent is not a crash: it is counted in ``stats.unknown_writer_reads``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.queue.extract import Key, ParsedHistory, Txn, Value

MAX_LISTED = 32  # cap on values listed inside a single example (skipped, unseen, ...)


@dataclass(slots=True)
class KeyLog:
    """What the history says key ``k``'s log contains.

    ``values_at`` maps each offset to the distinct values claimed there (first-seen order).
    After :meth:`finalize`, offsets are compressed into dense *indices* (gaps in Kafka offsets
    are transaction markers, so they are ignored), and each value knows the first and last
    index at which it appears.
    """

    values_at: dict[int, list[Value]] = field(default_factory=dict)
    offsets: list[int] = field(default_factory=list)
    by_index: list[list[Value]] = field(default_factory=list)
    first_index: dict[Value, int] = field(default_factory=dict)
    last_index: dict[Value, int] = field(default_factory=dict)
    offsets_of: dict[Value, list[int]] = field(default_factory=dict)

    def add(self, offset: int, value: Value) -> None:
        vals = self.values_at.get(offset)
        if vals is None:
            self.values_at[offset] = [value]
        elif value not in vals:
            vals.append(value)

    def finalize(self) -> None:
        self.offsets = sorted(self.values_at)
        self.by_index = [self.values_at[o] for o in self.offsets]
        first, last, offs = self.first_index, self.last_index, self.offsets_of
        for i, o in enumerate(self.offsets):
            for v in self.values_at[o]:
                if v not in first:
                    first[v] = i
                    offs[v] = [o]
                else:
                    offs[v].append(o)
                last[v] = i

    def skipped(self, i1: int, i2: int) -> list[Value]:
        out: list[Value] = []
        for vals in self.by_index[i1 + 1 : i2]:
            out.extend(vals)
            if len(out) >= MAX_LISTED:
                break
        return out[:MAX_LISTED]


@dataclass(slots=True)
class Analysis:
    """Shared indexes over a parsed history, computed once and used by every check."""

    parsed: ParsedHistory
    logs: dict[Key, KeyLog]
    ok_reads: dict[Key, set[Value]]
    failed_writer: dict[tuple[Key, Value], Txn]
    writer_of: dict[tuple[Key, Value], Txn]
    first_ok_reader: dict[tuple[Key, Value], Txn]
    committed: set[int]  # ids of Txns that must have committed
    unknown_writer_reads: int = 0

    def delta(self, k: Key, v1: Value, v2: Value) -> tuple[int, int | None, int | None]:
        """Index distance from v1 to v2 in k's log; 1 (i.e. "fine") when either is unplaced."""
        log = self.logs.get(k)
        if log is None:
            return 1, None, None
        i1 = log.last_index.get(v1)
        i2 = log.last_index.get(v2)
        if i1 is None or i2 is None:
            return 1, i1, i2
        return i2 - i1, i1, i2


def must_have_committed(t: Txn, ok_reads: dict[Key, set[Value]]) -> bool:
    """An ok txn committed; an info txn did iff some ok poll observed one of its sends."""
    if t.type == "ok":
        return True
    if t.type != "info":
        return False
    for k, pairs in t.writes.items():
        seen = ok_reads.get(k)
        if seen and any(v in seen for _, v in pairs):
            return True
    return False


def analyze(parsed: ParsedHistory) -> Analysis:
    """Build version orders and the writer/reader indexes.

    Sends contribute offsets only when their txn must have committed; polls contribute from
    every completion type, because Kafka promises a poller only ever sees committed data even
    when the poller's own transaction later aborts.
    """
    ok_reads: dict[Key, set[Value]] = {}
    writer_of: dict[tuple[Key, Value], Txn] = {}
    failed_writer: dict[tuple[Key, Value], Txn] = {}
    first_ok_reader: dict[tuple[Key, Value], Txn] = {}
    for t in parsed.txns:
        for k, pairs in t.writes.items():
            for _, v in pairs:
                writer_of[(k, v)] = t
                if t.type == "fail":
                    failed_writer[(k, v)] = t
        if t.type == "ok":
            for k, pairs in t.reads.items():
                s = ok_reads.setdefault(k, set())
                for _, v in pairs:
                    s.add(v)
                    first_ok_reader.setdefault((k, v), t)

    committed: set[int] = set()
    logs: dict[Key, KeyLog] = {}
    for t in parsed.txns:
        if must_have_committed(t, ok_reads):
            committed.add(id(t))
            for k, pairs in t.writes.items():
                for o, v in pairs:
                    if o is not None:
                        _log(logs, k).add(o, v)
        for k, pairs in t.reads.items():
            for o, v in pairs:
                if o is not None:
                    _log(logs, k).add(o, v)
    for log in logs.values():
        log.finalize()

    unknown = sum(1 for kv in first_ok_reader if kv not in writer_of)
    return Analysis(
        parsed, logs, ok_reads, failed_writer, writer_of, first_ok_reader, committed, unknown
    )


def _log(logs: dict[Key, KeyLog], k: Key) -> KeyLog:
    log = logs.get(k)
    if log is None:
        log = logs[k] = KeyLog()
    return log


def _vals(pairs: list[tuple[int | None, Value]]) -> list[Value]:
    return [v for _, v in pairs]


# --------------------------------------------------------------------------------------------
# Log-shape anomalies


def inconsistent_offset_cases(a: Analysis) -> list[dict[str, Any]]:
    """Two or more different values claimed at the same offset of a key."""
    out = []
    for k in sorted_keys(a.logs):
        log = a.logs[k]
        for i, o in enumerate(log.offsets):
            vals = log.values_at[o]
            if len(vals) > 1:
                out.append({"key": k, "offset": o, "index": i, "values": list(vals)})
    return out


def duplicate_cases(a: Analysis) -> list[dict[str, Any]]:
    """One value appearing at more than one offset of a key."""
    out = []
    for k in sorted_keys(a.logs):
        log = a.logs[k]
        for v, offs in log.offsets_of.items():
            if len(offs) > 1:
                out.append({"key": k, "value": v, "count": len(offs), "offsets": list(offs)})
    return out


def attach_sources(a: Analysis, cases: list[dict[str, Any]], per_value: int = 4) -> None:
    """Add to each case the ops that put its values at its offsets (``sources``).

    Done as a second pass only for the few cases that become examples, so the main analysis
    does not have to remember every (key, offset, value) -> op association.
    """
    wanted: dict[tuple[Key, int], dict[Value, list[dict[str, Any]]]] = {}
    for c in cases:
        offs = c["offsets"] if "offsets" in c else [c["offset"]]
        vals = c["values"] if "values" in c else [c["value"]]
        for o in offs:
            slot = wanted.setdefault((c["key"], o), {})
            for v in vals:
                slot.setdefault(v, [])
    if not wanted:
        return
    for t in a.parsed.txns:
        sends_count = id(t) in a.committed
        for role, m in (("send", t.writes if sends_count else {}), ("poll", t.reads)):
            for k, pairs in m.items():
                for o, v in pairs:
                    slot = wanted.get((k, o)) if o is not None else None
                    if slot is not None and v in slot and len(slot[v]) < per_value:
                        slot[v].append({"role": role, "offset": o, "op": t.op})
    for c in cases:
        offs = c["offsets"] if "offsets" in c else [c["offset"]]
        vals = c["values"] if "values" in c else [c["value"]]
        c["sources"] = [
            {"offset": o, "value": v, "ops": wanted[(c["key"], o)].get(v, [])}
            for o in offs
            for v in vals
            if wanted[(c["key"], o)].get(v)
        ]


# --------------------------------------------------------------------------------------------
# Visibility anomalies


def g1a_cases(a: Analysis) -> list[dict[str, Any]]:
    """An ok poll/txn observed a value whose send belongs to a failed (aborted) txn."""
    out = []
    if not a.failed_writer:
        return out
    for t in a.parsed.txns:
        if t.type != "ok":
            continue
        for k, pairs in t.reads.items():
            for o, v in pairs:
                w = a.failed_writer.get((k, v))
                if w is not None:
                    out.append({"key": k, "value": v, "offset": o, "writer": w.op, "reader": t.op})
    return out


def precommitted_read_cases(a: Analysis) -> list[dict[str, Any]]:
    """A txn polled a value that it sent itself, i.e. before its own commit."""
    out = []
    for t in a.parsed.txns:
        if not t.writes or not t.reads:
            continue
        own: list[dict[str, Any]] = []
        for k, wpairs in t.writes.items():
            rpairs = t.reads.get(k)
            if rpairs:
                sent = set(_vals(wpairs))
                bad = [v for v in dict.fromkeys(_vals(rpairs)) if v in sent]
                if bad:
                    own.append({"key": k, "values": bad[:MAX_LISTED]})
        if own:
            out.append(
                {"key": own[0]["key"], "value": own[0]["values"][0], "own_reads": own, "op": t.op}
            )
    return out


def lost_write_cases(a: Analysis) -> list[dict[str, Any]]:
    """A committed send below the highest ok-polled position of its key that no ok poll saw.

    For each key, the bound is the largest *first* index among values read by ok polls; every
    value whose *last* index is at or below the bound should have been read. Using first/last
    appearances keeps the result independent of how conflicting offsets are resolved.
    """
    out = []
    for k in sorted_keys(a.ok_reads):
        read = a.ok_reads[k]
        log = a.logs.get(k)
        if log is None:
            continue
        bound, bound_value = -1, None
        for v in read:
            i = log.first_index.get(v)
            if i is not None and i > bound:
                bound, bound_value = i, v
        if bound < 0:
            continue
        missing = [(i, v) for v, i in log.last_index.items() if i <= bound and v not in read]
        missing.sort(key=lambda iv: iv[0])
        for _, v in missing:
            w = a.writer_of.get((k, v))
            if w is None or id(w) not in a.committed:
                continue
            reader = a.first_ok_reader.get((k, bound_value))
            out.append(
                {
                    "key": k,
                    "value": v,
                    "index": log.first_index[v],
                    "offset": log.offsets_of[v][0],
                    "max_read_index": bound,
                    "max_read_offset": log.offsets[bound],
                    "max_read_value": bound_value,
                    "writer": w.op,
                    "max_read": reader.op if reader is not None else None,
                }
            )
    return out


def unseen_cases(a: Analysis) -> list[dict[str, Any]]:
    """Values sent by ok sends/txns that no ok poll/txn ever returned (final state)."""
    out = []
    for t in a.parsed.txns:
        if t.type != "ok":
            continue
        for k, pairs in t.writes.items():
            read = a.ok_reads.get(k, ())
            for o, v in pairs:
                if v not in read:
                    out.append({"key": k, "value": v, "offset": o, "writer": t.op})
    return out


def sorted_keys(d: dict[Key, Any]) -> list[Key]:
    """Natural order: numeric keys numerically, then the rest as strings."""
    return sorted(d, key=lambda k: (0, int(k), "") if k.lstrip("-").isdecimal() else (1, 0, k))
