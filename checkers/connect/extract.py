"""The ``connect`` workload's history as rows: what both engines of its checker read.

Why one parser for both engines: the checker's input is a few final ops holding every
committed record (millions in a long run) plus the records' own JSON values. Decoding those
values the same way in both engines is what lets the tests demand equal results, and it is
parsing, not judging: whether a value is the connector's ``{"task", "seqno", "writer"}`` object
(``bad`` says why not) and whether an offsets-topic key names this connector's task are
decided here once; every anomaly rule runs in the engines (:mod:`checkers.connect.pyref`,
:mod:`checkers.connect.checks`).

The history is validated and streamed by :func:`history.scan.scan_history`; a sink per chunk
keeps the ``"final"`` process: a small *fact* per op (for pairing and completeness) and rows
of the ``ok`` read_committed reads of the data topic and of the ``ok`` offsets read; and of
the ``"tasks"`` process (the task journals), how many ops there are and a row per seqno range
of each ``ok`` ``committed`` op (what Connect confirmed to a task). The reference keeps the
rows in memory; the Spark engine has each chunk write them as Parquet (:data:`DATA_COLUMNS`,
:data:`OFFSETS_COLUMNS`, :data:`CONFIRMED_COLUMNS`). Format: ``docs/history-format.md``,
"Workload connect"; definitions: ``docs/anomalies.md``, "connect workload".

The scan of a run (:func:`checkers.connect.views.scan_connect`) and the plan of which reads
count (:func:`checkers.connect.views.plan`) are :mod:`checkers.connect.views`.

Public API::

    parse_data(key, value), parse_offset_key(key, connector), parse_offset_value(value)
    parse_confirmed(value) -> Confirmed | str          # a committed journal op's value
    DATA_COLUMNS, OFFSETS_COLUMNS, CONFIRMED_COLUMNS, TABLES, FORMAT
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec

from checkers.connect.progress import Progress
from checkers.json_text import NOT_JSON, json_value

__all__ = [
    "CONFIRMED_COLUMNS",
    "DATA_COLUMNS",
    "FORMAT",
    "OFFSETS_COLUMNS",
    "TABLES",
    "Confirmed",
    "ConnectMeta",
    "RowSinks",
    "arrow_schema",
    "connect_meta",
    "parse_confirmed",
    "parse_data",
    "parse_offset_key",
    "parse_offset_value",
    "spark_schema",
]

#: Bump when the rows, their Parquet layout or the facts change (cached Parquet is rebuilt).
FORMAT: Final = 3
#: The process whose ops hold the end-of-run reads.
FINAL: Final = "final"
#: The process whose ops are the task journals' entries.
TASKS: Final = "tasks"
READ_COMMITTED: Final = "read_committed"

#: A committed data record: the op (completion index) that read it, its position, key and
#: value as read, and the value decoded: ``task``, ``seqno``, ``writer``, all null and ``bad``
#: the reason when the record is not the connector's (then it is a ``malformed-record``).
DATA_COLUMNS: Final = (
    ("op", "long"),
    ("partition", "int"),
    ("offset", "long"),
    ("key", "string"),
    ("value", "string"),
    ("task", "long"),
    ("seqno", "long"),
    ("writer", "string"),
    ("bad", "string"),
)
#: An offsets-topic record whose key is ``["<connector>", {"task": t}]`` (others are dropped):
#: ``seqno`` is the value's, null for a tombstone (``value`` null) or an unreadable value
#: (``unreadable``); the engines count only records with a seqno.
OFFSETS_COLUMNS: Final = (
    ("op", "long"),
    ("partition", "int"),
    ("offset", "long"),
    ("key", "string"),
    ("value", "string"),
    ("task", "long"),
    ("seqno", "long"),
    ("unreadable", "boolean"),
)
#: One seqno range ``first..last`` (inclusive) of an ``ok`` ``committed`` op of the task
#: journals (``op``: its completion index): Connect told ``writer``, an instance of ``task``,
#: that these records were safe, at ``ms`` (the task's clock).
CONFIRMED_COLUMNS: Final = (
    ("op", "long"),
    ("task", "long"),
    ("writer", "string"),
    ("first", "long"),
    ("last", "long"),
    ("ms", "long"),
)
#: Every table of rows, by name.
TABLES: Final = {"data": DATA_COLUMNS, "offsets": OFFSETS_COLUMNS, "confirmed": CONFIRMED_COLUMNS}

_I64: Final = 2**63 - 1
_NonNeg = Annotated[int, msgspec.Meta(ge=0, le=_I64)]
_Long = Annotated[int, msgspec.Meta(ge=-_I64 - 1, le=_I64)]
#: A Parquet row group is written at this many rows.
_ROWS_PER_GROUP: Final = 200_000


# ------------------------------------------------------------------------------------------
# The connect process's header meta


@dataclass(frozen=True)
class ConnectMeta:
    """What the ``"connect"`` process's header says about the run (history format)."""

    connector: str
    data_topic: str
    offsets_topic: str
    group_id: str | None = None
    exactly_once: str | None = None
    boundary: str | None = None
    transactional_id_prefix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "data_topic": self.data_topic,
            "offsets_topic": self.offsets_topic,
            "group_id": self.group_id,
            "exactly_once": self.exactly_once,
            "boundary": self.boundary,
            "transactional_id_prefix": self.transactional_id_prefix,
        }


