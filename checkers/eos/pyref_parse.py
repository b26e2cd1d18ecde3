"""Parsing an eos history for the pure-Python checks (:mod:`checkers.eos.pyref`).

Why separate: the reference checks stay short loops over these indexed views; the parsing
rules (which ops count, how a drained record is mapped back to its input) live in one place.

Why so frugal: this is also the single-process baseline of ``bench/checker_scale.py``, which
must fit a 10M-op history in one machine's memory. So the history is streamed once and only
what the checks look at is kept, in slotted objects; the few full ops an example shows are
read back from the file by index (:class:`OpsOnDisk`).
"""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.eos.results import transaction_timeout_ms
from checkers.json_text import utf8_safe
from history.eos_records import (
    H_GENERATION,
    H_INSTANCE,
    H_TXN_SEQ,
    input_of,
    source_position,
)
from history.logdump import CheckerInputError
from history.schema import is_nemesis

__all__ = ["EosRun", "Op", "OpsOnDisk", "Rec", "TxnOp", "parse_run", "resolve_record"]

Op = dict[str, Any]


class OpsOnDisk:
    """The history's ops by index, read back from the file on demand.

    The reader has already checked that op ``i`` is the ``i``-th line after the header, so
    the line offsets are found by one scan the first time an op is asked for (only when a
    check builds an example).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._starts: array[int] | None = None

    def _index(self) -> array[int]:
        if self._starts is None:
            starts = array("q")
            pos = 0
            with open(self.path, "rb") as fh:
                first = True
                for line in fh:
                    if not first:
                        starts.append(pos)
                    first = False
                    pos += len(line)
            self._starts = starts
        return self._starts

    def __getitem__(self, index: int) -> Op:
        starts = self._index()
        with open(self.path, "rb") as fh:
            fh.seek(starts[index])
            return json.loads(fh.readline())


class TxnOp:
    """What the checks need of one ``txn`` op: invoke (inputs) or completion (offsets)."""

    __slots__ = ("index", "items", "time", "type")

    def __init__(self, index: int, time: int, type_: str, items: list[Any]) -> None:
        self.index, self.time, self.type, self.items = index, time, type_, items


class Rec:
    """One drained output record, mapped back to its input (see :func:`resolve_record`)."""

    __slots__ = (
        "generation",
        "headers",
        "ident",
        "in_value",
        "instance",
        "key",
        "offset",
        "partition",
        "read_index",
        "src_o",
        "src_p",
        "topic",
        "txn_seq",
        "value",
    )

    def __init__(
        self, topic: str, partition: int, offset: int, key: Any, value: Any, headers: Any, ri: int
    ) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.key, self.value, self.headers, self.read_index = key, value, headers or {}, ri

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)


@dataclass
class EosRun:
    """The parts of an eos history the checks look at, indexed for lookups."""

    ops: OpsOnDisk
    seeds: list[tuple[str, int, int, int]] = field(default_factory=list)  # value, p, o, index
    seed_at: dict[tuple[int, int], str] = field(default_factory=dict)
    poison: set[str] = field(default_factory=set)
    txn_invoke: dict[tuple[int, int], TxnOp] = field(default_factory=dict)  # (instance, seq)
    txn_done: dict[tuple[int, int], TxnOp] = field(default_factory=dict)
    starts: list[Op] = field(default_factory=list)  # start ok ops
    #: A processor's ok rebalance callbacks: instance, index, event, generation, partitions.
    rebalances: list[tuple[int, int, str, int, list[int]]] = field(default_factory=list)
    hijacks: list[Op] = field(default_factory=list)  # nemesis start ok, kind hijack
    drain: list[Rec] = field(default_factory=list)  # read_committed records
    reads_ok: dict[int, bool] = field(default_factory=dict)  # out partition -> read complete
    drain_op: Op | None = None
    committed: dict[int, int] = field(default_factory=dict)  # group's final input offsets
    offsets_op: Op | None = None
    watermarks: list[Op] = field(default_factory=list)
    find_hanging: list[Op] = field(default_factory=list)
    output_topic: str | None = None
    run_dir: Path | None = None
    #: What the reader salvaged (a torn last line): reported as ``input_notes``.
    notes: list[str] = field(default_factory=list)
    #: The run's transaction.timeout.ms, from the header (see eos_results.transaction_timeout_ms).
    txn_timeout_ms: int | None = None
    #: Monotonic time of the last op of a transactional writer (a processor or the seeder).
    last_write: int | None = None
    #: Per-run helpers built on first use (the broker log join of :mod:`checkers.eos.pyref`).
    extras: dict[str, Any] = field(default_factory=dict)


def _int(x: Any) -> int | None:
    try:
        return None if x is None else int(x)
    except (TypeError, ValueError):
        return None


def resolve_record(
    rec: Rec, seed_at: dict[tuple[int, int], str], seed_pos: dict[str, tuple[int, int]]
) -> Rec:
    """Add the input a drained output came from: ``src_p``, ``src_o``, ``in_value``, ``ident``.

    Source headers win; a header-less output (the Java copier) is mapped back by its value.
    ``ident`` is the input's identity for duplicates: ``"p/o"`` when the source position is
    known, else ``"v:<input value>"``.
    """
    h = rec.headers
    pos = source_position(h)
    value = rec.value
    in_value = input_of(value) if isinstance(value, str) else None
    sp, so = pos if pos is not None else (None, None)
    if pos is not None:
        in_value = seed_at.get(pos, in_value)
    elif in_value is not None and in_value in seed_pos:
        sp, so = seed_pos[in_value]
    rec.src_p, rec.src_o, rec.in_value = sp, so, in_value
    rec.ident = f"{sp}/{so}" if sp is not None and so is not None else f"v:{in_value}"
    rec.instance = _int(h.get(H_INSTANCE))
    rec.generation = _int(h.get(H_GENERATION))
    rec.txn_seq = _int(h.get(H_TXN_SEQ))
    return rec


def parse_run(run_dir: str | os.PathLike[str]) -> EosRun:
    """Stream ``<run>/history.jsonl`` through the project's reader; bad input is one-line error."""
    from history import HistoryError, iter_history

    p = Path(run_dir)
    path = p if p.is_file() else p / "history.jsonl"
    if not path.is_file():
        raise CheckerInputError(f"{path}: no such history")
    run = EosRun(ops=OpsOnDisk(path), run_dir=path.parent)
    try:
        with iter_history(path) as reader:
            for op in reader:
                _parse_op(run, op)
            run.notes = list(reader.warnings)
            empty = reader.header is None
            run.txn_timeout_ms = transaction_timeout_ms(reader.header)
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    except OSError as e:
        raise CheckerInputError(f"{path}: cannot read: {e.strerror or e}") from None
    if empty:  # as checkers.load says it: no header, nothing to judge
        raise CheckerInputError(f"{path}: empty history (no header line)")
    seed_pos = {v: (pp, o) for v, pp, o, _i in run.seeds}
    for r in run.drain:
        resolve_record(r, run.seed_at, seed_pos)
    run.drain.sort(key=lambda r: (r.partition, r.offset))
    return run


