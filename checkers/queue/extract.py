"""Loading and validating Jepsen-shaped queue histories.

The queue checker must never die with a traceback on a bad file: every structural problem is
turned into a :class:`HistoryInputError` whose message is one line, so the CLI can print it and
exit 2. This module is the only place that looks at raw JSON; the analysis modules work on the
normalized :class:`Txn` / :class:`SubChange` records built here and can therefore assume a
well-formed history.

Normalization rules (documented in ``docs/anomalies.md``):

* ``type``, ``f`` and micro-op names may carry a leading ``:`` (EDN keywords exported as
  strings); it is stripped.
* Keys are canonicalized to strings, because JSON object keys (the poll result maps) are always
  strings while sends may use integer keys: ``["send", 3, ...]`` and ``{"3": [...]}`` name the
  same topic-partition.
* Values are made hashable (lists become tuples) but otherwise compared exactly.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Crash",
    "HistoryInputError",
    "LoadedHistory",
    "ParsedHistory",
    "SubChange",
    "Txn",
    "load_queue_history",
    "parse_history",
]

Key = str
Value = Hashable
Pair = tuple[int | None, Value]

OP_TYPES = frozenset({"invoke", "ok", "fail", "info"})
TXN_FS = frozenset({"send", "poll", "txn"})
SUB_FS = frozenset({"assign", "subscribe"})


class HistoryInputError(ValueError):
    """The history cannot be checked; the message is a single line saying why."""


class LoadedHistory(list):
    """A list of op dicts that also remembers what the loader had to work around.

    It is a plain ``list`` for every caller; :func:`checkers.queue.check_queue` copies
    ``notes`` (e.g. "truncated last line skipped") into its result so a salvaged history is
    never silently mistaken for a complete one.
    """

    notes: list[str]
    source: str | None

    def __init__(
        self,
        ops: Iterable[dict[str, Any]] = (),
        *,
        notes: list[str] | None = None,
        source: str | None = None,
    ) -> None:
        super().__init__(ops)
        self.notes = list(notes or [])
        self.source = source


@dataclass(slots=True, eq=False)
class Txn:
    """A completed send/poll/txn operation, reduced to what the analyses need.

    ``writes`` and ``reads`` map each key to its ``(offset, value)`` pairs in micro-op order;
    keys whose poll result was empty are omitted. Identity (not equality) is what matters:
    the dependency graph uses these objects as vertices.
    """

    pos: int
    type: str
    f: str
    process: Hashable
    writes: dict[Key, list[Pair]]
    reads: dict[Key, list[Pair]]
    rebalanced: frozenset[Key]
    op: dict[str, Any]


@dataclass(slots=True, eq=False)
class SubChange:
    """A completed assign/subscribe: replaces the set of keys a process consumes."""

    pos: int
    type: str
    f: str
    process: Hashable
    keys: frozenset[Key]
    op: dict[str, Any]


@dataclass(slots=True, eq=False)
class Crash:
    """An info completion of any other op (e.g. ``crash``): the process's client is gone.

    Jepsen gives a process a new id after an info completion; histories that reuse the id
    must not compare the fresh client's positions with the dead one's.
    """

    pos: int
    type: str
    f: str
    process: Hashable
    op: dict[str, Any]


@dataclass(slots=True)
class ParsedHistory:
    """Normalized history: completions in history order plus simple counts."""

    events: list[Txn | SubChange | Crash] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    op_count: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    info_errors: list[Any] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Loading files


def load_queue_history(path: str | Path) -> LoadedHistory:
    """Read a JSON array, a JSONL file, or a history-format-v1 JSONL file of ops.

    A JSONL file whose *last* non-blank line does not parse is treated as truncated (a run
    killed mid-write): the line is dropped and a note is recorded. Any other defect raises
    :class:`HistoryInputError` with a one-line reason.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except IsADirectoryError:
        raise HistoryInputError(f"{p} is a directory, not a history file") from None
    except OSError as e:
        raise HistoryInputError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HistoryInputError(f"{p} is not UTF-8 text (byte {e.start})") from None
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise HistoryInputError(f"{p} is empty")
    if stripped[0] == "[":
        return _load_json_array(stripped, p)
    if stripped[0] == "{":
        return _load_jsonl(stripped, p)
    raise HistoryInputError(f"{p} is neither a JSON array nor JSONL of op objects")


