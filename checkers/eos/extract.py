"""The eos workload's ops as typed rows, taken out while the history is scanned.

Why: every eos view (:mod:`checkers.eos.views`) needs the fields inside op values: a send's
acknowledged positions, a transaction's inputs and offsets, every drained record and its
headers. Parsing that JSON on Spark cost more than all the checks; the scan's workers have the
op in hand already, so they emit these rows and the views only join them.

The rows follow what Spark's JSON reader made of the values, field for field: a JSON value
stored as text is its text (``true``, ``7``, a string unquoted); a field read as a number is
null when the JSON holds something else; a drained record's headers are a string-to-string map
(empty when absent), and the integers the views join on are read from that text as the Python
reference reads them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from checkers.arrow_rows import rows_table
from checkers.json_text import NOT_JSON, json_value
from history.eos_records import (
    H_GENERATION,
    H_INSTANCE,
    H_SRC_OFFSET,
    H_SRC_PARTITION,
    H_TXN_SEQ,
    input_of,
)

_S = pa.string()
_I = pa.int32()
_L = pa.int64()

#: Table name -> Arrow schema. The eos views read these; column names are theirs.
SCHEMAS: Final[dict[str, pa.Schema]] = {
    "seeds": pa.schema([("value", _S), ("src_p", _I), ("src_o", _L), ("send_index", _L)]),
    "poison": pa.schema([("pv", _S)]),
    "txn_inv": pa.schema(
        [
            ("instance", _I),
            ("txn_seq", _L),
            ("inv_index", _L),
            ("inv_time", _L),
            ("txn_generation", _L),
            ("inputs", pa.list_(pa.list_(_S))),
        ]
    ),
    "txn_done": pa.schema(
        [
            ("instance", _I),
            ("txn_seq", _L),
            ("done_index", _L),
            ("done_type", _S),
            ("done_wall", _S),
            ("txn_offsets", pa.list_(pa.list_(_L))),
        ]
    ),
    "reads": pa.schema([("index", _L), ("partition", _I), ("ok", pa.bool_()), ("topic", _S)]),
    "records": pa.schema(
        [
            ("topic", _S),
            ("partition", _I),
            ("offset", _L),
            ("key", _S),
            ("value", _S),
            ("headers", pa.map_(_S, _S)),
            ("read_index", _L),
            # What the headers and the value say, typed here once (see _record).
            ("h_p", _I),
            ("h_o", _L),
            ("instance", _I),
            ("generation", _L),
            ("txn_seq", _L),
            ("io", _S),
        ]
    ),
    # The final phase's other ops (drain, group-offsets, watermarks, find-hanging): a few
    # small ops every check of the run asks for, kept whole (value = the op's JSON text).
    "finals": pa.schema([("index", _L), ("f", _S), ("type", _S), ("value", _S)]),
    # A processor's consumer-group callbacks: which partitions it was given or lost, when.
    "rebalances": pa.schema(
        [
            ("instance", _I),
            ("index", _L),
            ("event", _S),
            ("generation", _L),
            ("partitions", pa.list_(_I)),
        ]
    ),
    "starts": pa.schema(
        [
            ("process", _S),
            ("nemesis", pa.bool_()),
            ("time", _L),
            ("index", _L),
            ("tid", _S),
            ("kind", _S),
        ]
    ),
}

_I32: Final = 2**31 - 1
_I64: Final = 2**63 - 1
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_encode = msgspec.json.encode


_I32T = Annotated[int, msgspec.Meta(ge=-_I32 - 1, le=_I32)]
_I64T = Annotated[int, msgspec.Meta(ge=-_I64 - 1, le=_I64)]


class _TxnInvoke(msgspec.Struct):
    txn: _I64T | None = None
    generation: _I64T | None = None
    inputs: list[list[_I64T | str | None]] | None = None


class _TxnDone(msgspec.Struct):
    txn: _I64T | None = None
    offsets: list[list[_I64T | None]] | None = None


class _Sent(msgspec.Struct):
    values: list[tuple[str | None, _I32T | None, _I64T | None]] | None = None


_NO_RECORDS: Final = msgspec.Raw(b"")


class _ReadHead(msgspec.Struct):
    """A read's value with its records left undecoded: a read_uncommitted read (as big) is
    skipped, not built."""

    isolation: Any = None
    topic: str | None = None
    partition: _I32T | None = None
    records: msgspec.Raw = _NO_RECORDS


_decode_invoke = msgspec.json.Decoder(_TxnInvoke).decode
_decode_done = msgspec.json.Decoder(_TxnDone).decode
_decode_sent = msgspec.json.Decoder(_Sent).decode
_decode_read = msgspec.json.Decoder(_ReadHead).decode
_decode_records = msgspec.json.Decoder(
    list[tuple[_I64T | None, str | None, str | None, dict[str, str | None] | None]]
).decode


def _text(x: Any) -> str | None:
    """A JSON value as Spark's JSON reader gives it for a string field."""
    if x is None or type(x) is str:
        return x
    if type(x) is bool:
        return "true" if x else "false"
    if type(x) is int:
        return str(x)
    return _encode(x).decode()