def connect_meta(header: Mapping[str, Any] | None) -> tuple[ConnectMeta | None, str | None]:
    """The connect process's meta from a merged header's ``sources``, or why there is none.

    Why not a hard input error: a connect process that died before recording anything leaves
    an empty file the merge skips; the run is then not judgeable, which is an unknown verdict.
    """
    sources = (header or {}).get("sources")
    meta = None
    for s in sources if isinstance(sources, list) else []:
        if isinstance(s, Mapping) and s.get("process") == "connect":
            meta = s.get("meta")
    if not isinstance(meta, Mapping):
        return None, "the history has no header of the connect process (its meta names the topics)"
    need = ("connector", "data_topic", "offsets_topic")
    missing = [k for k in need if not isinstance(meta.get(k), str) or not meta.get(k)]
    if missing:
        return None, f"the connect process's header meta lacks {', '.join(missing)}"

    def text(k: str) -> str | None:
        v = meta.get(k)
        return v if isinstance(v, str) else None

    return (
        ConnectMeta(
            meta["connector"],
            meta["data_topic"],
            meta["offsets_topic"],
            text("group_id"),
            text("exactly_once"),
            text("boundary"),
            text("transactional_id_prefix"),
        ),
        None,
    )


# ------------------------------------------------------------------------------------------
# Decoding the records' own JSON


class _DataValue(msgspec.Struct):
    task: _NonNeg
    seqno: _NonNeg
    writer: str


_decode_data = msgspec.json.Decoder(_DataValue).decode
_decode_any = msgspec.json.decode


def _loose(text: str) -> Any:
    """Any JSON text as Python (msgspec, else the history reader's rules); NOT_JSON if none."""
    try:
        return _decode_any(text)
    except (msgspec.DecodeError, UnicodeEncodeError):
        pass
    try:
        return json_value(text.encode("utf-8", "surrogatepass"))
    except UnicodeEncodeError:
        return NOT_JSON


def _nonneg(v: Any) -> bool:
    return type(v) is int and 0 <= v <= _I64


def parse_data(
    key: str | None, value: str | None
) -> tuple[int | None, int | None, str | None, str | None]:
    """``(task, seqno, writer, None)`` for the connector's record, else ``(None,)*3 + (why,)``.

    The record is the connector's when its value is a JSON object with ``task`` and
    ``seqno`` (integers >= 0) and ``writer`` (a string), other keys ignored, and its key is
    the task id as decimal text.
    """
    if value is None:
        return None, None, None, "value is null"
    try:
        v = _decode_data(value)
        task, seqno, writer = v.task, v.seqno, v.writer
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
        obj = _loose(value)
        if obj is NOT_JSON:
            return None, None, None, "value is not JSON"
        if not isinstance(obj, dict):
            return None, None, None, "value is not a JSON object"
        if not _nonneg(obj.get("task")):
            return None, None, None, "task is not an integer >= 0"
        if not _nonneg(obj.get("seqno")):
            return None, None, None, "seqno is not an integer >= 0"
        if not isinstance(obj.get("writer"), str):
            return None, None, None, "writer is not a string"
        task, seqno, writer = obj["task"], obj["seqno"], obj["writer"]
    if key != str(task):
        return None, None, None, "key is not the task id as decimal text"
    return task, seqno, writer, None


def parse_offset_key(key: str | None, connector: str) -> int | None:
    """The task ``t`` of a key ``["<connector>", {"task": t}]``; None for any other key."""
    if key is None:
        return None
    k = _loose(key)
    if not (isinstance(k, list) and len(k) == 2 and k[0] == connector):
        return None
    part = k[1]
    if not (isinstance(part, dict) and len(part) == 1 and _nonneg(part.get("task"))):
        return None
    return int(part["task"])


def parse_offset_value(value: str | None) -> tuple[int | None, bool]:
    """``(seqno, unreadable)``: the seqno of ``{"seqno": n}``, None for a tombstone."""
    if value is None:
        return None, False
    v = _loose(value)
    if isinstance(v, dict) and _nonneg(v.get("seqno")):
        return int(v["seqno"]), False
    return None, True