def _load_json_array(text: str, p: Path) -> LoadedHistory:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise HistoryInputError(
            f"{p}: invalid or truncated JSON array (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None
    except RecursionError:
        raise HistoryInputError(f"{p}: JSON nested too deeply") from None
    if not isinstance(data, list):
        raise HistoryInputError(f"{p}: top-level JSON value is not an array of ops")
    for i, op in enumerate(data):
        if not isinstance(op, dict):
            raise HistoryInputError(f"{p}: element {i} is not a JSON object")
    return LoadedHistory(data, source=str(p))


def _load_jsonl(text: str, p: Path) -> LoadedHistory:
    lines = text.split("\n")
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    ops: list[dict[str, Any]] = []
    notes: list[str] = []
    for pos, (n, line) in enumerate(numbered):
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            if pos == len(numbered) - 1:
                notes.append(f"line {n}: truncated last line skipped ({len(line)} chars)")
                break
            reason = e.msg if isinstance(e, json.JSONDecodeError) else "nested too deeply"
            raise HistoryInputError(f"{p}: line {n} is not valid JSON ({reason})") from None
        if not isinstance(obj, dict):
            raise HistoryInputError(f"{p}: line {n} is not a JSON object")
        if pos == 0 and "history_format" in obj:
            notes.append(f"history format {_short(obj.get('history_format'))} header skipped")
            continue
        ops.append(obj)
    return LoadedHistory(ops, notes=notes, source=str(p))


# --------------------------------------------------------------------------------------------
# Normalizing ops


class _Bad(Exception):
    """A defect found inside one op; :func:`parse_history` adds the op's position."""


def _short(x: Any, limit: int = 60) -> str:
    """repr() for error messages: one line, bounded length, even for huge values."""
    try:
        r = repr(x)
    except RecursionError:
        r = f"<deeply nested {type(x).__name__}>"
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _name(x: Any) -> Any:
    """Strip the leading colon of an EDN keyword that was exported as a string."""
    if type(x) is str and x[:1] == ":":
        return x[1:]
    return x


def canonical_key(k: Any) -> Key:
    """Keys are compared as strings: JSON map keys are strings even when sends use ints."""
    t = type(k)
    if t is str:
        return k[1:] if k[:1] == ":" else k
    if t is int:
        return str(k)
    if isinstance(k, str):
        return str(k)
    if isinstance(k, int) and not isinstance(k, bool):
        return str(int(k))
    raise _Bad(f"key {_short(k)} is not a string or integer")


def freeze(v: Any) -> Value:
    """Make a JSON value hashable so it can index the per-key logs."""
    t = type(v)
    if t is int or t is str:
        return v
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((str(k), freeze(x)) for k, x in v.items()), key=lambda kv: kv[0]))
    if isinstance(v, set | frozenset):
        return frozenset(freeze(x) for x in v)
    return v


def _offset(o: Any) -> int | None:
    if o is None or (type(o) is int and o >= 0):
        return o
    if isinstance(o, int) and not isinstance(o, bool) and o >= 0:
        return int(o)
    raise _Bad(f"offset {_short(o)} is not a non-negative integer or null")


def _send_pair(v: Any) -> Pair:
    # Like Jepsen, any 2-element list is an [offset, value] pair; anything else is a bare
    # value whose offset is unknown (typical of an :info send).
    if isinstance(v, list | tuple) and len(v) == 2:
        return _offset(v[0]), freeze(v[1])
    return None, freeze(v)


def _poll_pairs(k: Key, pairs: Any) -> list[Pair]:
    if not isinstance(pairs, list | tuple):
        raise _Bad(f"records for key {_short(k)} are not a list")
    out: list[Pair] = []
    for rec in pairs:
        if not isinstance(rec, list | tuple) or len(rec) != 2:
            raise _Bad(f"record {_short(rec)} of key {_short(k)} is not [offset, value]")
        out.append((_offset(rec[0]), freeze(rec[1])))
    return out