def _num(x: Any, top: int = _I64) -> int | None:
    """A JSON integer read into a numeric field; null for anything else or out of range."""
    return x if type(x) is int and -top - 1 <= x <= top else None


def cast_int(x: Any, top: int = _I64) -> int | None:
    """A value read as text, then cast to a number (``"7"`` and ``7`` both give 7)."""
    if type(x) is int:
        return _num(x, top)
    if type(x) is str and _INTEGER.fullmatch(x):
        return _num(int(x), top)
    return None


def _get(v: Any, key: str) -> Any:
    return v.get(key) if type(v) is dict else None


def _items(x: Any) -> list[Any]:
    return x if type(x) is list else []


def _at(x: Any, i: int) -> Any:
    return x[i] if type(x) is list and len(x) > i else None


def _headers(h: Any) -> dict[str, str | None]:
    if type(h) is str:
        h = json_value(h.encode())
    if type(h) is not dict:
        return {}
    return {k: _text(v) for k, v in h.items()}


def _record(
    topic: str | None,
    part: int | None,
    offset: int | None,
    key: str | None,
    value: str | None,
    headers: dict[str, str | None] | None,
    index: int,
) -> tuple[Any, ...]:
    """A drained record's row: as read, plus its source position, writer and input value.

    The numbers are the headers' text read as integers (null when a header is absent, not an
    integer or out of the column's range), as :mod:`checkers.eos.pyref_parse` reads them.
    """
    h = headers or {}
    return (
        topic,
        part,
        offset,
        key,
        value,
        h,
        index,
        _header_int(h.get(H_SRC_PARTITION), _I32),
        _header_int(h.get(H_SRC_OFFSET)),
        _header_int(h.get(H_INSTANCE), _I32),
        _header_int(h.get(H_GENERATION)),
        _header_int(h.get(H_TXN_SEQ)),
        input_of(value) if type(value) is str else None,
    )


def _header_int(text: str | None, top: int = _I64) -> int | None:
    """A header's text as the reference reads it (Python's ``int``), null out of range."""
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        return None
    return v if -top - 1 <= v <= top else None


