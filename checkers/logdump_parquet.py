"""A broker log dump as Parquet, converted with msgspec and Arrow when every record is well typed.

Why: the dump only exists once the cluster has stopped, so its conversion is on the verdict's
critical path. Spark's JSON reader took about 1.2 s for a 60 s run's dump (34k records: a JVM
parse, a Parquet write, a validation query), a seventh of the checks after the dump; decoding
the same lines into typed structs and writing them with Arrow takes a tenth of that, and big
dumps are cut into chunks converted by worker processes, as histories are (:mod:`history.scan`).

Only a dump whose every record already has :func:`checkers.load.logdump_schema`'s types (JSON
integers in range, booleans, strings, a list of strings) is converted here, and only when no
line holds anything Spark's reader would count as a header or as corrupt. For anything else
(a number where text belongs, which Spark reads as text, a bad line, a blank line)
:func:`convert` returns None and the caller converts with Spark, exactly as before: the same
rejections, the same one-line errors and the same values.

The files hold the columns the Spark conversion writes, in its order (``_row`` here is the
line's byte offset: it orders the records as they appear in the file, which is all it is used
for).
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from history.logdump_format import FIELDS, KINDS, column_type
from history.scan import line_spans, no_cyclic_gc, span_lines

#: Bytes per chunk, and below how many the file is converted in this process.
CHUNK_BYTES: Final = 16 << 20
INLINE_BYTES: Final = 24 << 20
#: Rows per row group: Spark splits a file by row groups across its cores.
ROW_GROUP: Final = 131_072

_I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
_I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_ABSENT: Final = msgspec.Raw(b"")


class _Record(msgspec.Struct):
    """A record line as Spark's reader types it; any other type of a known field raises."""

    node: _I32
    kind: str
    topic: str
    partition: _I32
    offset: _I64
    producerId: _I64
    producerEpoch: _I32
    isTransactional: bool
    isControl: bool
    baseOffset: _I64 | None = None
    lastOffset: _I64 | None = None
    count: _I32 | None = None
    baseSequence: _I32 | None = None
    lastSequence: _I32 | None = None
    partitionLeaderEpoch: _I32 | None = None
    sequence: _I32 | None = None
    create_time: _I64 | None = None
    header_keys: list[str | None] | None = None
    key: str | None = None
    payload: str | None = None
    marker: str | None = None
    coordinator_epoch: _I32 | None = None
    segment: str | None = None
    nodes: _I32 | None = None
    #: Present and not null, Spark counts the line as a second header: the caller's case.
    logdump_format: msgspec.Raw = _ABSENT


_decode = msgspec.json.Decoder(_Record).decode


def record_schema() -> pa.Schema:
    """The columns of a dumped record as the checkers type them (see docs/history-format.md),
    plus the header's keys; :func:`checkers.load.logdump_schema` is its Spark form."""
    types = {
        "int": pa.int32(),
        "long": pa.int64(),
        "bool": pa.bool_(),
        "strings": pa.list_(pa.string()),
        "string": pa.string(),
    }
    cols = [(name, types[column_type(name)]) for name in FIELDS]
    return pa.schema([*cols, ("logdump_format", pa.int32()), ("nodes", pa.int32())])


def schema() -> pa.Schema:
    """The columns the Spark conversion writes: a record's, the corrupt-record column and
    ``_row``."""
    return (
        record_schema()
        .append(pa.field("_corrupt_record", pa.string()))
        .append(pa.field("_row", pa.int64()))
    )


_SCHEMA: Final = schema()
_EXTRA: Final = ("logdump_format", "nodes", "_corrupt_record")


@dataclass(frozen=True)
class _Chunk:
    path: str
    out: str
    no: int
    start: int
    end: int
    at_eof: bool


@dataclass(frozen=True)
class _Done:
    ok: bool
    rows: int = 0
    torn: bool = False


@no_cyclic_gc()
def _convert_chunk(c: _Chunk) -> _Done:
    """One chunk's records as ``part-NNNNN.parquet``; ``ok=False`` at the first line that is
    not a well-typed record (the torn last line of the file excepted)."""
    lines = span_lines(c.path, c.start, c.end)
    cols: dict[str, list[Any]] = {name: [] for name in FIELDS}
    rows: list[int] = []
    torn = False
    pos = c.start
    last = len(lines) - 1
    for i, line in enumerate(lines):
        try:
            rec = _decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            if c.at_eof and i == last and isinstance(e, msgspec.DecodeError):
                torn = True  # the caller proves it torn by the reader's rule, or gives up
                break
            return _Done(False)
        if rec.kind not in KINDS or (
            rec.logdump_format is not _ABSENT and bytes(rec.logdump_format) != b"null"
        ):
            return _Done(False)
        for name in FIELDS:
            cols[name].append(getattr(rec, name))
        rows.append(pos)
        pos += len(line) + 1
    n = len(rows)
    arrays = [pa.array(cols[name], type=_SCHEMA.field(name).type) for name in FIELDS]
    arrays += [pa.nulls(n, _SCHEMA.field(name).type) for name in _EXTRA]
    arrays.append(pa.array(rows, type=pa.int64()))
    table = pa.Table.from_arrays(arrays, schema=_SCHEMA)
    pq.write_table(table, Path(c.out) / f"part-{c.no:05d}.parquet", row_group_size=ROW_GROUP)
    return _Done(True, n, torn)


def convert(source: Path, out: Path, *, torn_expected: bool) -> int | None:
    """Write ``source``'s records (its header line left out) as Parquet under ``out``; the
    record count, or None when the dump is not plainly well typed (the caller then removes
    ``out`` and converts the dump with Spark). ``torn_expected``: the reader's rule found the
    last line torn; an undecodable last line is skipped only then."""
    with open(source, "rb") as fh:
        fh.readline()
        body = fh.tell()
    size = source.stat().st_size
    out.mkdir(parents=True, exist_ok=True)
    spans = line_spans(source, body, size, CHUNK_BYTES)
    chunks = [_Chunk(str(source), str(out), n, a, b, b >= size) for n, (a, b) in enumerate(spans)]
    workers = min(os.cpu_count() or 1, len(chunks))
    if size - body < INLINE_BYTES or workers < 2:
        done = [_convert_chunk(c) for c in chunks]
    else:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        with ctx.Pool(workers) as pool:
            done = pool.map(_convert_chunk, chunks, chunksize=1)
    torn = any(d.torn for d in done)
    if not all(d.ok for d in done) or torn != torn_expected:
        return None
    return sum(d.rows for d in done)


__all__ = ["convert", "record_schema", "schema"]
