"""The sink that turns a chunk of validated history ops into Parquet (see :mod:`history.scan`).

Why here and not in Spark: Spark's JSON reader copies a final read's multi-megabyte ``value``
slower than linearly and parses each op twice (once to validate, once per view), while the
scan's workers already hold every op decoded. So each worker writes its chunk's rows straight
to Parquet with Arrow: the generic history table (:func:`checkers.load.history_schema`, an op's
``value`` kept as JSON text) and, when a family asks for them, its typed tables (a
:class:`TypedTables`: the eos family's :class:`checkers.eos.extract.EosTables`, which its views
join with Arrow without parsing any JSON).

Layout under the output directory: ``ops/part-NNNNN.parquet`` and
``<family>/<table>/part-NNNNN.parquet``, one file per chunk (chunk 0 writes every table, even
empty, so each directory exists with its schema).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from checkers.arrow_rows import rows_table
from checkers.json_text import json_value

#: Arrow twin of :func:`checkers.load.history_schema` (Spark reads these files with that one).
OPS_SCHEMA: Final = pa.schema(
    [
        ("index", pa.int64()),
        ("pindex", pa.int64()),
        ("time", pa.int64()),
        ("wall", pa.string()),
        ("process", pa.string()),
        ("process_is_int", pa.bool_()),
        ("type", pa.string()),
        ("f", pa.string()),
        ("value", pa.string()),
        ("error", pa.string()),
        ("error_json", pa.string()),
        ("part", pa.int32()),
    ]
)

#: A row group is written once its values hold this many bytes. Spark's vectorized reader fills
#: a batch of up to 4096 rows of one row group at once; with the slices of big reads (megabytes
#: each) in 128 MiB row groups one batch asked for 84 MB of heap at 10M ops and ended the JVM.
ROW_GROUP_BYTES: Final = 8 << 20
ROW_GROUP_ROWS: Final = 200_000

_decode_fields = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_raw_list = msgspec.json.Decoder(list[msgspec.Raw]).decode
_encode = msgspec.json.encode


class TypedTables(Protocol):
    """A family's typed tables of one chunk, filled during the scan (the class's ``NAME`` is
    the directory they are written under)."""

    NAME: str

    def wants(self, process: int | str, is_int: bool, type_: str, f: str) -> bool: ...

    def add(
        self, index: int, time: int, wall: str, process: int | str, type_: str, f: str, value: bytes
    ) -> None: ...

    def write(self, out: Path, n: int, *, every: bool) -> dict[str, int]: ...


@dataclass(frozen=True)
class ParquetSinks:
    """Sink factory for :func:`history.scan.scan_history`; pickled to the workers.

    ``read_chunk``: a read op with more records than this is stored as several rows, one per
    slice of its records (column ``part`` 0, 1, ...; null for an op stored whole).
    """

    out: str
    read_chunk: int
    #: The family's typed tables written beside the ops (a class, pickled by reference).
    typed: Callable[[], TypedTables] | None = None

    def __call__(self, n: int) -> ParquetSink:
        typed = self.typed() if self.typed is not None else None
        return ParquetSink(Path(self.out), n, self.read_chunk, typed)


class ParquetSink:
    """One chunk's rows: buffered, written as bounded row groups, its typed tables beside."""

    def __init__(self, out: Path, n: int, read_chunk: int, typed: TypedTables | None) -> None:
        self.out, self.n, self.read_chunk = out, n, read_chunk
        self.buf: list[tuple[Any, ...]] = []
        self.bytes = 0
        self.rows = 0
        self.writer: pq.ParquetWriter | None = None
        self.typed = typed

    def add(
        self,
        index: int,
        pindex: int,
        time: int,
        wall: str,
        process: int | str,
        type_: str,
        f: str,
        value: bytes,
        error: bytes | None,
    ) -> None:
        is_int = type(process) is int
        err_text = None
        if error is not None:
            err_text = json_value(error) if error[:1] == b'"' else error
        row = (index, pindex, time, wall, str(process), is_int, type_, f)
        parts = self._read_parts(value) if f == "read" else None
        if parts is None:
            self._row(row, value, err_text, error, None)
        else:
            for i, part in enumerate(parts):
                self._row(row, part, err_text, error, i)
        if self.typed is not None and self.typed.wants(process, is_int, type_, f):
            self.typed.add(index, time, wall, process, type_, f, value)

    def _row(
        self, row: tuple[Any, ...], value: bytes, err: Any, err_json: bytes | None, part: int | None
    ) -> None:
        self.buf.append((*row, value, err, err_json, part))
        self.rows += 1
        self.bytes += len(value)
        if self.bytes >= ROW_GROUP_BYTES or len(self.buf) >= ROW_GROUP_ROWS:
            self._flush()

    def _read_parts(self, value: bytes) -> list[bytes] | None:
        """A big read's value cut into slices of ``read_chunk`` records, each a whole JSON object
        with the op's other keys; None when it is stored whole."""
        try:
            fields = _decode_fields(value)
            records = _decode_raw_list(fields["records"])
        except (msgspec.DecodeError, msgspec.ValidationError, KeyError):
            return None
        if len(records) <= self.read_chunk:
            return None
        head = b"".join(
            _encode(k) + b":" + bytes(v) + b"," for k, v in fields.items() if k != "records"
        )
        head = b"{" + head + b'"records":['
        step = self.read_chunk
        return [
            head + b",".join(bytes(r) for r in records[i : i + step]) + b"]}"
            for i in range(0, len(records), step)
        ]

    def _flush(self) -> None:
        if not self.buf and self.writer is not None:
            return
        if self.writer is None:
            path = self.out / "ops" / f"part-{self.n:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(path, OPS_SCHEMA)
        table = rows_table(self.buf, OPS_SCHEMA)
        self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.buf.clear()
        self.bytes = 0

    def close(self) -> dict[str, int]:
        """Write what is buffered; the summary counts rows per table."""
        self._flush()
        if self.writer is not None:
            self.writer.close()
        if self.typed is None:
            return {"ops_rows": self.rows}
        counts = self.typed.write(self.out / self.typed.NAME, self.n, every=self.n == 0)
        return {"ops_rows": self.rows} | counts