class EosTables:
    """One chunk's eos rows, as columns per table (a
    :class:`checkers.history_parquet.TypedTables`)."""

    NAME: Final = "eos"

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in SCHEMAS}

    @staticmethod
    def wants(process: int | str, is_int: bool, type_: str, f: str) -> bool:
        """Whether an op feeds a table: cheap, asked of every op."""
        if is_int:
            return f == "txn" or (type_ == "ok" and f in ("start", "rebalance"))
        if process == "seeder":
            return (f == "send" and type_ in ("ok", "info")) or (
                f == "send-aborted" and type_ == "invoke"
            )
        if process == "final":
            return f != "read" or type_ in ("ok", "info")
        return process == "nemesis" and f == "start" and type_ == "ok"

    def add(
        self, index: int, time: int, wall: str, process: int | str, type_: str, f: str, value: bytes
    ) -> None:
        """An op :meth:`wants` accepted. A value that is not valid JSON gives no rows."""
        if process == "final" and f != "read":
            self.rows["finals"].append((index, f, type_, value))
            return
        try:
            if self._typed(index, time, wall, process, type_, f, value):
                return
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass  # an unexpected shape: the general path below gives Spark's reading of it
        v = json_value(value)
        if v is NOT_JSON:
            return
        if type(process) is int:
            if f == "txn":
                self._txn(index, time, wall, process, type_, v)
            elif f == "rebalance":
                self._rebalance(index, process, v)
            else:
                self._start(str(process), False, time, index, v)
        elif process == "seeder":
            if f == "send" and type_ in ("ok", "info"):
                self._seeds(index, v)
            elif f == "send-aborted" and type_ == "invoke":
                poison = [(_text(_at(x, 0)),) for x in _items(_get(v, "values"))]
                self.rows["poison"].extend(poison)
        elif process == "final":
            self._read(index, type_, v)
        else:
            self._start(str(process), True, time, index, v)

    def _typed(
        self, index: int, time: int, wall: str, process: int | str, type_: str, f: str, value: bytes
    ) -> bool:
        """The ops that are most of a history, decoded straight into typed structs: the same
        rows as the general path for every value these types accept (anything else raises and
        goes that way), four times faster. False for an op it does not handle."""
        if type(process) is int and f == "txn":
            if type_ == "invoke":
                inv = _decode_invoke(value)
                inputs = [[str(e) if type(e) is int else e for e in x] for x in inv.inputs or ()]
                row = (process, inv.txn, index, time, inv.generation, inputs)
                self.rows["txn_inv"].append(row)
            else:
                done = _decode_done(value)
                offs = list(done.offsets or ())
                self.rows["txn_done"].append((process, done.txn, index, type_, wall, offs))
            return True
        if process == "seeder" and f == "send" and type_ in ("ok", "info"):
            sent = _decode_sent(value).values or ()
            self.rows["seeds"].extend((v, p, o, index) for v, p, o in sent if o is not None)
            return True
        if process == "final" and f == "read":
            head = _decode_read(value)
            if head.isolation != "read_committed":
                return True
            topic, part = head.topic, head.partition
            recs = () if head.records is _NO_RECORDS else _decode_records(head.records)
            self.rows["reads"].append((index, part, type_ == "ok", topic))
            self.rows["records"].extend(
                _record(topic, part, o, k, v, h, index) for o, k, v, h in recs
            )
            return True
        return False

    def _seeds(self, index: int, v: Any) -> None:
        rows = []
        for x in _items(_get(v, "values")):
            o = cast_int(_at(x, 2))
            if o is not None:
                rows.append((_text(_at(x, 0)), cast_int(_at(x, 1), _I32), o, index))
        self.rows["seeds"].extend(rows)

    def _txn(self, index: int, time: int, wall: str, instance: int, type_: str, v: Any) -> None:
        seq = _num(_get(v, "txn"))
        if type_ == "invoke":
            inputs = [[_text(e) for e in x] for x in _items(_get(v, "inputs")) if type(x) is list]
            row = (instance, seq, index, time, _num(_get(v, "generation")), inputs)
            self.rows["txn_inv"].append(row)
        else:
            offs = [[_num(e) for e in x] for x in _items(_get(v, "offsets")) if type(x) is list]
            self.rows["txn_done"].append((instance, seq, index, type_, wall, offs))

    def _rebalance(self, index: int, instance: int, v: Any) -> None:
        parts = [
            cast_int(_at(x, 1), _I32) for x in _items(_get(v, "partitions")) if type(x) is list
        ]
        event, generation = _text(_get(v, "event")), _num(_get(v, "generation"))
        row = (instance, index, event, generation, [p for p in parts if p is not None])
        self.rows["rebalances"].append(row)

    def _start(self, process: str, nemesis: bool, time: int, index: int, v: Any) -> None:
        tid = _text(_get(v, "transactional_id"))
        self.rows["starts"].append((process, nemesis, time, index, tid, _text(_get(v, "kind"))))

    def _read(self, index: int, type_: str, v: Any) -> None:
        if _get(v, "isolation") != "read_committed":
            return
        topic, part = _text(_get(v, "topic")), _num(_get(v, "partition"), _I32)
        self.rows["reads"].append((index, part, type_ == "ok", topic))
        self.rows["records"].extend(
            _record(
                topic,
                part,
                cast_int(_at(x, 0)),
                _text(_at(x, 1)),
                _text(_at(x, 2)),
                _headers(_at(x, 3)),
                index,
            )
            for x in _items(_get(v, "records"))
            if type(x) is list
        )

    def write(self, out: Path, n: int, *, every: bool) -> dict[str, int]:
        """Write chunk ``n``'s tables (all of them, even empty, when ``every``); row counts."""
        counts = {}
        for name, schema in SCHEMAS.items():
            rows = self.rows[name]
            counts[name] = len(rows)
            if not rows and not every:
                continue
            d = out / name
            d.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows_table(rows, schema), d / f"part-{n:05d}.parquet")
        return counts