class Confirmed(msgspec.Struct):
    """A ``committed`` journal op's value (other keys ignored)."""

    task: _NonNeg
    writer: str
    seqnos: list[tuple[_NonNeg, _NonNeg]]
    ms: _Long


_decode_confirmed = msgspec.json.Decoder(Confirmed).decode
_CONFIRMED_SHAPE: Final = '{"task", "writer", "seqnos": [[first, last], ...], "ms"}'


def parse_confirmed(value: bytes) -> Confirmed | str:
    """A ``committed`` op's value, or why it is not one (its ranges must not run backwards).

    Why refuse rather than skip: the harness wrote the op from journal lines it parsed, so
    a value outside the format is a harness bug, and skipping it could hide a lost record.
    """
    try:
        got = _decode_confirmed(value)
    except msgspec.ValidationError as e:
        return f"its value is not {_CONFIRMED_SHAPE} ({e})"
    except msgspec.DecodeError:  # a lone surrogate escape: the reader's rules
        try:
            got = msgspec.convert(json_value(value), Confirmed)
        except msgspec.ValidationError as e:
            return f"its value is not {_CONFIRMED_SHAPE} ({e})"
    for first, last in got.seqnos:
        if first > last:
            return f"its seqno range [{first}, {last}] runs backwards"
    return got


# ------------------------------------------------------------------------------------------
# The scan's sink


class _Head(msgspec.Struct):
    """The small keys of a final op's value; ``records`` stays raw (it may be megabytes)."""

    topic: Any = None
    partition: Any = None
    isolation: Any = None
    records: msgspec.Raw = msgspec.Raw(b"null")


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_records = msgspec.json.Decoder(list[list[Any]]).decode

#: One final op: index, type, f, topic, partition, isolation, error code (all JSON-able).
Fact = list[Any]


def _head(value: bytes) -> tuple[_Head, Any]:
    """The value's small keys, and the whole value decoded when msgspec refused it (a lone
    surrogate escape somewhere), else NOT_JSON (the records are then decoded on demand)."""
    try:
        return _decode_head(value), NOT_JSON
    except msgspec.ValidationError:
        return _Head(), NOT_JSON
    except msgspec.DecodeError:
        pass
    v = json_value(value)
    if not isinstance(v, dict):
        return _Head(), NOT_JSON
    return _Head(v.get("topic"), v.get("partition"), v.get("isolation")), v


def _error_code(error: bytes | None) -> str | None:
    if error is None:
        return None
    e = json_value(error)
    if isinstance(e, dict) and isinstance(e.get("code"), str):
        return e["code"]
    return e if isinstance(e, str) else None


@dataclass(frozen=True)
class RowSinks:
    """Sink factory for :func:`history.scan.scan_history` (pickled to its workers).

    ``out`` None keeps the rows in the summaries (the reference); a directory makes each
    chunk write ``<table>/part-N.parquet`` there for each of :data:`TABLES` (chunk 0 always,
    so each directory exists).
    """

    data_topic: str | None
    offsets_topic: str | None
    connector: str | None
    out: str | None = None

    def __call__(self, n: int) -> RowSink:
        return RowSink(self, n)