def _parse_op(run: EosRun, op: Op) -> None:
    f, t, v, proc = op["f"], op["type"], utf8_safe(op.get("value")), op["process"]
    if isinstance(proc, int) or proc == "seeder":
        run.last_write = op["time"] if run.last_write is None else max(run.last_write, op["time"])
    try:
        if proc == "seeder":
            if f == "send" and t in ("ok", "info"):
                for val, part, off in v["values"]:
                    if off is not None:
                        run.seeds.append((val, int(part), int(off), op["index"]))
                        run.seed_at[(int(part), int(off))] = val
            elif f == "send-aborted" and t == "invoke":
                run.poison.update(x[0] for x in v["values"])
        elif isinstance(proc, int):
            if f == "txn":
                key = (proc, int(v["txn"]))
                if t == "invoke":
                    items = [(x[0], x[1], x[2]) for x in v.get("inputs") or []]
                    run.txn_invoke[key] = TxnOp(op["index"], op["time"], t, items)
                else:
                    items = [(x[0], x[1]) for x in v.get("offsets") or []]
                    run.txn_done[key] = TxnOp(op["index"], op["time"], t, items)
            elif f == "start" and t == "ok":
                run.starts.append(op)
            elif f == "rebalance" and t == "ok":
                parts = [int(x[1]) for x in v.get("partitions") or []]
                gen = int(v["generation"])
                run.rebalances.append((proc, op["index"], str(v["event"]), gen, parts))
        elif is_nemesis(proc):
            if f == "start" and t == "ok" and isinstance(v, dict) and v.get("kind") == "hijack":
                run.hijacks.append(op)
        elif proc == "final":
            _parse_final(run, op, f, t, v)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CheckerInputError(
            f"history op {op.get('index')} ({proc} {f} {t}): malformed eos value ({e!r})"
        ) from None


def _parse_final(run: EosRun, op: Op, f: str, t: str, v: Any) -> None:
    if f == "drain" and t != "invoke":
        run.drain_op = op
        if not run.committed:
            run.committed = {int(p): int(o) for p, o in v.get("offsets") or []}
    elif f == "group-offsets" and t == "ok":
        run.offsets_op = op
        run.committed = {int(p): int(o) for _tp, p, o in v["offsets"]}
    elif f == "read" and t != "invoke" and v["isolation"] == "read_committed":
        part = int(v["partition"])
        topic = v["topic"]
        run.output_topic = topic
        run.reads_ok[part] = t == "ok"
        index = op["index"]
        for off, key, value, headers in v.get("records") or []:
            run.drain.append(Rec(topic, part, int(off), key, value, headers, index))
    elif f == "watermarks" and t == "ok":
        run.watermarks.append(op)
    elif f == "find-hanging" and t == "ok":
        run.find_hanging.append(op)