def _parse_mops(value: Any) -> tuple[dict[Key, list[Pair]], dict[Key, list[Pair]]]:
    writes: dict[Key, list[Pair]] = {}
    reads: dict[Key, list[Pair]] = {}
    if value is None:
        return writes, reads
    if not isinstance(value, list | tuple):
        raise _Bad("value is not a list of micro-ops")
    for mop in value:
        if not isinstance(mop, list | tuple) or not mop:
            raise _Bad(f"micro-op {_short(mop)} is not a non-empty list")
        fname = _name(mop[0])
        if fname == "send":
            if len(mop) != 3:
                raise _Bad(f"send micro-op {_short(mop)} is not [send, k, v]")
            k = canonical_key(mop[1])
            writes.setdefault(k, []).append(_send_pair(mop[2]))
        elif fname == "poll":
            if len(mop) > 2:
                raise _Bad(f"poll micro-op has {len(mop)} elements")
            result = mop[1] if len(mop) == 2 else None
            if result is None:
                continue
            if not isinstance(result, dict):
                raise _Bad("poll result is not a map of key -> records")
            for raw_k, pairs in result.items():
                k = canonical_key(raw_k)
                recs = _poll_pairs(k, pairs)
                if recs:
                    reads.setdefault(k, []).extend(recs)
        else:
            raise _Bad(f"unknown micro-op {_short(mop[0])}")
    return writes, reads


def _rebalanced_keys(op: dict[str, Any]) -> frozenset[Key]:
    log = op.get("rebalance_log", op.get("rebalance-log"))
    if not log:
        return frozenset()
    if not isinstance(log, list):
        raise _Bad("rebalance log is not a list")
    keys: set[Key] = set()
    for event in log:
        ks = event.get("keys") if isinstance(event, dict) else None
        if isinstance(ks, list):
            keys.update(canonical_key(k) for k in ks)
    return frozenset(keys)


def _where(i: int, op: dict[str, Any]) -> str:
    index = op.get("index")
    return f"op #{i}" + (f" (index {_short(index, 20)})" if index is not None else "")


def parse_history(ops: Iterable[Any]) -> ParsedHistory:
    """Validate every op and keep the completions the analyses need, in history order.

    Invocations are validated only shallowly (their values carry no results); completions of
    send/poll/txn become :class:`Txn`, completions of assign/subscribe become
    :class:`SubChange`, info completions of anything else become :class:`Crash`; other ops
    (nemesis, ok crash, ...) are only counted.
    """
    parsed = ParsedHistory()
    if not isinstance(ops, list | tuple):
        ops = list(ops)
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise HistoryInputError(f"op #{i} is not an object")
        try:
            _parse_op(parsed, i, op)
        except _Bad as e:
            raise HistoryInputError(f"{_where(i, op)}: {e}") from None
        except RecursionError:
            raise HistoryInputError(f"{_where(i, op)}: value nested too deeply") from None
    parsed.op_count = len(ops)
    return parsed


def _parse_op(parsed: ParsedHistory, i: int, op: dict[str, Any]) -> None:
    typ = _name(op.get("type"))
    if type(typ) is not str or typ not in OP_TYPES:
        raise _Bad(f"type {_short(op.get('type'))} is not one of invoke/ok/fail/info")
    f = _name(op.get("f"))
    if type(f) is not str:
        raise _Bad("missing or non-string 'f'")
    counts = parsed.counts
    ck = f"{f}:{typ}"
    counts[ck] = counts.get(ck, 0) + 1
    if typ == "invoke":
        return
    if f in TXN_FS:
        writes, reads = _parse_mops(op.get("value"))
        process = freeze(op.get("process"))
        txn = Txn(i, typ, f, process, writes, reads, _rebalanced_keys(op), op)
        parsed.txns.append(txn)
        parsed.events.append(txn)
        if typ == "info" and "error" in op:
            err = op["error"]
            if err not in parsed.info_errors and len(parsed.info_errors) < 32:
                parsed.info_errors.append(err)
    elif f in SUB_FS:
        value = op.get("value")
        if value is None:
            keys: frozenset[Key] = frozenset()
        elif isinstance(value, list | tuple):
            keys = frozenset(canonical_key(k) for k in value)
        else:
            raise _Bad(f"{f} value is not a list of keys")
        parsed.events.append(SubChange(i, typ, f, freeze(op.get("process")), keys, op))
    elif typ == "info":
        parsed.events.append(Crash(i, typ, f, freeze(op.get("process")), op))
