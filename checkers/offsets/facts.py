"""The facts the offsets check judges, taken from a run's merged history in one pass.

The offsets workload's committers (int processes, one consumer group each) alternate a
``read`` of their group's committed offset and a plain synchronous ``commit`` of a higher one,
so that a commit the coordinator acknowledged and then lost is read back before the next
commit overwrites it. What the check needs of them is small: every commit with its outcome,
and every ``ok`` read with the offset it returned. Both engines judge these same facts, so a
difference between them is a difference in judging, never in reading.

What an op means is decided here, because it is a fact of the committer's own history: a
commit is acknowledged only by an ``ok`` completion; ``fail`` is refused; ``info`` and a
commit that never completed (its committer died) are unknown. A line that is not what the
workload writes (docs/history-format.md) is refused in one line rather than guessed at: a
wrong shape here would make a lost commit look kept or a kept one lost.

"Before" and "after" are the merged history's ``index`` (the merge orders by the shared
monotonic clock; a process's own ops keep its order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from checkers.json_text import utf8_safe
from history import iter_history
from history.logdump import CheckerInputError
from history.schema import HistoryError

#: What a commit or a read is about: (group, topic, partition).
Key = tuple[str, str, int]
#: (group, topic, partition, offset, invoke index, completion index or None, outcome), the
#: outcome ``ok`` (acknowledged), ``fail`` (refused) or ``info`` (unknown: the commit raised,
#: or never completed).
Commit = tuple[str, str, int, int, int, "int | None", str]
#: (group, topic, partition, offset, invoke index, ok index) of an acknowledged commit.
Ack = tuple[str, str, int, int, int, int]
#: (group, topic, partition, offset read or None, invoke index, ok index) of an ``ok`` read;
#: None: the group had no committed offset for the partition.
Read = tuple[str, str, int, "int | None", int, int]

#: The ops of a committer this check reads; its others (spawn, exit, ...) are not judged.
COMMITTER_OPS: Final = ("commit", "read")
_MISSING: Final = object()


class _Malformed(ValueError):
    """An op that is not what a committer writes; the message says what is wrong."""


@dataclass
class OffsetsFacts:
    """One run's facts, each list in history order."""

    #: The workload options (only ``variant`` is shown; the rule needs none).
    options: dict[str, Any]
    commits: list[Commit] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    #: Every group a committer invoked a commit or a read for.
    groups: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: The history the facts came from, where the examples' ops are looked up.
    path: Path | None = None

    def acknowledged(self) -> list[Ack]:
        """The commits the coordinator acknowledged (``ok``): the only ones a read is held to."""
        return [(*c[:5], c[5]) for c in self.commits if c[6] == "ok" and c[5] is not None]


def _text(value: dict[str, Any], name: str) -> str:
    x = value.get(name)
    if type(x) is not str or not x:
        raise _Malformed(f"{name} must be a non-empty string, got {x!r}")
    return str(utf8_safe(x))  # a lone surrogate as its JSON text, as Spark must hold it


def _count(value: dict[str, Any], name: str, null: str = "") -> int:
    x = value.get(name, _MISSING)
    if type(x) is not int or x < 0:
        got = "nothing" if x is _MISSING else repr(x)
        raise _Malformed(f"{name} must be a non-negative int{null}, got {got}")
    return x


def _read_offset(value: dict[str, Any]) -> int | None:
    """A read's offset; null: the group has no committed offset for the partition."""
    return None if value.get("offset", _MISSING) is None else _count(value, "offset", " or null")


def _where(value: Any) -> Key:
    if type(value) is not dict:
        raise _Malformed(f"value must be an object, got {type(value).__name__}")
    return _text(value, "group"), _text(value, "topic"), _count(value, "partition")


def _answers(invoked: dict[str, Any], value: Any, names: tuple[str, ...]) -> None:
    """A completion's value names what its invocation asked about (keys it leaves out are
    taken from the invocation)."""
    if type(value) is not dict:
        raise _Malformed(f"value must be an object, got {type(value).__name__}")
    for name in names:
        if name in value and value[name] != invoked[name]:
            raise _Malformed(f"{name} {value[name]!r} answers an invocation of {invoked[name]!r}")


class _Scan:
    """The one pass: each committer's open invocation, paired with its completion."""

    def __init__(self, facts: OffsetsFacts) -> None:
        self.facts = facts
        self.open: dict[int, dict[str, Any]] = {}

    def see(self, op: dict[str, Any]) -> None:
        process = op["process"]
        if type(process) is not int or op["f"] not in COMMITTER_OPS:
            return
        if op["type"] == "invoke":
            if process in self.open:
                raise _Malformed(f"invoked while op {self.open[process]['index']} is open")
            self.facts.groups.add(_where(op["value"])[0])
            if op["f"] == "commit":
                _count(op["value"], "offset")
            self.open[process] = op
            return
        invoked = self.open.pop(process, None)
        if invoked is None or invoked["f"] != op["f"]:
            raise _Malformed(f"a {op['f']} completion with no {op['f']} invocation open")
        if op["f"] == "commit":
            self._commit(invoked, op)
        elif op["type"] == "ok":
            _answers(invoked["value"], op["value"], ("group", "topic", "partition"))
            read = _read_offset(op["value"])
            self.facts.reads.append(
                (*_where(invoked["value"]), read, invoked["index"], op["index"])
            )

    def _commit(self, invoked: dict[str, Any], done: dict[str, Any] | None) -> None:
        """One commit, its offset the invocation's; ``done`` None: it never completed."""
        if done is not None and done["type"] == "ok":
            _answers(invoked["value"], done["value"], ("group", "topic", "partition", "offset"))
        offset = _count(invoked["value"], "offset")
        outcome = "info" if done is None else done["type"]
        index = None if done is None else done["index"]
        self.facts.commits.append(
            (*_where(invoked["value"]), offset, invoked["index"], index, outcome)
        )

    def finish(self) -> None:
        for _process, invoked in sorted(self.open.items()):
            if invoked["f"] == "commit":
                self._commit(invoked, None)  # the committer died waiting: outcome unknown
        self.facts.commits.sort(key=lambda c: c[4])


def read_facts(path: str | Path, options: dict[str, Any] | None = None) -> OffsetsFacts:
    """The facts of a merged history; :class:`CheckerInputError` (one line) for unusable
    input. ``options`` (the run's ``config.json`` workload options) win over the history
    header's ``meta.workload_options``."""
    try:
        with iter_history(path) as reader:
            if reader.header is None:
                raise CheckerInputError(f"{path}: empty history")
            meta = (reader.header.get("meta") or {}).get("workload_options") or {}
            facts = OffsetsFacts({**meta, **(options or {})}, path=Path(path))
            scan = _Scan(facts)
            for op in reader:
                try:
                    scan.see(op)
                except (_Malformed, KeyError, TypeError) as e:
                    where = f"op {op['index']} ({op['process']} {op['f']} {op['type']})"
                    raise CheckerInputError(f"{path}: {where}: malformed: {e}") from None
            scan.finish()
            facts.notes += reader.warnings
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    return facts


def ops_of(path: Path | None, wanted: set[int]) -> dict[int, dict[str, Any]]:
    """The ops at ``wanted`` (the examples' evidence), by a second pass that ends at the last
    of them: the facts keep indexes, not ops, however long the history."""
    got: dict[int, dict[str, Any]] = {}
    if path is None or not wanted:
        return got
    with iter_history(path) as reader:
        for op in reader:
            if op["index"] in wanted:
                got[op["index"]] = dict(op)
                if len(got) == len(wanted):
                    break
    return got