class RowSink:
    """One chunk: the final ops' facts, the rows of the reads that hold records, and the
    journals' confirmed ranges."""

    def __init__(self, spec: RowSinks, n: int) -> None:
        self.spec, self.n = spec, n
        self.facts: list[Fact] = []
        self.problems: list[str] = []
        self.journal_ops = 0
        self.rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in TABLES}
        self.counts = dict.fromkeys(TABLES, 0)
        self._writers: dict[str, Any] = {}
        self.progress = Progress()

    def add(self, index: int, *op: Any) -> None:
        """One op, as :meth:`history.scan.OpSink.add` gives it (the rest of its fields:
        pindex, time, wall, process, type, f, value and error)."""
        _pindex, _time, wall, process, type_, f, value, error = op
        if type(process) is not str:
            return
        if process == TASKS:
            self._journal(index, type_, f, value)
            return
        if process != FINAL:
            self.progress.op(index, wall, process, type_, f, value)
            return
        head, loaded = _head(value)
        self.facts.append(
            [index, type_, f, _str(head.topic), _int(head.partition), _str(head.isolation),
             _error_code(error)]
        )  # fmt: skip
        if type_ != "ok":
            return
        spec = self.spec
        if f == "read" and head.topic == spec.data_topic and head.isolation == READ_COMMITTED:
            self._data_rows(index, head, loaded)
        elif f == "offsets" and head.topic == spec.offsets_topic and spec.connector is not None:
            self._offset_rows(index, head, loaded, spec.connector)

    def _journal(self, index: int, type_: str, f: str, value: bytes) -> None:
        """Count every journal op (their absence means an older history); keep the ranges
        of the ``ok`` ``committed`` ones (an invoke repeats its completion's value)."""
        self.journal_ops += 1
        if type_ != "ok" or f != "committed":
            return
        got = parse_confirmed(value)
        if isinstance(got, str):
            self.problems.append(f"history op {index}: committed journal op: {got}")
            return
        self.progress.confirm(got.task, got.ms)
        for first, last in got.seqnos:
            self._add("confirmed", (index, got.task, got.writer, first, last, got.ms))

    def _records(self, index: int, head: _Head, loaded: Any) -> list[Any] | None:
        """The op's records as lists; ``loaded`` is the whole value when msgspec refused it."""
        v = NOT_JSON
        if loaded is not NOT_JSON:
            v = loaded.get("records") if isinstance(loaded, dict) else None
        else:
            try:
                return _decode_records(head.records)
            except msgspec.ValidationError:
                v = None
            except msgspec.DecodeError:  # a lone surrogate escape: the reader's rules
                v = json_value(bytes(head.records))
        if isinstance(v, list) and all(isinstance(r, list) for r in v):
            return v
        self.problems.append(f"history op {index}: its records are not a list of lists")
        return None

    def _data_rows(self, index: int, head: _Head, loaded: Any) -> None:
        part = head.partition
        records = self._records(index, head, loaded)
        if records is None:
            return
        if not _nonneg(part) or part > 2**31 - 1:
            self.problems.append(f"history op {index}: read of partition {part!r}")
            return
        for r in records:
            if not (
                len(r) >= 3
                and _nonneg(r[0])
                and (r[1] is None or type(r[1]) is str)
                and (r[2] is None or type(r[2]) is str)
            ):
                self.problems.append(
                    f"history op {index}: read record {str(r)[:60]} is not "
                    "[offset, key, value, headers]"
                )
                return
            task, seqno, writer, bad = parse_data(r[1], r[2])
            self._add("data", (index, part, r[0], r[1], r[2], task, seqno, writer, bad))

    def _offset_rows(self, index: int, head: _Head, loaded: Any, connector: str) -> None:
        records = self._records(index, head, loaded)
        if records is None:
            return
        for r in records:
            if not (
                len(r) >= 4
                and _nonneg(r[0])
                and r[0] <= 2**31 - 1
                and _nonneg(r[1])
                and (r[2] is None or type(r[2]) is str)
                and (r[3] is None or type(r[3]) is str)
            ):
                self.problems.append(
                    f"history op {index}: offsets record {str(r)[:60]} is not "
                    "[partition, offset, key, value]"
                )
                return
            task = parse_offset_key(r[2], connector)
            if task is None:
                continue
            seqno, unreadable = parse_offset_value(r[3])
            self._add("offsets", (index, r[0], r[1], r[2], r[3], task, seqno, unreadable))

    def _add(self, table: str, row: tuple[Any, ...]) -> None:
        buf = self.rows[table]
        buf.append(row)
        self.counts[table] += 1
        if self.spec.out is not None and len(buf) >= _ROWS_PER_GROUP:
            self._flush(table)

    def _flush(self, table: str) -> None:
        import pyarrow.parquet as pq

        from checkers.arrow_rows import rows_table

        buf = self.rows[table]
        schema = arrow_schema(table)
        w = self._writers.get(table)
        if w is None:
            assert self.spec.out is not None
            path = Path(self.spec.out) / table / f"part-{self.n:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            w = self._writers[table] = pq.ParquetWriter(path, schema)
        if buf:
            w.write_table(rows_table(buf, schema))
        buf.clear()

    def close(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "facts": self.facts,
            "problems": self.problems,
            "journal_ops": self.journal_ops,
            "progress": self.progress.as_json(),
        }
        if self.spec.out is None:
            return out | self.rows
        for table in TABLES:
            if self.counts[table] or self.n == 0:
                self._flush(table)
            if table in self._writers:
                self._writers.pop(table).close()
        return out | {"counts": dict(self.counts)}


def _str(v: Any) -> str | None:
    return v if type(v) is str else None


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


def arrow_schema(table: str) -> Any:
    """The Arrow schema of one of :data:`TABLES` (Spark reads it with :func:`spark_schema`)."""
    import pyarrow as pa

    types = {"long": pa.int64(), "int": pa.int32(), "string": pa.string(), "boolean": pa.bool_()}
    return pa.schema([(n, types[t]) for n, t in TABLES[table]])


def spark_schema(table: str) -> str:
    """The DDL schema of one of :data:`TABLES`."""
    return ", ".join(f"{n} {t}" for n, t in TABLES[table])
