"""The facts the share checks judge, taken from a run's merged history in one pass.

What the seeder committed is its acknowledged values (an offset in a ``send`` completion);
what the members were handed is every ``poll`` ok's records with their delivery counts; what
the broker took is every ``ack`` completion's entries with a null error; what was processed is
the final read_committed read of the output topic; how far the group got is the final
``share-state``. Both engines judge these same facts, so a difference between them is a
difference in judging, never in reading.

Which delivery an acknowledgement answers is decided here, while reading, because it is a
fact of the member's own history and not a judgement: a member acknowledges the records it
holds, so an ``ack`` of a record answers that member's latest delivery of it before the
``ack`` was invoked. Order is the merged history's ``index`` (the merge orders by the shared
monotonic clock): "before" and "after" below always mean a smaller or larger index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from history import iter_history
from history.logdump import CheckerInputError
from history.schema import HistoryError

#: (value, partition, offset, op) of a committed input: a seeder value acknowledged at an
#: offset; ``op`` is the index of the ``send`` completion that acknowledged it.
Input = tuple[str, int, int, int]
#: (value, kind, op) of every value the seeder wrote or may have written: ``kind`` is
#: ``input`` (acknowledged), ``maybe`` (sent, never acknowledged: it may have landed),
#: ``aborted`` (written in a transaction the seeder aborted) or ``probe`` (written by the
#: supervisor before the seeder, to see each share partition deliver: owed nothing);
#: ``op`` the first op naming it.
Sent = tuple[str, str, int]
#: (partition, offset, value, count, member, poll invoke index, poll ok index).
Delivery = tuple[int, int, str, int, int, int, int]
#: (partition, offset, value, kind, member, invoke index, completion index or None, status,
#: error, poll ok index of the delivery it answers or None). ``status`` is ``ok`` (the
#: commit was answered: ``error`` None where the broker took it, its code where not),
#: ``info`` (the commit raised: outcome unknown) or ``open`` (the member died before an
#: answer: outcome unknown).
Ack = tuple[int, int, str, str, int, int, "int | None", str, "str | None", "int | None"]
#: (partition, offset, key, value) of a record of the output topic. (The read op itself is
#: no example's evidence: it holds every record of its partition.)
Output = tuple[int, int, "str | None", "str | None"]

_PRIORITY: Final = {"input": 3, "aborted": 2, "maybe": 1, "probe": 0}


@dataclass
class ShareFacts:
    """One run's facts, each list in history order (which both engines' ties fall back on)."""

    #: The workload options judged by: ``delivery_limit``, ``isolation``, ``output_topic``.
    options: dict[str, Any]
    #: One per committed value (its first acknowledgement).
    inputs: list[Input] = field(default_factory=list)
    #: One per value the seeder sent, committed or not.
    sent: list[Sent] = field(default_factory=list)
    #: One per record of a ``poll`` ok.
    deliveries: list[Delivery] = field(default_factory=list)
    #: One per entry of an ``ack`` invocation, with what became of it.
    acks: list[Ack] = field(default_factory=list)
    #: The output topic's final read_committed read, partition by partition.
    outputs: list[Output] = field(default_factory=list)
    #: Index of the last ``share-state`` completion (None: there was none).
    state_op: int | None = None
    #: Whether that ``share-state`` was ok and said the drain finished.
    drained: bool = False
    #: Its share start offset per partition (None: the share partition was never set up)
    #: and the input's read_committed end.
    starts: dict[int, int | None] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    #: Why the share state is not known (a ``share-state`` info), else None.
    state_error: str | None = None
    #: Output reads that did not reach their end: the run cannot be judged (a value missing
    #: from an incomplete read proves nothing).
    unread: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The history the facts came from, where the examples' ops are looked up.
    path: Path | None = None

    @property
    def limit(self) -> int:
        return int(self.options.get("delivery_limit", 5))

    @property
    def isolation(self) -> str:
        return str(self.options.get("isolation") or "read_committed")


def _code(error: Any) -> str | None:
    """An acknowledgement's error as its code (a bare code, or an error object's)."""
    if error is None:
        return None
    if isinstance(error, dict):
        return str(error.get("code") or error.get("message") or "ERROR")
    return str(error)


class _Scan:
    """The state of the one pass: open invocations and who holds which record."""

    def __init__(self, facts: ShareFacts) -> None:
        self.facts = facts
        self.invoked: dict[Any, dict[str, Any]] = {}
        #: (member, partition, offset) -> poll ok index of its latest delivery.
        self.held: dict[tuple[int, int, int], int] = {}
        self.sent: dict[str, tuple[str, int]] = {}
        self.inputs: dict[str, tuple[int, int, int]] = {}
        #: member -> the entries of its open ``ack`` with the delivery each answers.
        self.answers: dict[int, list[tuple[list[Any], int | None]]] = {}
        #: output partition -> its records, None for an incomplete read.
        self.reads: dict[int, list[Any] | None] = {}

    def see(self, op: dict[str, Any]) -> None:
        process = op["process"]
        if op["type"] == "invoke":
            self.invoked[process] = op
        if process == "seeder":
            self._seeder(op)
        elif process == "final":
            self._final(op)
        elif process == "supervisor" and op["f"] == "probe" and op["type"] != "invoke":
            for row in (op.get("value") or {}).get("values") or []:
                self._send(str(row[0]), "probe", op["index"])
        elif isinstance(process, int):
            self._member(op, process)

    def _send(self, value: str, kind: str, op: int) -> None:
        """The most telling op for a value: its acknowledgement over its abort over a send
        that was never acknowledged; of equals the later (a completion over its invocation)."""
        had = self.sent.get(value)
        if had is None or _PRIORITY[kind] >= _PRIORITY[had[0]]:
            self.sent[value] = (kind, op)

    def _seeder(self, op: dict[str, Any]) -> None:
        aborted = op["f"] == "send-aborted"
        if op["f"] not in ("send", "send-aborted"):
            return
        for row in (op.get("value") or {}).get("values") or []:
            value, partition = str(row[0]), int(row[1])
            offset = row[2] if len(row) > 2 else None
            if aborted:
                self._send(value, "aborted", op["index"])
            elif op["type"] != "fail" and offset is not None:
                self._send(value, "input", op["index"])
                self.inputs.setdefault(value, (partition, int(offset), op["index"]))
            else:
                self._send(value, "maybe", op["index"])

    def _member(self, op: dict[str, Any], member: int) -> None:
        kind, value = op["type"], op.get("value") or {}
        if op["f"] == "poll" and kind == "ok":
            invoke = self.invoked.get(member) or op
            for p, o, v, count in value.get("records") or []:
                row = (int(p), int(o), str(v), int(count), member, invoke["index"], op["index"])
                self.facts.deliveries.append(row)
                self.held[(member, int(p), int(o))] = op["index"]
        elif op["f"] == "ack" and kind == "invoke":
            # Which deliveries it answers is decided now; the completion carries the errors.
            self.answers[member] = [
                (e, self.held.get((member, int(e[0]), int(e[1])))) for e in value.get("acks") or []
            ]
        elif op["f"] == "ack":
            self._acked(member, self.invoked.pop(member, None), op)

    def _acked(
        self, member: int, invoke: dict[str, Any] | None, done: dict[str, Any] | None
    ) -> None:
        """The entries of one ``ack``, each with what became of it: taken (``ok``, no error),
        refused (``ok`` with its code), or unknown (``info``, or no completion at all)."""
        answers = self.answers.pop(member, None)
        if invoke is None or answers is None:
            return
        status = "open" if done is None else ("ok" if done["type"] == "ok" else "info")
        got: dict[tuple[int, int, str], Any] = {}
        if status == "ok":
            for e in ((done or {}).get("value") or {}).get("acks") or []:
                got[(int(e[0]), int(e[1]), str(e[3]))] = e[4] if len(e) > 4 else None
        done_index = None if done is None else done["index"]
        for entry, poll in answers:
            p, o, v, kind = int(entry[0]), int(entry[1]), str(entry[2]), str(entry[3])
            # An entry an ok answer leaves out: whether the broker took it is not known.
            known = status != "ok" or (p, o, kind) in got
            error = _code(got.get((p, o, kind))) if known else None
            how = status if known else "info"
            row = (p, o, v, kind, member, invoke["index"], done_index, how, error, poll)
            self.facts.acks.append(row)

    def _final(self, op: dict[str, Any]) -> None:
        if op["type"] == "invoke":
            return
        value, facts = op.get("value") or {}, self.facts
        if op["f"] == "share-state":
            facts.state_op = op["index"]
            facts.drained = op["type"] == "ok" and value.get("drained") is True
            facts.starts, facts.ends = {}, {}
            facts.state_error = None
            if op["type"] != "ok":
                facts.state_error = str(_code(op.get("error")) or "share-state not ok")
                return
            for row in value.get("partitions") or []:
                start, end = row.get("start"), row.get("end")
                facts.starts[int(row["partition"])] = None if start is None else int(start)
                if end is not None:
                    facts.ends[int(row["partition"])] = int(end)
        elif (
            op["f"] == "read"
            and value.get("topic") == facts.options["output_topic"]
            and value.get("isolation") == "read_committed"
        ):
            partition = int(value["partition"])
            ok = op["type"] == "ok"
            self.reads[partition] = (value.get("records") or []) if ok else None

    def finish(self) -> None:
        facts = self.facts
        for member, op in sorted(
            (m, op) for m, op in self.invoked.items() if isinstance(m, int) and op["f"] == "ack"
        ):
            self._acked(member, op, None)  # the member died waiting: outcome unknown
        facts.inputs = [(v, p, o, i) for v, (p, o, i) in self.inputs.items()]
        facts.sent = [(v, kind, i) for v, (kind, i) in self.sent.items()]
        topic = facts.options["output_topic"]
        for partition, read in sorted(self.reads.items()):
            if read is None:
                facts.unread.append(f"{topic}[{partition}]")
                continue
            for offset, key, value, _headers in read:
                facts.outputs.append((partition, int(offset), key, value))
        if not self.reads:
            facts.unread.append(f"{topic} (no final read_committed read)")


def read_facts(path: str | Path, options: dict[str, Any] | None = None) -> ShareFacts:
    """The facts of a merged history; :class:`CheckerInputError` for unusable input.

    ``options`` (the run's ``config.json`` workload options) win over the history header's
    ``meta.workload_options``, which stand in for a history judged without its run directory.
    """
    try:
        with iter_history(path) as reader:
            header = reader.header
            if header is None:
                raise CheckerInputError(f"{path}: empty history")
            meta = dict((header.get("meta") or {}).get("workload_options") or {})
            merged = {**meta, **(options or {})}
            if "output_topic" not in merged:
                raise CheckerInputError(f"{path}: not a share history (no output_topic)")
            facts = ShareFacts(merged, path=Path(path))
            scan = _Scan(facts)
            for op in reader:
                try:
                    scan.see(op)
                except (KeyError, IndexError, TypeError, ValueError) as e:
                    where = f"op {op['index']} ({op['process']} {op['f']} {op['type']})"
                    raise CheckerInputError(f"{path}: {where}: malformed value: {e!r}") from None
            scan.finish()
            facts.notes += reader.warnings
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    return facts


def ops_at(path: Path | None, indexes: set[int]) -> dict[int, dict[str, Any]]:
    """The ops of ``path`` at ``indexes`` (the examples' evidence): a second, bounded pass
    that stops at the last one wanted, so the facts need not keep every op."""
    found: dict[int, dict[str, Any]] = {}
    if path is None or not indexes:
        return found
    last = max(indexes)
    with iter_history(path) as reader:
        for op in reader:
            if op["index"] in indexes:
                found[op["index"]] = dict(op)
            if op["index"] >= last:
                break
    return found
